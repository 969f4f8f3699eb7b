"""Google Chat, through a space's incoming webhook: a one-line ``text`` and a card (``cardsV2``), threaded by key.

What Google documents, and what this module does about it:

- A webhook message is a ``spaces.messages.create`` body: ``text`` and ``cardsV2``
  (https://developers.google.com/workspace/chat/quickstart/webhooks and
  https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages). Its ``text``
  is at most 4,096 characters and the whole message at most 32,000 bytes (the Message resource's
  limits); every part is cut with ``…`` so that the body, as sent, is within :data:`LIMIT` bytes.
- Threads: messages with the same ``thread.threadKey`` share a thread when posted with
  ``messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD`` ("Creates the message as a reply to
  the thread specified by thread ID or thread_key. If it fails, the message starts a new thread
  instead": the ``MessageReplyOption`` reference). An alert's messages carry its dedup key, so its
  resolution is a reply in its thread.
- Pace: 60 message writes a minute per space, webhooks included, with further limits on incoming
  webhooks (https://developers.google.com/workspace/chat/limits), and a webhook's space takes about
  one request a second: the default here is ``1/1s,60/1m``. Over it, Google answers ``429`` with
  ``{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ...}}``.
- Mentions: in ``text``, ``<users/{user}>`` mentions one person and ``<users/all>`` everyone
  (https://developers.google.com/workspace/chat/format-messages, "Mention users"); ``<url|label>``
  is a link. Every ``<`` of an event's text is followed by a zero-width space, so none of these forms
  can be written, and ``@all``-style words are broken the same way. Card text is a subset of HTML
  (format-messages, "Format text in cards"): it is escaped (``&lt;``), so nothing in it is a tag or a
  mention either.

A webhook cannot edit what it posted (that takes a Chat app's credentials): repeats are only counted.
"""

from __future__ import annotations

import html
import re
from typing import Any

import aiohttp

from ..errors import Permanent
from ..rules import Rule, parse_rules
from ..view import View
from .base import Message, Posted, view_of
from .fitting import ELLIPSIS, Budget, cut, cut_units, size
from .webhook import Hook

LIMIT = 32_000  # bytes of a message
TEXT = 4_096  # characters of its text
RATE = "1/1s,60/1m"
REPLY = {"messageReplyOption": "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"}
THREAD_KEY = 4_000  # characters of a thread key
WIDGETS = 100  # widgets a card shows; fields past it are counted, not shown
LINKS, LINES = 5, 5  # link buttons, as on Slack; state lines (a message has at most four)
HEAD, TITLE, SUMMARY, FIELD_NAME, FIELD_VALUE, LINE, LINK_TEXT = 300, 1_000, 1_000, 300, 2_000, 400, 200
MORE = 150  # bytes kept for the last widget, "… 9,800 more fields not shown"
ZWSP = "\u200b"
EMPTY = "—"  # a field's value when it has none
_BROADCAST = re.compile(r"@(?=(?:all|channel|here|everyone)\b)", re.IGNORECASE)


def defuse(text: str) -> str:
    """``text`` in which no ``<users/...>``, ``<url|label>``, ``[label](url)`` (a space whose webhook reads
    Markdown) or ``@all`` can be read: each broken by a zero-width space."""
    return _BROADCAST.sub("@" + ZWSP, text.replace("<", "<" + ZWSP)).replace("](", "]" + ZWSP + "(")


def card_text(raw: str, room: int) -> str:
    """``raw`` as card HTML (escaped, newlines as ``<br>``) within ``room`` bytes, never cut inside an entity or tag."""
    escaped = html.escape(_BROADCAST.sub("@" + ZWSP, raw), quote=False).replace("\n", "<br>")
    kept = cut(escaped, room)
    if kept == escaped or not kept:
        return kept
    body = kept.removesuffix(ELLIPSIS)
    for opener, closer in (("&", ";"), ("<", ">")):
        start = body.rfind(opener)
        if start >= 0 and closer not in body[start:]:
            body = body[:start]
    return body + ELLIPSIS


