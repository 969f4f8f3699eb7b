"""Turning events and digests into Slack messages, with event text made inert.

Slack reads ``<...>`` as mentions (``<!channel>``, ``<@U1>``) and links
(``<url|label>``). Escaping ``&``, ``<`` and ``>`` as Slack documents makes any
such sequence plain text, in the fallback text and in every block.
"""

from __future__ import annotations

from .rules import format_duration
from .slack import Message

SECTION_LIMIT = 3000  # characters Slack allows in one section's text
_ICONS = {"info": ":information_source:", "warning": ":warning:",
          "error": ":x:", "critical": ":rotating_light:"}


def escape(text: str) -> str:
    """Escape text for Slack so it cannot mention anyone or inject a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _chunks(raw: str, limit: int) -> list[str]:
    """Escape ``raw`` into pieces of at most ``limit`` characters, never splitting an entity."""
    pieces, current = [], ""
    for char in raw:
        escaped = escape(char)
        if len(current) + len(escaped) > limit:
            pieces.append(current)
            current = ""
        current += escaped
    return pieces + [current] if current else pieces


def event_message(channel: str, event: dict) -> Message:
    """A readable message for one event: title, text, severity and fields."""
    severity, category = event.get("severity", "info"), escape(event["category"])
    title, text = escape(event.get("title") or ""), escape(event["text"])
    head = f"{_ICONS.get(severity, '')} [{severity}] {category}"
    fallback = f"{head}: {title}\n{text}" if title else f"{head}: {text}"
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*"}}] if title else []
    blocks += [{"type": "section", "text": {"type": "mrkdwn", "text": part}}
               for part in _chunks(event["text"], SECTION_LIMIT)]
    fields = [{"type": "mrkdwn", "text": f"*{escape(k)}*\n{escape(v)}"}
              for k, v in (event.get("fields") or {}).items()]
    for start in range(0, len(fields), 10):  # Slack allows 10 fields per section
        blocks.append({"type": "section", "fields": fields[start:start + 10]})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": head}]})
    return Message(channel, fallback, blocks)


def digest_message(channel: str, counts: dict[str, int], since_us: int, until_us: int) -> Message:
    """The digest: ``Suppressed N notifications in the last ...: cat n, ...``."""
    total = sum(counts.values())
    span = format_duration(max(1000, round((until_us - since_us) / 1e6) * 1000))
    parts = ", ".join(f"{escape(c)} {n}" for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    noun = "notification" if total == 1 else "notifications"
    text = f"Suppressed {total} {noun} in the last {span}: {parts}"
    return Message(channel, text, [{"type": "section", "text": {"type": "mrkdwn", "text": text}}])
