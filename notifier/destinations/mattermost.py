"""Mattermost: an incoming webhook, one channel, a Slack-style attachment per message, no edits.

The shape is ``text`` (one line: what happened, the severity and the category) and one
attachment: ``fallback`` (plain text for notifications), ``color`` per severity (green once
resolved), ``title``, ``text`` (the event's text, its links as markdown at its end), ``fields``
(``title``, ``value``, ``short``) and the state lines as ``footer``
(https://developers.mattermost.com/integrate/reference/message-attachments/).

Size. A post's message holds at most 16,383 characters (runes: ``model.PostMessageMaxRunesV2``);
an incoming webhook's longer ``text`` is split into several posts
(``SplitWebhookPost`` in ``server/channels/app/webhook.go``), and its attachments may take up to
400,000 runes of JSON (``PostPropsMaxUserRunes``). One alert should be one post, so everything
the shape sends (the text and every attachment string) holds at most 16,383 characters in all,
cut with ``…``, whatever the event holds. Mattermost counts runes: code points, Python's ``len``.

Mentions. Mattermost notifies for ``@channel``, ``@all``, ``@here`` and ``@username`` found in a
post's message and in its attachments' ``pretext``, ``text`` and field values (recent servers;
``getMentionsEnabledFields``, ``server/channels/app/notification.go``), and for incoming webhooks
it first rewrites Slack's forms in the text, the attachments' pretext, text, title and field
values: ``<!channel>``, ``<!here>`` and ``<!all>`` become ``@channel``, ``@here``, ``@all``, and
``<@USERID>`` becomes ``@username`` (``ProcessSlackText``: ``expandAnnouncement`` and
``replaceUserIds``, ``server/channels/app/slack.go``). Its parser splits words on every character
that is not a letter, a number, ``.``, ``-``, ``_``, ``:`` or ``@``, and a word (or a piece of it
between ``.``, ``-`` and ``:``) that is ``@channel`` or starts with ``@`` is a mention
(``StandardMentionParser.ProcessText``, ``server/channels/app/mention_parser_standard.go``). A
webhook's payload has no switch for mentions (channel mentions are off only for a poster whose
role lacks the permission to use them), and backticks would show event text as code, so the text
is made inert instead, as the parser reads it: a zero-width space (not a letter or a number, so a
word break) after every ``@`` that could begin a word (one not after a letter or a number, so
``ops@example.com`` stays an address), and between ``<`` and ``!`` or ``@``. The message then
shows the same and mentions no one. Incoming webhooks:
https://developers.mattermost.com/integrate/webhooks/incoming/

The sink posts with aiohttp through ``webhook.Hook`` (Mattermost answers ``ok`` as text); a
client that retried a 429 by itself would fight the delivery worker's fleet-wide pace.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import aiohttp

from ..errors import Permanent
from ..rules import Rule, parse_rules
from ..view import View
from .base import Message, Posted, view_of
from .markdown import ZWSP, clip, cut, fit_fields, head
from .markdown import links as markdown_links
from .webhook import Hook

POST = 16_383  # characters of a post: everything the shape sends, together
DEFAULT_RATE: tuple[Rule, ...] = parse_rules("10/1s")  # Mattermost's default API rate limit, per IP

SUMMARY = 300  # characters of the message line and of the fallback
TITLE = 256
FOOTER_SHARE = 1024  # the state lines' most
FIELD_SHARE = 4096  # what fields keep when the text would take it all
LINKS_SHARE = 2048  # the links' most (whole links only)
FIELD_TITLE, FIELD_VALUE = 256, 2048
FIELDS = 100  # fields shown at most; the last place then counts the others
SHORT = 40  # a field value up to this long sits beside another
NOTE = 40  # room kept for the "N more fields not shown" field

COLORS = {"info": "#3498DB", "warning": "#F1C40F", "error": "#E74C3C", "critical": "#992D22"}
NOTE_COLOR, RESOLVED_COLOR = "#95A5A6", "#2ECC71"
ICONS = {"info": ":information_source:", "warning": ":warning:", "error": ":x:", "critical": ":rotating_light:"}
RESOLVED_ICON = ":white_check_mark:"
_SLACK_FORM = re.compile(r"<(?=[!@])")  # <!channel>, <@U123>: Mattermost's Slack compatibility rewrites them
_AT = re.compile("@")


def inert(text: str) -> str:
    """``text`` with no mention Mattermost would find or make (see the module's docstring)."""
    text = _SLACK_FORM.sub("<" + ZWSP, text)
    return _AT.sub(lambda at: "@" if at.start() and _word_char(text[at.start() - 1]) else "@" + ZWSP, text)


def _word_char(char: str) -> bool:
    """A letter or a number, as Go's ``unicode.IsLetter`` and ``unicode.IsNumber`` say."""
    return unicodedata.category(char)[0] in "LN"


def shape(view: View) -> dict[str, Any]:
    """The body Mattermost's incoming webhook takes for ``view``: a line of text and one attachment."""
    view = clip(view, POST)
    text, fallback = _summary(view), cut(_plain(view), SUMMARY)
    title = cut(" ".join(inert(view.title).split()), TITLE)
    footer = cut("\n".join(inert(line) for line in view.lines).strip(), FOOTER_SHARE)
    fields, hidden = _fields(view.fields)
    room = POST - len(text) - len(fallback) - len(title) - len(footer)
    wanted = sum(len(t) + len(v) for t, v in fields) + (NOTE if hidden else 0)
    body = _body(view, room - min(wanted, FIELD_SHARE))
    attachment: dict[str, Any] = {"fallback": fallback, "color": _color(view)}
    if title:
        attachment["title"] = title
    if body:
        attachment["text"] = body
    if fields or hidden:
        kept = fit_fields(fields, hidden, room - len(body), NOTE)
        attachment["fields"] = [{"title": t, "value": v, "short": len(v) <= SHORT} for t, v in kept]
    if footer:
        attachment["footer"] = footer
    return {"text": text, "attachments": [attachment]}


def _summary(view: View) -> str:
    """The post's message: what happened (``Resolved``) and the head; the title if there is no attachment title."""
    what = (f"{RESOLVED_ICON} " if view.resolved else "") + (f"**{inert(view.head)}**" if view.head else "")
    line = " ".join(part for part in (what.strip(), head(view, ICONS, inert)) if part)
    return cut(" ".join((line or inert(view.text.split("\n", 1)[0])).split()), SUMMARY) or "(no text)"


def _plain(view: View) -> str:
    """The fallback: one plain line for notifications and clients that show no attachments."""
    parts = [view.head, f"[{view.severity}] {view.category}" if view.severity else view.category, view.title]
    line = ": ".join(" ".join(inert(p).split()) for p in parts if p.strip())
    return line or " ".join(inert(view.text).split())


def _color(view: View) -> str:
    if view.resolved:
        return RESOLVED_COLOR
    return COLORS.get(view.severity, NOTE_COLOR)


def _body(view: View, limit: int) -> str:
    """The attachment's text: the event's text, then its links; the text is what is cut."""
    links = markdown_links(view, min(LINKS_SHARE, limit - 2), inert)
    text = cut(inert(view.text).strip(), max(limit - len(links) - 2 * bool(links), 0))
    return cut("\n\n".join(part for part in (text, links) if part), limit)


def _fields(pairs: tuple[tuple[str, str], ...]) -> tuple[list[tuple[str, str]], int]:
    """At most 100 fields, each within its limits; and how many did not fit the count."""
    kept = pairs[: FIELDS - 1] if len(pairs) > FIELDS else pairs  # the last place then counts the others
    shown = [(_fit(title, FIELD_TITLE), _fit(value, FIELD_VALUE)) for title, value in kept]
    return shown, len(pairs) - len(kept)


def _fit(text: str, limit: int) -> str:
    """``text`` inert and trimmed, within ``limit`` (only its start is read: the rest would be cut)."""
    return cut(inert(text.strip()[: limit + 1]), limit)


class MattermostSink:
    """Posts to a Mattermost incoming webhook (its channel is fixed; no edits, no threads)."""

    name = "mattermost"
    paced = True
    edits = False
    threads = False

    def __init__(self, url: str, session: aiohttp.ClientSession, rate: tuple[Rule, ...] | None = None) -> None:
        self.rate = DEFAULT_RATE if rate is None else rate
        self._url = url
        self._hook = Hook(url, session)

    async def post(self, message: Message) -> Posted:
        """Post the message; Mattermost answers ``ok`` and no id, so the message cannot be edited."""
        await self._hook.call("POST", self._url, shape(view_of(message)))
        return Posted(message.channel, "")

    async def update(self, posted: Posted, message: Message) -> None:
        """Refused: an incoming webhook cannot edit what it posted."""
        raise Permanent("a Mattermost incoming webhook cannot edit messages")
