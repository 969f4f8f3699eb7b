"""Discord: a channel's webhook, posted with ``?wait=true`` so the gateway can edit its own messages.

The shape is ``content`` (a one-line summary, for notifications) and one rich embed: the
severity and category as its author, the title, the text with the event's links as markdown
links at its end, the fields, the state lines (``Seen 3 times``, an acknowledgement) as its
footer, and a color per severity (green once resolved). Discord refuses a whole message
(``400``, code ``50035`` "Invalid Form Body") when one part is over its limit, so every part
is cut with ``…`` within it, whatever the event holds:
https://discord.com/developers/docs/resources/message#embed-object-embed-limits

- ``content`` at most 2,000 characters, at most 10 embeds (one is sent);
- an embed's title 256, description 4,096, at most 25 fields of name 256 and value 1,024,
  footer 2,048, author name 256, and at most 6,000 of all those together, across embeds;
- a field's name and value must not be empty (Discord trims whitespace first).

Discord counts code points ("Our API uses Python 3, so the API calculates length based on the
number of codepoints", https://github.com/discord/discord-api-docs/issues/1315): Python's
``len``, so emoji and other non-ASCII text count as Discord counts them.

Mentions, twice:

- every body, post and edit, carries ``allowed_mentions: {"parse": []}``: Discord then pings no
  one, whatever the text says. An edit needs it too: without one, Discord parses the edited
  content with the default allowances, "without regard to whether or not an allowed_mentions was
  present in the request that originally created the message"
  (https://discord.com/developers/docs/resources/webhook#edit-webhook-message);
- and the text itself is made inert (a zero-width space after every ``@``, and after ``<#``), so
  ``@everyone``, ``<@123>``, ``<@&1>`` and ``<#1>`` do not even show as mentions: in an embed
  they would render as highlighted names (never pinging), and text copied or forwarded
  elsewhere, or a body some proxy re-sends without ``allowed_mentions``, stays harmless.

The sink talks to Discord with aiohttp through ``webhook.Hook``, not a client such as
``discord-webhook``: those sleep and retry on a 429 by themselves, which would fight the
fleet-wide pace and shared 429 pauses the delivery worker keeps.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from yarl import URL

from ..errors import MessageGone, Permanent
from ..rules import Rule, parse_rules
from ..view import View
from .base import Message, Posted, view_of
from .markdown import ZWSP, clip, cut, fit_fields, head
from .markdown import links as markdown_links
from .webhook import Hook

CONTENT = 2000
EMBEDS = 10
EMBED_TOTAL = 6000  # title, description, field names and values, footer and author name of all embeds
TITLE, DESCRIPTION, FOOTER, AUTHOR = 256, 4096, 2048, 256
FIELDS, FIELD_NAME, FIELD_VALUE = 25, 256, 1024
DEFAULT_RATE: tuple[Rule, ...] = parse_rules("5/2s,30/1m")  # per webhook; 30 messages a minute per channel

SUMMARY = 200  # characters of the content line: a notification's preview, the embed says the rest
FOOTER_SHARE = 1024  # the state lines' most (they are short: a repeat count, an acknowledgement)
FIELD_SHARE = 1536  # what fields keep of the 6,000 when the text would take it all
LINKS_SHARE = 1024  # the links' most in the description (whole links only, never cut inside one)
INLINE = 40  # a field value up to this long sits beside others
NOTE = 32  # room kept for the "… N more fields" field
UNKNOWN_MESSAGE = 10008  # Discord's JSON error code for an edit of a deleted message

COLORS = {"info": 0x3498DB, "warning": 0xF1C40F, "error": 0xE74C3C, "critical": 0x992D22}
NOTE_COLOR, RESOLVED_COLOR = 0x95A5A6, 0x2ECC71
ICONS = {"info": "\u2139\ufe0f", "warning": "⚠️", "error": "❌", "critical": "🚨"}
RESOLVED_ICON = "✅"
NO_MENTIONS: dict[str, list[str]] = {"parse": []}


def inert(text: str) -> str:
    """``text`` with no mention Discord would parse: a zero-width space after every ``@`` and ``<#``."""
    return text.replace("@", "@" + ZWSP).replace("<#", "<#" + ZWSP)


def shape(view: View) -> dict[str, Any]:
    """The body Discord's webhook takes for ``view``: content, one embed, no mentions."""
    view = clip(view, EMBED_TOTAL)
    return {"content": _summary(view), "embeds": [_embed(view)], "allowed_mentions": NO_MENTIONS}


def _summary(view: View) -> str:
    """One line for notifications: what happened (``Resolved``), the head and the title."""
    what = (f"{RESOLVED_ICON} " if view.resolved else "") + (f"**{inert(view.head)}** " if view.head else "")
    subject = inert(view.title or view.text.split("\n", 1)[0])
    shown = head(view, ICONS, inert)
    line = f"{what}{shown}: {subject}" if shown else f"{what}{subject}"
    return cut(" ".join(line.split()), SUMMARY)


