"""A local stand-in for a Microsoft Teams Workflows webhook ("Post to a channel when a webhook request is received").

It takes ``POST`` of JSON at any path (``url`` is one), and answers ``202 Accepted`` with an empty
body, as Workflows does. See ``webhook_standin.py`` for the log, the script and the pace.

It refuses (``400``, recorded in ``refusals``) what Teams would not show:

- a body over :data:`LIMIT` bytes ("The message size limit is 28 KB", read strictly as 28,000:
  https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook);
- a body that is not JSON, not ``{"type": "message", "attachments": [...]}``, or whose attachments
  are not Adaptive Cards (``contentType`` ``application/vnd.microsoft.card.adaptive``, ``content``
  an ``AdaptiveCard``): https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using;
- a card the Adaptive Cards JavaScript library reports an error for (``adaptive_cards.py``:
  ``AdaptiveCard.parse`` against version 1.5, then ``validateProperties``); its warnings are kept
  in ``warnings``, and every card is kept with what the library said in ``reports``;
- a card with ``msteams.entities`` (a mention): the gateway never mentions anyone.

Pace: Microsoft's table for connectors and incoming webhooks, 4 requests a second and 60 in 30
seconds per webhook (connectors-using, "Rate limiting for connectors"); the longer windows (100
an hour, 1,800 a day) only when asked (``rates=``), or tests that post a few hundred would stall.
Over it: ``429`` with ``Retry-After`` and a Power Automate-style error body.
"""

from __future__ import annotations

import json
import time
from typing import Any

from adaptive_cards import CardReport, validator
from aiohttp import web
from webhook_standin import Received, Refused, WebhookStandin

LIMIT = 28_000
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
RATES = ((4, 1.0), (60, 30.0))
DOCUMENTED = (*RATES, (100, 3600.0), (150, 7200.0), (1800, 86400.0))


def error(code: str, message: str) -> dict:
    """A Workflows (Logic Apps) error body."""
    return {"error": {"code": code, "message": message}}


def cards_of(body: Any) -> list[dict]:
    """The Adaptive Cards of a webhook body; ``Refused`` when it is not one Teams takes."""
    if not isinstance(body, dict) or body.get("type") != "message":
        raise Refused(400, 'the body is not {"type": "message", ...}', error("InvalidRequestContent", "not a message"))
    attachments = body.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        raise Refused(400, "no attachments", error("InvalidRequestContent", "attachments missing"))
    cards = []
    for index, attachment in enumerate(attachments):
        content = attachment.get("content") if isinstance(attachment, dict) else None
        if not isinstance(attachment, dict) or attachment.get("contentType") != CARD_TYPE:
            raise Refused(400, f"attachments[{index}] is not an Adaptive Card", error("InvalidRequestContent", "type"))
        if not isinstance(content, dict) or content.get("type") != "AdaptiveCard":
            raise Refused(
                400, f"attachments[{index}].content is not an AdaptiveCard", error("InvalidRequestContent", "")
            )
        if (content.get("msteams") or {}).get("entities"):
            raise Refused(400, f"attachments[{index}] mentions someone (msteams.entities)", error("Mention", ""))
        cards.append(content)
    return cards


class TeamsStandin(WebhookStandin):
    """A Teams Workflows webhook at :attr:`url` (and any other path: each path is a webhook of its own)."""

    service = "teams"

    def __init__(self, rates: tuple[tuple[int, float], ...] = RATES) -> None:
        super().__init__(rates)
        self.reports: list[tuple[dict, CardReport]] = []  # every card received, with what the library said
        self.warnings: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/workflows/0a1b2c/triggers/manual/paths/invoke?sig=standin"

    def cards(self) -> list[dict]:
        """The Adaptive Cards of the accepted messages, in order."""
        return [card for body in self.bodies() for card in cards_of(body)]

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/{path:.*}", self._post)

    async def _post(self, request: web.Request) -> web.Response:
        raw = await request.read()
        scripted = self.next_scripted()
        if scripted is not None:
            return self._scripted(scripted)
        try:
            body = self._check(raw)
        except Refused as refused:
            self.refuse(refused, raw[: LIMIT * 2])
            return web.json_response(refused.answer, status=refused.status)
        now = time.time()
        wait = self.spend(request.path, now)
        if wait:
            message = f"Rate limit is exceeded. Try again in {wait} seconds."
            return web.json_response(error("TooManyRequests", message), status=429, headers={"Retry-After": str(wait)})
        with self._lock:
            self.received.append(Received(now, body, query=dict(request.query)))
            self.calls.append((now, 202))
        return web.Response(status=202)

    def _check(self, raw: bytes) -> dict:
        """The body, read and checked (``Refused`` when Teams would not show it)."""
        if len(raw) > LIMIT:
            raise Refused(413, f"the body is {len(raw):,} bytes, over {LIMIT:,}", error("MessageSizeTooBig", ""))
        try:
            body = json.loads(raw)
        except ValueError:
            raise Refused(400, "the body is not JSON", error("InvalidRequestContent", "not JSON")) from None
        for card in cards_of(body):
            report = validator().check(card)
            with self._lock:
                self.reports.append((card, report))
                self.warnings += report.warnings
            if report.errors:
                raise Refused(400, "invalid card: " + "; ".join(report.errors), error("InvalidCard", ""))
        return body

    def _scripted(self, answer: tuple) -> web.Response:
        status = answer[0]
        self.log(status)
        if status == 429:
            headers = {"Retry-After": str(answer[1])} if len(answer) > 1 and answer[1] is not None else {}
            return web.json_response(error("TooManyRequests", "Rate limit is exceeded."), status=429, headers=headers)
        if status == 404:
            return web.json_response(error("WorkflowNotFound", "The workflow was not found."), status=404)
        return web.json_response(error("InternalServerError", "upstream trouble"), status=status)
