"""Slack messages for events and digests: text made inert, always within Block Kit's limits.

Slack reads ``<...>`` as mentions (``<!channel>``, ``<@U1>``) and links
(``<url|label>``). Escaping ``&``, ``<`` and ``>`` as Slack documents makes any
such sequence plain text, in the fallback text and in every block.

Slack refuses a whole message (``invalid_blocks``, ``msg_too_long``) when one
part is over its limit, so every builder here keeps each part within it,
whatever the input: https://api.slack.com/reference/block-kit/blocks
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..destinations.base import Block, Message
from ..outbox import DigestEntry, HeldEntry, WindowEntry
from ..rules import format_duration
from .controls import (
    LINK,
    LINK_TEXT,
    MUTE,
    STATE,
    UNMUTE,
    controls_block,
    fit_plain,
    mute_control,
    unmute_button,
)
from .views import FIRING_AGAIN, edited_view, escalation_view, event_view, note_view, reply_view
from .views import RESOLVED as RESOLVED_HEAD

SECTION_TEXT = 3000  # characters in one section's text
FIELD_TEXT = 2000  # characters in one field of a section
FIELDS = 10  # fields per section
BLOCKS = 50  # blocks per message
MESSAGE_TEXT = 40_000  # characters of the top-level (fallback) text
_ICONS = {"info": ":information_source:", "warning": ":warning:", "error": ":x:", "critical": ":rotating_light:"}


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
    """Title, text (split into sections), fields (10 per section), link buttons and the head as context."""
    blocks = [section(f"*{fit(title, SECTION_TEXT - 2)}*")] if (title := event.get("title")) else []
    blocks += [section(part) for part in chunks(str(event["text"]), SECTION_TEXT)]
    # A name is at most 100 characters (500 escaped): the value gets the rest of a field.
    fields = [
        {"type": "mrkdwn", "text": f"*{fit(k, 500)}*\n{fit(v, FIELD_TEXT - 510)}"}
        for k, v in (event.get("fields") or {}).items()
    ]
    blocks += [{"type": "section", "fields": fields[i : i + FIELDS]} for i in range(0, len(fields), FIELDS)]
    blocks += links_block(event.get("links") or [])
    blocks.append(context(event_head(event)))
    return blocks


def event_text(event: dict[str, Any]) -> str:
    """The fallback text (notifications, screen readers): head, title, text."""
    head, text = event_head(event), escape(str(event["text"]))
    title = escape(str(event.get("title") or ""))
    return fit_text(f"{head}: {title}\n{text}" if title else f"{head}: {text}")


def fit_text(text: str) -> str:
    """A top-level text within Slack's limit (already escaped)."""
    return cut(text, MESSAGE_TEXT)


def cut(text: str, limit: int) -> str:
    """Escaped ``text`` cut to ``limit`` characters, ending in an ellipsis when cut, never inside an entity."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    amp = kept.rfind("&", len(kept) - 4)  # "&amp;" is the longest entity escape() makes
    return (kept[:amp] if amp >= 0 and ";" not in kept[amp:] else kept) + "…"


@dataclass(frozen=True)
class MessageState:
    """What an event's message shows beyond the event: repeats, resolution, a mute, its controls."""

    seen: int = 1  # times the alert was seen, the first event included
    last_us: int = 0  # when it was last seen (store clock, us)
    resolved: bool = False
    banner: str = ""  # e.g. "Muted db until 14:05 UTC by <@U1>" (already escaped)
    button: str = ""  # "mute", "unmute" or "" (no actions on the message)
    record: str = ""  # the record a click on the button refers to
    choices: tuple[str, ...] = ()  # the mute durations offered (NOTIFIER_MUTE_CHOICES)
    reopened: int = 0  # times a resolved alert fired again
    acknowledged: str = ""  # "Acknowledged by <@U1> at 14:05 UTC" (already escaped), or ""
    ack: str = ""  # "ack", "unack" or "": the acknowledgement button, first of the controls
    key: bytes = field(default=b"", repr=False)  # the fleet's control key: no controls without it (slack.controls)


LINKS = "notifier-links"  # block_id of an event's link buttons (the event's own, kept by every edit)
RESOLVED = ":white_check_mark: *Resolved*"  # the section a resolved alert's message shows


def event_message(channel: str, event: dict[str, Any], state: MessageState | None = None) -> Message:
    """A readable message for one event: title, text, severity, fields, links, and its state if any."""
    state = state or MessageState()
    blocks, text = event_blocks(event), event_text(event)
    if state.resolved:
        blocks.insert(0, section(RESOLVED))
        text = "Resolved: " + text
    lines = state_lines(state)
    view = event_view(event, lines, RESOLVED_HEAD if state.resolved else "", state.resolved)
    return with_state(
        Message(channel, fit_text("\n".join([text, *lines])), view=view), blocks, state, str(event["category"])
    )