def _embed(view: View) -> dict[str, Any]:
    """The embed: author, title, description, fields and footer within every limit of Discord's."""
    author, title = cut(" ".join(head(view, ICONS, inert).split()), AUTHOR), cut(inert(view.title).strip(), TITLE)
    footer = cut("\n".join(inert(line) for line in view.lines).strip(), FOOTER_SHARE)
    fields, hidden = _fields(view.fields)
    room = EMBED_TOTAL - len(author) - len(title) - len(footer)
    wanted = sum(len(name) + len(value) for name, value in fields) + (NOTE if hidden else 0)
    description = _description(view, min(DESCRIPTION, room - min(wanted, FIELD_SHARE)))
    embed: dict[str, Any] = {"color": _color(view)}
    if author:
        embed["author"] = {"name": author}
    if title:
        embed["title"] = title
    if description or not (title or fields):
        embed["description"] = description or "(no text)"
    if fields or hidden:
        kept = fit_fields(fields, hidden, room - len(embed.get("description", "")), NOTE)
        embed["fields"] = [{"name": n, "value": v, "inline": len(v) <= INLINE and len(n) <= INLINE} for n, v in kept]
    if footer:
        embed["footer"] = {"text": footer}
    return embed


def _color(view: View) -> int:
    if view.resolved:
        return RESOLVED_COLOR
    return COLORS.get(view.severity, NOTE_COLOR)


def _description(view: View, limit: int) -> str:
    """The head line (``**Resolved**``), the text, then the links: the text is what is cut."""
    head = f"{RESOLVED_ICON if view.resolved else ''} **{inert(view.head).strip()}**".strip() if view.head else ""
    links = markdown_links(view, min(LINKS_SHARE, limit - len(head) - 2), inert)
    fixed = len(head) + len(links) + 2 * (bool(head) + bool(links))  # the parts and their blank lines
    text = cut(inert(view.text).strip(), max(limit - fixed, 0))
    return cut("\n\n".join(part for part in (head, text, links) if part), limit)


def _fields(pairs: tuple[tuple[str, str], ...]) -> tuple[list[tuple[str, str]], int]:
    """At most 25 fields, each within its limits and not empty; and how many did not fit the count."""
    kept = pairs[: FIELDS - 1] if len(pairs) > FIELDS else pairs  # the 25th place then counts the others
    hidden = len(pairs) - len(kept)
    return [(_field_part(name, FIELD_NAME), _field_part(value, FIELD_VALUE)) for name, value in kept], hidden


def _field_part(text: str, limit: int) -> str:
    """A field's name or value: inert, trimmed as Discord trims it, never empty, within ``limit``."""
    return cut(inert(text.strip()[: limit + 1]), limit) or "-"  # only its start is read: the rest would be cut


class DiscordSink:
    """Posts to a Discord webhook with ``?wait=true`` and edits its own messages by their id."""

    name = "discord"
    paced = True
    edits = True
    threads = False  # no replies: a resolution edits the message (delivery skips its reply)

    def __init__(self, url: str, session: aiohttp.ClientSession, rate: tuple[Rule, ...] | None = None) -> None:
        self.rate = DEFAULT_RATE if rate is None else rate
        parsed = URL(url)
        self._base = str(parsed.with_query(None).with_fragment(None)).rstrip("/")
        self._query = dict(parsed.query)  # e.g. thread_id: kept on every call
        self._hook = Hook(url, session)

    async def post(self, message: Message) -> Posted:
        """Post the message and answer Discord's id for it (``wait=true`` makes Discord say it)."""
        answer = await self._hook.call("POST", self._base, shape(view_of(message)), {**self._query, "wait": "true"})
        return Posted(message.channel, str(answer.get("id") or "") if isinstance(answer, dict) else "")

    async def update(self, posted: Posted, message: Message) -> None:
        """Replace the message's content and embeds; ``MessageGone`` when Discord no longer has it."""
        if not posted.ts:
            raise MessageGone("Discord gave no id for this message")
        url = f"{self._base}/messages/{posted.ts}"
        try:
            await self._hook.call("PATCH", url, shape(view_of(message)), self._query or None)
        except Permanent as exc:
            if _error_code(str(exc)) == UNKNOWN_MESSAGE:
                raise MessageGone(f"Discord no longer has message {posted.ts}: {exc}") from exc
            raise


def _error_code(reason: str) -> int | None:
    """Discord's JSON error ``code`` in a ``Permanent`` reason (``HTTP 404: {"message": ..., "code": 10008}``)."""
    _, _, body = reason.partition(": ")
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, int) else None