def shape(view: View) -> dict[str, Any]:
    """The webhook body for ``view``: a summary ``text``, one card, and its thread key; within :data:`LIMIT` bytes."""
    card: dict[str, Any] = {"sections": []}
    body: dict[str, Any] = {"text": "", "cardsV2": [{"cardId": "notifier", "card": card}]}
    if view.thread_key:
        body["thread"] = {"threadKey": cut_units(view.thread_key, THREAD_KEY)}
    budget = Budget(LIMIT, body)
    body["text"] = cut_units(cut(defuse(summary(view)), min(SUMMARY, budget.left // 4)), TEXT)
    budget.left -= size(body["text"])
    if header := _header(view, budget):
        card["header"] = header
    sections: list[dict[str, Any]] = card["sections"]
    sections += _paragraphs([f"<b>{card_text(view.head, HEAD)}</b>"] if view.head else [], budget)
    # As on Teams: the state lines first, the links within a quarter of the room, the text leaving room
    # for the fields (half of what is left, at most), then the fields.
    lines = _lines(view, budget)
    buttons = _buttons(view, budget, budget.left // 4)
    sections += _text(view, budget) + _fields(view, budget) + lines + buttons
    if not sections:  # a card needs a section
        sections.append({"widgets": [{"textParagraph": {"text": ZWSP}}]})
    body["cardsV2"][0]["card"] = {key: card[key] for key in ("header", "sections") if key in card}  # header first
    return body


def summary(view: View) -> str:
    """One line for notifications: ``Resolved: [warning] db: Disk full`` (the title, else the text's first line)."""
    meta = " ".join(part for part in (f"[{view.severity}]" if view.severity else "", view.category) if part)
    what = view.title or view.text.split("\n", 1)[0]
    return ": ".join(part for part in (view.head, meta, what) if part)


def _header(view: View, budget: Budget) -> dict[str, str]:
    """The card's header: the title (else the category), and ``[severity] category`` under it."""
    meta = " ".join(part for part in (f"[{view.severity}]" if view.severity else "", view.category) if part)
    title, subtitle = (view.title, meta) if view.title else (meta, "")
    if not title:
        return {}
    header = {"title": cut(title, min(TITLE, budget.left // 4))}
    if subtitle:
        header["subtitle"] = cut(subtitle, HEAD)
    return header if budget.fits({"header": header}) else {}


def _paragraphs(texts: list[str], budget: Budget) -> list[dict[str, Any]]:
    """One section of ``textParagraph`` widgets (texts already card HTML), as many as fit."""
    widgets = [{"textParagraph": {"text": text}} for text in texts if text]
    kept = [widget for widget in widgets if budget.fits(widget)]
    return [{"widgets": kept}] if kept and budget.fits({"widgets": []}) else []


def _text(view: View, budget: Budget) -> list[dict[str, Any]]:
    """The event's text, leaving room for the fields (as much as half of what is left)."""
    if not view.text:
        return []
    need = sum(len(name[:FIELD_NAME]) + len(value[:FIELD_VALUE]) + 60 for name, value in view.fields[:WIDGETS])
    frame = {"widgets": [{"textParagraph": {"text": ""}}]}
    room = budget.text_room(frame, keep=min(need, budget.left // 2))
    return _paragraphs([card_text(view.text, room)], budget)


def _fields(view: View, budget: Budget) -> list[dict[str, Any]]:
    """The fields as ``decoratedText`` widgets (name above, value below), as many as fit; the rest counted."""
    widgets: list[dict[str, Any]] = []
    if not view.fields or not budget.fits({"widgets": []}):
        return []
    for index, (name, value) in enumerate(view.fields):
        left = len(view.fields) - index
        room = min(FIELD_VALUE, budget.left // 2)
        widget = {"decoratedText": _decorated(name, value, room)}
        if index >= WIDGETS - 1 or not budget.fits(widget, keep=MORE if left > 1 else 0):
            more = {
                "decoratedText": {"text": f"{ELLIPSIS} {left:,} more {'field' if left == 1 else 'fields'} not shown"}
            }
            widgets += [more] if budget.fits(more) else []
            break
        widgets.append(widget)
    return [{"widgets": widgets}] if widgets else []


def _decorated(name: str, value: str, room: int) -> dict[str, Any]:
    """A field: its name above, its value (``—`` when empty: Google needs a text) below."""
    label = card_text(name, FIELD_NAME)
    shown = {"topLabel": label} if label else {}
    return {**shown, "text": card_text(value, room) or EMPTY, "wrapText": True}


def _lines(view: View, budget: Budget) -> list[dict[str, Any]]:
    """What changed since the alert was first posted (``Seen 3 times...``); the first few."""
    return _paragraphs([card_text(line, min(LINE, budget.left // 8)) for line in view.lines[:LINES]], budget)


def _buttons(view: View, budget: Budget, room: int) -> list[dict[str, Any]]:
    """The event's links as ``openLink`` buttons within ``room`` bytes; one that does not fit is left out
    (a URL is never cut)."""
    buttons = []
    for link in view.links[:LINKS]:
        button = {
            "text": cut(link.text, LINK_TEXT) or cut(link.url, LINK_TEXT),
            "onClick": {"openLink": {"url": link.url}},
        }
        if budget.fits(button, keep=budget.left - room):
            room -= size(button) + 2
            buttons.append(button)
    frame: dict[str, Any] = {"widgets": [{"buttonList": {"buttons": []}}]}
    return [{"widgets": [{"buttonList": {"buttons": buttons}}]}] if buttons and budget.fits(frame) else []


class GoogleChatSink:
    """Posts each message to a Google Chat space's webhook, in its alert's thread (no edits)."""

    name = "google-chat"
    paced = True
    edits = False
    threads = False  # not by ``thread_ts``: an alert's messages find its thread by their view's key

    def __init__(self, url: str, session: aiohttp.ClientSession, rate: tuple[Rule, ...] | None = None) -> None:
        self.rate = rate if rate is not None else parse_rules(RATE)
        self._hook = Hook(url, session)

    async def post(self, message: Message) -> Posted:
        """Post ``message``'s view; a message with a thread key goes in that thread (a new one the first time)."""
        body = shape(view_of(message))
        answer = await self._hook.call("POST", self._hook.url, body, REPLY if "thread" in body else None)
        return Posted(message.channel, str(answer.get("name") or "") if isinstance(answer, dict) else "")

    async def update(self, posted: Posted, message: Message) -> None:
        """A webhook cannot edit what it posted."""
        raise Permanent("a Google Chat webhook cannot edit messages")
