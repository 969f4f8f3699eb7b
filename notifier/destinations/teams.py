"""Microsoft Teams, through a Workflows webhook: each message is one Adaptive Card (version 1.5).

What Microsoft documents, and what this module does about it:

- The body is a ``message`` whose one attachment is an Adaptive Card
  (https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using,
  "Send Adaptive Cards using an incoming webhook"); Workflows answers ``202 Accepted``.
- A message is at most 28 KB ("The message size limit is 28 KB. When the size exceeds 28 KB, you
  receive an error": https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook,
  and the Workflows connector's "message size limit is approximately 28 KB":
  https://learn.microsoft.com/en-us/connectors/teams/). Every part is cut with ``…`` so that the
  body, as sent, is within :data:`LIMIT` bytes, whatever the event; nothing is refused.
- Pace: "If more than four requests are made in a second, the client connection is throttled"; the
  connectors' table allows 4 a second, 60 in 30 s, 100 an hour, 1,800 a day
  (connectors-using, "Rate limiting for connectors"). The default here, ``4/1s,30/30s``, is the
  contract's, within those; a destination's ``rate`` can add the longer windows.
- Mentions: a card mentions someone only through ``<at>name</at>`` *and* an entry in the card's
  ``msteams.entities`` (https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-format,
  "Mention support within Adaptive Cards"). The gateway never adds ``msteams.entities``, and breaks
  any ``<at>`` in an event's text besides, so that a card cannot start to mention if Teams ever
  reads the tag alone; ``@channel``-style words are broken with a zero-width space as on every kind.
- Adaptive Card text is Markdown (``TextBlock``, ``Fact.title`` and ``Fact.value``); HTML is not
  read (cards-format), so nothing else is escaped.

Teams Workflows cannot edit a posted card, nor thread: a resolution is a new card headed ``Resolved``.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from ..errors import Permanent
from ..rules import Rule, parse_rules
from ..view import View
from .base import Message, Posted, view_of
from .fitting import Budget, cut, size
from .webhook import Hook

LIMIT = 28_000  # bytes of the body as sent ("28 KB", read as the smaller of 28,000 and 28,672)
RATE = "4/1s,30/30s"
CARD_VERSION = "1.5"
LINKS, LINES = 5, 5  # link buttons, as on Slack; state lines (a message has at most four)
HEAD, META, TITLE, LINK_TEXT, LINE, FACT_NAME, FACT_VALUE = 300, 300, 2_000, 200, 400, 400, 2_000
MORE = 100  # bytes kept for the last fact, "… 9,800 more fields not shown"
ZWSP = "\u200b"  # a zero-width space: breaks a mention's syntax, shows nothing
_AT_TAG = re.compile(r"<(?=\s*/?\s*at[\s>])", re.IGNORECASE)
_BROADCAST = re.compile(r"@(?=(?:all|channel|here|everyone|team)\b)", re.IGNORECASE)
_COLORS = {"critical": "Attention", "error": "Attention", "warning": "Warning", "info": "Accent"}


def defuse(text: str) -> str:
    """``text`` that mentions no one: ``<at>`` and ``@channel``-style words broken by a zero-width space.

    A Markdown link (``[Runbook](https://elsewhere)``) is broken too, as Slack's escaping breaks
    ``<url|label>``: an event shows its URLs as written, never behind a label; the link buttons are
    the gateway's.
    """
    return _BROADCAST.sub("@" + ZWSP, _AT_TAG.sub("<" + ZWSP, text)).replace("](", "]" + ZWSP + "(")


def paragraphs(text: str) -> str:
    """``text`` with its line breaks shown: in a ``TextBlock`` a line ends with ``\n\n`` (cards-format,
    "Newlines for Adaptive Cards"); a single ``\n`` is read as a space outside lists."""
    return text.replace("\r\n", "\n").replace("\n", "\n\n")


def envelope(card: dict[str, Any]) -> dict[str, Any]:
    """The Workflows webhook body carrying ``card``."""
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def shape(view: View) -> dict[str, Any]:
    """The webhook body for ``view``: one Adaptive Card, within :data:`LIMIT` bytes as sent."""
    card: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        "body": [],
    }
    actions: list[dict[str, Any]] = []
    budget = Budget(LIMIT, envelope({**card, "actions": []}))
    body: list[dict[str, Any]] = card["body"]
    # What is always shown comes first: the head, severity and category, title, state; then the links, within
    # a quarter of the room; the text, leaving room for the fields (half of what is left, at most); the fields.
    top, lines = _top(view, budget), _lines(view, budget)
    links = _links(view, budget, budget.left // 4)
    text = _text_block(view.text, budget, keep=min(_facts_need(view), budget.left // 2))
    body += [*top, *text, *_facts(view, budget), *lines]
    actions += links
    if actions:
        card["actions"] = actions
    if not body:  # a card needs something to show
        body.append({"type": "TextBlock", "text": ZWSP})
    return envelope(card)


def _top(view: View, budget: Budget) -> list[dict[str, Any]]:
    """The head (``Resolved``, ``Firing again``, a note's), the ``[severity] category`` line and the title."""
    blocks = []
    if view.head:
        color = "Good" if view.resolved else "Attention" if view.head == "Firing again" else "Default"
        blocks.append(_block(view.head, budget, HEAD, weight="Bolder", color=color, size="Medium"))
    if view.severity or view.category:
        meta = " ".join(part for part in (f"[{view.severity}]" if view.severity else "", view.category) if part)
        blocks.append(_block(meta, budget, META, color=_COLORS.get(view.severity, "Default"), isSubtle=True))
    if view.title:
        blocks.append(_block(view.title, budget, TITLE, weight="Bolder", size="Large"))
    return [block for block in blocks if block]


def _block(text: str, budget: Budget, cap: int, *, keep: int = 0, **style: str | bool) -> dict[str, Any]:
    """A wrapping ``TextBlock`` of ``text`` (defused), cut to ``cap`` and to what the budget leaves; {} if none."""
    frame = {"type": "TextBlock", "text": "", "wrap": True, **style}
    room = min(cap, budget.text_room(frame, keep))
    block = {**frame, "text": cut(paragraphs(defuse(text)), room)}
    return block if block["text"] and budget.fits(block) else {}


def _text_block(text: str, budget: Budget, keep: int) -> list[dict[str, Any]]:
    block = _block(text, budget, budget.left, keep=keep) if text else {}
    return [block] if block else []


def _lines(view: View, budget: Budget) -> list[dict[str, Any]]:
    """What changed since the alert was first posted (``Seen 3 times...``), small and subtle; the first few."""
    blocks = [_block(line, budget, LINE, isSubtle=True, size="Small", spacing="Small") for line in view.lines[:LINES]]
    return [block for block in blocks if block]


def _links(view: View, budget: Budget, room: int) -> list[dict[str, Any]]:
    """The event's links as ``Action.OpenUrl`` buttons within ``room`` bytes; one that does not fit is left out
    (a URL is never cut)."""
    actions = []
    for link in view.links[:LINKS]:
        title = cut(defuse(link.text), LINK_TEXT) or cut(link.url, LINK_TEXT)
        action = {"type": "Action.OpenUrl", "title": title, "url": link.url}
        if budget.fits(action, keep=budget.left - room):
            room -= size(action) + 2
            actions.append(action)
    return actions


def _facts_need(view: View) -> int:
    """About the bytes the fields would take whole (bounded: a few thousand fields are never all shown)."""
    return sum(len(name[:FACT_NAME]) + len(value[:FACT_VALUE]) + 40 for name, value in view.fields[:200])


def _facts(view: View, budget: Budget) -> list[dict[str, Any]]:
    """The fields as one ``FactSet``, as many as fit; the rest counted in a last fact (``… 9,800 more fields``)."""
    if not view.fields:
        return []
    budget.fits({"type": "FactSet", "facts": []})  # its frame; a few bytes, kept even if no fact fits
    facts: list[dict[str, str]] = []
    for index, (name, value) in enumerate(view.fields):
        left = len(view.fields) - index
        fact = {"title": cut(defuse(name), FACT_NAME), "value": cut(defuse(value), min(FACT_VALUE, budget.left // 2))}
        if not budget.fits(fact, keep=MORE if left > 1 else 0):  # keep room to say how many are not shown
            more = {"title": "…", "value": f"{left:,} more {'field' if left == 1 else 'fields'} not shown"}
            facts += [more] if budget.fits(more) else []
            break
        facts.append(fact)
    return [{"type": "FactSet", "facts": facts}] if facts else []


class TeamsSink:
    """Posts each message as an Adaptive Card to a Teams Workflows webhook (no edits, no threads)."""

    name = "teams"
    paced = True
    edits = False
    threads = False

    def __init__(self, url: str, session: aiohttp.ClientSession, rate: tuple[Rule, ...] | None = None) -> None:
        self.rate = rate if rate is not None else parse_rules(RATE)
        self._hook = Hook(url, session)

    async def post(self, message: Message) -> Posted:
        """Post ``message``'s view as a card; Teams gives no id back (``ts`` is ``""``)."""
        await self._hook.call("POST", self._hook.url, shape(view_of(message)))
        return Posted(message.channel, "")

    async def update(self, posted: Posted, message: Message) -> None:
        """Teams Workflows cannot edit a card it posted."""
        raise Permanent("a Teams Workflows webhook cannot edit messages")