def shaped_message(channel: str, own: list[Block], text: str, event: dict[str, Any], state: MessageState) -> Message:
    """A message in a template's shape (``own`` blocks and ``text``, rendered and fitted) and the gateway's parts.

    Those come after the template's blocks, as on every event's message: ``Resolved``, the
    event's link buttons, then the state (``Seen N times``, the acknowledgement, a banner)
    and the controls; the template's blocks are cut first when all would not fit in 50.
    """
    kept = [section(RESOLVED)] if state.resolved else []
    kept += links_block(event.get("links") or [])
    lines = state_lines(state)
    text = cut(text, MESSAGE_TEXT - len("Resolved: ") - sum(len(line) + 1 for line in lines))  # the lines stay
    text = fit_text("\n".join(["Resolved: " + text if state.resolved else text, *lines]))
    view = event_view(event, lines, RESOLVED_HEAD if state.resolved else "", state.resolved)  # the view has no template
    return with_state(Message(channel, text, view=view), own, state, str(event["category"]), kept)


def with_state(
    message: Message, own: list[Block], state: MessageState, category: str, kept: list[Block] | None = None
) -> Message:
    """``message`` (its view kept) with its own blocks, ``kept`` and the state's, cut so that all fit in 50."""
    added = (kept or []) + state_blocks(state, category)
    blocks = own[: BLOCKS - len(added)] + added
    return Message(message.channel, message.text, blocks, message.thread_ts, view=message.view)


def state_lines(state: MessageState) -> list[str]:
    """What changed since the message was posted: reopenings, repeats, the acknowledgement, a banner (a mute)."""
    lines = []
    if state.reopened:
        lines.append(f"Reopened {state.reopened} {'time' if state.reopened == 1 else 'times'}")
    if state.seen > 1:
        lines.append(
            f"Seen {state.seen} times, last at {time.strftime('%H:%M:%S UTC', time.gmtime(state.last_us / 1e6))}"
        )
    if state.acknowledged:
        lines.append(state.acknowledged)
    if state.banner:
        lines.append(state.banner)
    return lines


def state_blocks(state: MessageState, category: str) -> list[Block]:
    """The blocks the gateway adds after a message's own: its state, and its controls.

    Their ``block_id`` marks them as the gateway's, so a message Slack sends back
    with a click can be told apart from what was added (see :func:`is_state_block`).
    """
    blocks = [{**context(line), "block_id": f"{STATE}{i}"} for i, line in enumerate(state_lines(state))]
    if state.key and (state.button or (state.ack and state.record)):
        blocks.append(controls_block(state.key, category, state.record, state.ack, _mute_elements(state, category)))
    return blocks


def _mute_elements(state: MessageState, category: str) -> list[Block]:
    if state.button == MUTE:
        return [mute_control(state.key, category, state.record, state.choices)]
    return [unmute_button(category, state.record)] if state.button == UNMUTE else []


def is_state_block(block: Block) -> bool:
    """True for a block :func:`state_blocks` added."""
    return str(block.get("block_id", "")).startswith(STATE)


def links_block(links: list[dict[str, str]]) -> list[Block]:
    """The event's links as link buttons (Slack opens the url; the click changes nothing here)."""
    if not links:
        return []
    elements = [
        {
            "type": "button",
            "action_id": f"{LINK}:{i}",
            "text": {"type": "plain_text", "text": fit_plain(str(link["text"]), LINK_TEXT)},
            "url": str(link["url"]),
        }
        for i, link in enumerate(links[:5])
    ]
    return [{"type": "actions", "block_id": LINKS, "elements": elements}]


def acknowledged_line(by: str, at_us: int) -> str:
    """``Acknowledged by <@U1> at 14:05 UTC`` (``by`` already escaped, or a mention)."""
    return f"Acknowledged by {by} at {time.strftime('%H:%M UTC', time.gmtime(at_us / 1e6))}"


def reply_message(channel: str, thread_ts: str | None, event: dict[str, Any], reopened: bool = False) -> Message:
    """An alert's resolution (or its firing again), as a reply in the thread of its message (or on its own)."""
    icon, head = (":rotating_light:", FIRING_AGAIN) if reopened else (":white_check_mark:", RESOLVED_HEAD)
    text = fit_text(f"{icon} {head}: {event_text(event)}")
    blocks = [section(f"{icon} *{head}*"), *event_blocks(event)][:BLOCKS]
    return Message(channel, text, blocks, thread_ts, view=reply_view(event, reopened))


