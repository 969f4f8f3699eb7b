"""Slack messages for events and digests: text made inert, always within Block Kit's limits.

Slack reads ``<...>`` as mentions (``<!channel>``, ``<@U1>``) and links
(``<url|label>``). Escaping ``&``, ``<`` and ``>`` as Slack documents makes any
such sequence plain text, in the fallback text and in every block.

Slack refuses a whole message (``invalid_blocks``, ``msg_too_long``) when one
part is over its limit, so every builder here keeps each part within it,
whatever the input: https://api.slack.com/reference/block-kit/blocks
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..outbox import DigestEntry
from ..rules import format_duration

SECTION_TEXT = 3000  # characters in one section's text
FIELD_TEXT = 2000  # characters in one field of a section
FIELDS = 10  # fields per section
BLOCKS = 50  # blocks per message
MESSAGE_TEXT = 40_000  # characters of the top-level (fallback) text
_ICONS = {"info": ":information_source:", "warning": ":warning:", "error": ":x:", "critical": ":rotating_light:"}

Block = dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One Slack message: a plain-text fallback and Block Kit blocks."""

    channel: str
    text: str
    blocks: list[Block] = field(default_factory=list)
    thread_ts: str | None = None  # a reply in the thread of this message


def escape(text: str) -> str:
    """Escape text for Slack so it cannot mention anyone or inject a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def chunks(raw: str, limit: int) -> list[str]:
    """Escape ``raw`` into pieces of at most ``limit`` characters, never splitting an entity."""
    pieces, current = [], ""
    for char in raw:
        escaped = escape(char)
        if len(current) + len(escaped) > limit:
            pieces.append(current)
            current = ""
        current += escaped
    return [*pieces, current] if current else pieces


def fit(raw: str, limit: int) -> str:
    """``raw`` escaped, cut to ``limit`` characters (ending in an ellipsis when cut)."""
    pieces = chunks(raw, limit)
    if len(pieces) <= 1:
        return pieces[0] if pieces else ""
    return chunks(raw, limit - 1)[0] + "…"


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def event_head(event: dict[str, Any]) -> str:
    """``:warning: [warning] db``: severity and category, escaped."""
    severity = str(event.get("severity", "info"))
    return f"{_ICONS.get(severity, '')} [{severity}] {escape(str(event['category']))}"


def event_blocks(event: dict[str, Any]) -> list[Block]:
    """Title, text (split into sections), fields (10 per section) and the head as context."""
    blocks = [section(f"*{fit(title, SECTION_TEXT - 2)}*")] if (title := event.get("title")) else []
    blocks += [section(part) for part in chunks(str(event["text"]), SECTION_TEXT)]
    # A name is at most 100 characters (500 escaped): the value gets the rest of a field.
    fields = [
        {"type": "mrkdwn", "text": f"*{fit(k, 500)}*\n{fit(v, FIELD_TEXT - 510)}"}
        for k, v in (event.get("fields") or {}).items()
    ]
    blocks += [{"type": "section", "fields": fields[i : i + FIELDS]} for i in range(0, len(fields), FIELDS)]
    blocks.append(context(event_head(event)))
    return blocks


def event_text(event: dict[str, Any]) -> str:
    """The fallback text (notifications, screen readers): head, title, text."""
    head, text = event_head(event), escape(str(event["text"]))
    title = escape(str(event.get("title") or ""))
    return fit_text(f"{head}: {title}\n{text}" if title else f"{head}: {text}")


def fit_text(text: str) -> str:
    """A top-level text within Slack's limit (already escaped)."""
    return text if len(text) <= MESSAGE_TEXT else text[: MESSAGE_TEXT - 1] + "…"


def event_message(channel: str, event: dict[str, Any]) -> Message:
    """A readable message for one event: title, text, severity and fields."""
    return Message(channel, event_text(event), event_blocks(event)[:BLOCKS])


def digest_message(entry: DigestEntry) -> Message:
    """``Suppressed N notifications in the last 5m: db 40, web 12, and 312 more categories: 4120``.

    Categories are named, largest first, as long as the text stays within one
    section; the rest are summed up. ``N`` is always the exact total.
    """
    noun = "notification" if entry.total == 1 else "notifications"
    span = format_duration(max(1000, round((entry.until_us - entry.since_us) / 1e6) * 1000))
    head = f"Suppressed {entry.total} {noun} in the last {span}: "
    named, used = [], len(head)
    more_categories, more_count = entry.more_categories, entry.more_count
    for index, (category, count) in enumerate(entry.counts):
        part = f"{escape(category)} {count}"
        if used + len(part) + 2 + _TAIL_ROOM > SECTION_TEXT:
            left = entry.counts[index:]
            more_categories, more_count = more_categories + len(left), more_count + sum(n for _, n in left)
            break
        named.append(part)
        used += len(part) + 2
    if more_categories:
        named.append(f"and {more_categories} more {'category' if more_categories == 1 else 'categories'}: {more_count}")
    text = head + ", ".join(named)
    return Message(entry.channel, text, [section(text)])


_TAIL_ROOM = 60  # room kept in a digest for "and N more categories: M"
