"""A local stand-in for a Google Chat space's incoming webhook (``spaces.messages.create`` with a key and token).

``POST /v1/spaces/{space}/messages?key=...&token=...`` of JSON answers ``200`` with the Message
resource it made (``name``, ``thread``, ``space``, ``text``, ``cardsV2``, ``createTime``), as Google
does. See ``webhook_standin.py`` for the log, the script and the pace.

Threads, as the ``messageReplyOption`` reference says: with ``REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD``
(or ``REPLY_MESSAGE_OR_FAIL``) a message whose ``thread.threadKey`` was seen before in the space
goes in that thread, else it starts one with that key; without the option the key is ignored
and every message starts a thread. ``thread_of(name)`` and ``threads`` tell where each went.

It refuses (``400 INVALID_ARGUMENT``, recorded in ``refusals``) what Google would:

- a body over :data:`LIMIT` bytes, or a ``text`` over :data:`TEXT` characters (counted as UTF-16
  code units, the stricter count): https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages;
- a body that is not JSON, a field the Message resource does not have ("Unknown name"), a message
  with neither ``text`` nor ``cardsV2``, a ``threadKey`` over 4,000 characters;
- a card that is malformed: ``cardsV2`` entries need ``cardId`` and ``card``; a header needs a
  ``title``; a section needs ``widgets``, each widget exactly one known kind (``textParagraph`` and
  ``decoratedText`` with ``text``, ``buttonList`` whose buttons have ``text`` and an
  ``onClick.openLink.url``), at most :data:`WIDGETS` widgets a card
  (https://developers.google.com/workspace/chat/api/reference/rest/v1/cards).

A missing ``key`` or ``token`` is ``403 PERMISSION_DENIED``. Pace: one message a second and 60 a
minute per space (https://developers.google.com/workspace/chat/limits; webhooks: about one a
second); over it, ``429`` with ``{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ...}}``
and no ``Retry-After``, as Google answers.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from aiohttp import web
from webhook_standin import Received, Refused, WebhookStandin

LIMIT, TEXT, THREAD_KEY, WIDGETS = 32_000, 4_096, 4_000, 100
RATES = ((1, 1.0), (60, 60.0))
FIELDS = {"text", "cardsV2", "thread", "fallbackText", "accessoryWidgets", "privateMessageViewer", "annotations"}
REPLY_OPTIONS = ("REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD", "REPLY_MESSAGE_OR_FAIL")
STATUSES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}


def error(code: int, message: str) -> dict:
    """A Google API error body."""
    return {"error": {"code": code, "message": message, "status": STATUSES.get(code, "INTERNAL")}}


def invalid(reason: str) -> Refused:
    return Refused(400, reason, error(400, reason))


def check_message(raw: bytes) -> dict:
    """The message, read and checked; ``Refused`` as Google would answer."""
    if len(raw) > LIMIT:
        raise invalid(f"the message is {len(raw):,} bytes, over {LIMIT:,}")
    try:
        body = json.loads(raw)
    except ValueError:
        raise invalid("Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise invalid("Invalid JSON payload received: not an object.")
    if unknown := sorted(set(body) - FIELDS):
        raise invalid(f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at 'message'.")
    text = body.get("text", "")
    if not isinstance(text, str) or len(text.encode("utf-16-le")) // 2 > TEXT:
        raise invalid(f"text is over {TEXT} characters")
    if not text and not body.get("cardsV2"):
        raise invalid("Message cannot be empty.")
    key = (body.get("thread") or {}).get("threadKey", "")
    if not isinstance(key, str) or len(key) > THREAD_KEY:
        raise invalid("threadKey is over 4,000 characters")
    for index, entry in enumerate(body.get("cardsV2") or []):
        check_card(entry, f"cardsV2[{index}]")
    return body


def check_card(entry: Any, place: str) -> None:
    if not isinstance(entry, dict) or not entry.get("cardId") or not isinstance(entry.get("card"), dict):
        raise invalid(f"{place}: needs cardId and card")
    card = entry["card"]
    if "header" in card and not (card["header"] or {}).get("title"):
        raise invalid(f"{place}.card.header: needs a title")
    sections = card.get("sections") or []
    widgets = [widget for section in sections for widget in (section or {}).get("widgets") or []]
    if not sections or any(not (section or {}).get("widgets") for section in sections):
        raise invalid(f"{place}.card: every section needs widgets")
    if len(widgets) > WIDGETS:
        raise invalid(f"{place}.card: {len(widgets)} widgets, over {WIDGETS}")
    for index, widget in enumerate(widgets):
        check_widget(widget, f"{place}.card widget {index}")


def check_widget(widget: Any, place: str) -> None:
    if not isinstance(widget, dict) or len(widget) != 1:
        raise invalid(f"{place}: a widget is exactly one of textParagraph, decoratedText, buttonList")
    kind, value = next(iter(widget.items()))
    if kind in ("textParagraph", "decoratedText"):
        if not isinstance(value, dict) or not isinstance(value.get("text"), str) or not value["text"]:
            raise invalid(f"{place}: {kind} needs text")
    elif kind == "buttonList":
        buttons = value.get("buttons") if isinstance(value, dict) else None
        if not buttons or not all(
            isinstance(b, dict) and b.get("text") and str(b.get("onClick", {}).get("openLink", {}).get("url", ""))
            for b in buttons
        ):
            raise invalid(f"{place}: every button needs text and onClick.openLink.url")
    else:
        raise invalid(f"{place}: unknown widget {kind!r}")


class GoogleChatStandin(WebhookStandin):
    """A space's webhook at :attr:`url` (any space name works; each is paced and threaded on its own)."""

    service = "google-chat"

    def __init__(self, rates: tuple[tuple[int, float], ...] = RATES) -> None:
        super().__init__(rates)
        self.threads: dict[tuple[str, str], str] = {}  # (space, threadKey) -> thread name
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/spaces/AAAA1234/messages?key=standin-key&token=standin-token"

    def thread_of(self, name: str) -> str:
        """The thread the message ``name`` went to."""
        with self._lock:
            return next(r.thread for r in self.received if r.name == name)

    def in_thread(self, thread: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.thread == thread]

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/spaces/{space}/messages", self._post)

    async def _post(self, request: web.Request) -> web.Response:
        raw, space = await request.read(), request.match_info["space"]
        scripted = self.next_scripted()
        if scripted is not None:
            return self._scripted(scripted)
        try:
            if not request.query.get("key") or not request.query.get("token"):
                raise Refused(403, "no key or token in the URL", error(403, "The caller does not have permission"))
            body = check_message(raw)
        except Refused as refused:
            self.refuse(refused, raw[: LIMIT * 2])
            return web.json_response(refused.answer, status=refused.status)
        now = time.time()
        if self.spend(space, now):
            return web.json_response(error(429, "Resource has been exhausted (e.g. check quota)."), status=429)
        return web.json_response(self._accept(space, body, dict(request.query), now))

    def _accept(self, space: str, body: dict, query: dict, now: float) -> dict:
        with self._lock:
            number = next(self._ids)
            key = (body.get("thread") or {}).get("threadKey", "")
            threaded = key and query.get("messageReplyOption") in REPLY_OPTIONS
            thread = self.threads.setdefault((space, key), f"spaces/{space}/threads/T{number}") if threaded else ""
            thread = thread or f"spaces/{space}/threads/T{number}"
            name = f"spaces/{space}/messages/M{number}.M{number}"
            self.received.append(Received(now, body, name=name, thread=thread, query=query))
            self.calls.append((now, 200))
        created = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(now))
        answer = {"name": name, "space": {"name": f"spaces/{space}"}, "thread": {"name": thread}, "createTime": created}
        return {**answer, **{k: body[k] for k in ("text", "cardsV2") if k in body}}

    def _scripted(self, answer: tuple) -> web.Response:
        status = answer[0]
        self.log(status)
        headers = {"Retry-After": str(answer[1])} if status == 429 and len(answer) > 1 and answer[1] is not None else {}
        message = {404: "Requested entity was not found.", 429: "Resource has been exhausted (e.g. check quota)."}
        return web.json_response(error(status, message.get(status, "Internal error")), status=status, headers=headers)