def escalation_message(channel: str, thread_ts: str | None, text: str, event: dict[str, Any] | None) -> Message:
    """An escalation step: ``Not acknowledged after 5m: <@U0LEAD>``, in the alert's thread (or on its own).

    ``text`` comes from the settings, whose mentions are the point of it: not escaped.
    On its own (a webhook, or the alert's message is unknown) it quotes the alert.
    """
    lines = [text]  # the contract: the reply starts "Not acknowledged after"
    if thread_ts is None and event is not None:
        lines.append(fit(f"{event.get('category', '')}: {event.get('text', '')}", SECTION_TEXT - 1000))
    body = "\n".join(lines)
    view = escalation_view(text, event, lines[1] if len(lines) > 1 else "")
    return Message(channel, fit_text(body), [section(body[:SECTION_TEXT])], thread_ts, view=view)


def edited_message(channel: str, base: list[Block], text: str, state: MessageState, category: str) -> Message:
    """A message clicked in Slack, as it was (``base``, its own state blocks removed) with its new state."""
    lines = state_lines(state)
    view = edited_view(text, category, lines, state.resolved)
    return with_state(Message(channel, fit_text("\n".join([text, *lines])), view=view), base, state, category)


def digest_message(entry: DigestEntry) -> Message:
    """``Suppressed N notifications in the last 5m: db 40, web 12, and 312 more categories: 4120``.

    Categories are named, largest first, as long as the text stays within one
    section; the rest are summed up (with the drops of categories past
    ``NOTIFIER_MAX_CATEGORIES``, which have no name). ``N`` is always the exact total.
    """
    noun = "notification" if entry.total == 1 else "notifications"
    span = format_duration(max(1000, round((entry.until_us - entry.since_us) / 1e6) * 1000))
    head = f"Suppressed {entry.total} {noun} in the last {span}: "
    per = _per_category(entry.counts, entry.more_categories, entry.more_count, entry.unnamed, len(head))
    text = head + per
    return Message(entry.channel, text, [section(text)], view=note_view(head.removesuffix(": "), per))


def _per_category(counts: list[tuple[str, int]], more_categories: int, more_count: int, unnamed: int, used: int) -> str:
    """``db 40, web 12, and 312 more categories: 4120``: as many named as fit in a section after ``used``."""
    named = []
    for index, (category, count) in enumerate(counts):
        part = f"{escape(category)} {count}"
        if used + len(part) + 2 + _TAIL_ROOM > SECTION_TEXT:
            left = counts[index:]
            more_categories, more_count = more_categories + len(left), more_count + sum(n for _, n in left)
            break
        named.append(part)
        used += len(part) + 2
    tail = _rest(more_categories, more_count, unnamed)
    return ", ".join(named + ([tail] if tail else []))


WINDOW_NAME = 300  # characters of a window's name in a message (quiet hours as configured can be long)
QUOTE = 400  # characters of one quoted event in a hand-over (5 of them, with their heads, fit a section)


def held_message(entry: HeldEntry) -> Message:
    """``Held during db-upgrade: 120 (db 100, web 20)`` / ``7 dropped``, then the latest few events quoted.

    Like a digest: categories named largest first as long as the summary fits one
    section, the rest summed; N and D are always exact.
    """
    head = f"Held during {fit(entry.window, WINDOW_NAME)}: {entry.total}"
    dropped = f"\n{entry.dropped} dropped"
    per = _per_category(entry.counts, entry.more_categories, entry.more_count, entry.unnamed, len(head + dropped) + 3)
    summary = head + (f" ({per})" if per else "") + dropped
    blocks = [section(summary)]
    quotes = [f"[{escape(q.severity)}] {escape(q.category)}: {fit(q.text, QUOTE)}" for q in entry.quotes]
    if quotes:
        blocks.append(section("Latest held:\n" + "\n".join(f"> {quote}" for quote in quotes)))
    view = note_view(head, summary.removeprefix(head).lstrip(" "), quotes)
    return Message(entry.channel, fit_text(summary), blocks, view=view)


def window_message(entry: WindowEntry) -> Message:
    """``Maintenance window db-upgrade started (until 14:00 UTC): <note>``, or ``... ended``."""
    name = fit(entry.window, WINDOW_NAME)
    if entry.phase == "start":
        until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry.until_us / 1e6))
        icon, sentence = ":construction:", f"Maintenance window {name} started (until {until})"
    else:
        icon, sentence = ":white_check_mark:", f"Maintenance window {name} ended"
    text = f"{icon} {sentence}"
    note = fit(entry.note, SECTION_TEXT - len(text) - 2) if entry.note else ""
    text += f": {note}" if note else ""
    return Message(entry.channel, text, [section(text)], view=note_view(sentence, note))


def _rest(categories: int, count: int, unnamed: int) -> str:
    """``and 312 more categories: 4120``, with the unnamed drops (past the cap) counted in."""
    if not categories and not unnamed:
        return ""
    some = f"{categories} more {'category' if categories == 1 else 'categories'}" if categories else ""
    others = "other categories" if not categories else f"{some} and others"
    return f"and {others if unnamed else some}: {count + unnamed}"


_TAIL_ROOM = 60  # room kept in a digest for "and N more categories: M"
