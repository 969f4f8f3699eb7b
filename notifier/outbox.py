"""The outbox entry: the one definition of what waits in the outbox stream for delivery.

A stream entry has one field, ``e``, holding the entry as JSON (a dead letter has
``reason`` too). ``admit.lua`` and ``restore.lua`` write event entries exactly as
:func:`encode_event` made them; ``digest.lua`` writes digest entries itself, in
the shape :func:`decode` reads (``{"k": "digest", "id", "ch", "counts": [[category,
n], ...], "more": [categories, n], "unnamed", "total", "since", "until"}``, times as strings
of microseconds, because Lua's JSON writer keeps only 14 digits of a number).
``admit.lua`` writes a reopened alert's ``Firing again`` reply as its event entry with
kind ``reopen``; ``timers.lua`` writes escalation steps (``{"k": "esc", "id", "cat",
"ch", "rec", "text", "at"}``); ``handover.lua`` the summary of what a window held
(``{"k": "held", "id", "ch", "window", "total", "dropped", "counts", "more", "unnamed",
"quotes": [[category, text, severity], ...], "since", "until"}``); ``announce.lua`` a
maintenance window's start or end (``{"k": "window", "id", "ch", "window", "phase", "note",
"until"}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

FIELD = "e"
EVENT, REPLY, DIGEST, REOPEN, ESCALATION = "event", "reply", "digest", "reopen", "esc"
HELD, WINDOW = "held", "window"


@dataclass(frozen=True)
class EventEntry:
    """An admitted event to post, or the resolution of an alert to post in its thread."""

    id: str
    category: str
    channel: str
    event: dict[str, Any]  # the event as posted: text, title, severity, fields, dedup_key, status
    received_at: float  # unix seconds, when the gateway took the request
    record: str = ""  # the key of its alert's record, for events with a dedup_key
    reply: bool = False  # a resolution (or a reopening): a reply in the thread of the alert's message
    reopened: bool = False  # a resolved alert firing again: its ``Firing again`` reply
    source: str = ""  # the name of the token that sent it ("anonymous" with no tokens)
    template: str | None = None  # the template its route chose (rendered at delivery), or None: the built-in shape
    # A front-door client's message, posted as sent (JSON ``msg``): its text, blocks, attachments and
    # presentation fields as the client gave them (``thread_ts`` maybe a gateway ts), and under ``ts``
    # the gateway ts the client knows it by, if any (its record is then ``record``).
    message: dict[str, Any] | None = None


@dataclass(frozen=True)
class DigestEntry:
    """A digest of the events of one channel suppressed since the last one."""

    id: str
    channel: str
    counts: list[tuple[str, int]]  # the largest categories, largest first
    more_categories: int  # categories not named in ``counts``
    more_count: int  # their drops
    total: int
    unnamed: int  # drops of categories past the cap, never named (NOTIFIER_MAX_CATEGORIES)
    since_us: int
    until_us: int


@dataclass(frozen=True)
class EscalationEntry:
    """An escalation step of an unacknowledged alert: a reply in its thread, with its mention."""

    id: str
    category: str
    channel: str
    record: str  # the alert's record: where its message is
    text: str  # "Not acknowledged after 5m: <@U0LEAD>" (from the settings: mentions stay)
    received_at: float  # unix seconds, when the step was taken


@dataclass(frozen=True)
class Quote:
    """One of the latest plain events a hand-over quotes."""

    category: str
    text: str
    severity: str


@dataclass(frozen=True)
class HeldEntry:
    """What a window held for one channel, handed over when it ended (its alerts follow on their own)."""

    id: str
    channel: str
    window: str  # the maintenance window's name, or the quiet hours as configured
    total: int  # events held (repeats and resolutions of held alerts not counted)
    dropped: int  # drops of the channel meanwhile
    counts: list[tuple[str, int]]  # the largest categories, largest first
    more_categories: int
    more_count: int
    unnamed: int  # held events of categories past the cap
    quotes: list[Quote]  # the latest plain events, newest first
    since_us: int
    until_us: int


@dataclass(frozen=True)
class WindowEntry:
    """A maintenance window's start or end, announced in one of its channels."""

    id: str
    channel: str
    window: str
    phase: str  # "start" or "end"
    note: str
    until_us: int


Entry = EventEntry | DigestEntry | EscalationEntry | HeldEntry | WindowEntry


def encode_event(entry: EventEntry) -> bytes:
    """The JSON the admission script appends to the outbox as field ``e``."""
    body: dict[str, Any] = {
        "k": REOPEN if entry.reopened else REPLY if entry.reply else EVENT,
        "id": entry.id,
        "cat": entry.category,
        "ch": entry.channel,
        "ev": entry.event,
        "at": entry.received_at,
    }
    if entry.record:
        body["rec"] = entry.record
    if entry.source:
        body["src"] = entry.source
    if entry.template:
        body["tpl"] = entry.template
    if entry.message is not None:
        body["msg"] = entry.message
    return orjson.dumps(body)


def decode(fields: Mapping[Any, Any]) -> Entry:
    """The entry of a stream entry's fields (bytes or text), as written by any of the scripts."""
    raw = fields.get(FIELD.encode(), fields.get(FIELD))
    if raw is None:
        raise ValueError(f"not an outbox entry: no field {FIELD!r}")
    body = orjson.loads(raw)
    if body["k"] == DIGEST:
        more_categories, more_count = body.get("more") or (0, 0)
        return DigestEntry(
            body["id"],
            body["ch"],
            [(str(c), int(n)) for c, n in body.get("counts") or []],
            int(more_categories),
            int(more_count),
            int(body["total"]),
            int(body.get("unnamed", 0)),
            int(body["since"]),
            int(body["until"]),
        )
    if body["k"] == HELD:
        return _held(body)
    if body["k"] == WINDOW:
        return WindowEntry(
            str(body["id"]),
            str(body["ch"]),
            str(body["window"]),
            str(body["phase"]),
            str(body.get("note", "")),
            int(body["until"]),
        )
    if body["k"] == ESCALATION:
        return EscalationEntry(
            str(body["id"]), str(body["cat"]), str(body["ch"]), str(body["rec"]), str(body["text"]), float(body["at"])
        )
    kind = body["k"]
    return EventEntry(
        body["id"],
        body["cat"],
        body["ch"],
        body["ev"],
        float(body["at"]),
        body.get("rec", ""),
        kind in (REPLY, REOPEN),
        kind == REOPEN,
        str(body.get("src", "")),
        body.get("tpl"),
        body.get("msg"),
    )


def _held(body: Mapping[str, Any]) -> HeldEntry:
    more_categories, more_count = body.get("more") or (0, 0)
    return HeldEntry(
        str(body["id"]),
        str(body["ch"]),
        str(body["window"]),
        int(body["total"]),
        int(body.get("dropped", 0)),
        [(str(c), int(n)) for c, n in body.get("counts") or []],
        int(more_categories),
        int(more_count),
        int(body.get("unnamed", 0)),
        [Quote(str(c), str(t), str(s)) for c, t, s in body.get("quotes") or []],
        int(body["since"]),
        int(body["until"]),
    )
