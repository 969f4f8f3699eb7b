"""The audit log: every change to what the gateway does, who made it and from where, fleet-wide.

One stream in the shared store holds the entries (field ``e``: the entry as JSON, without its
``id`` and ``at``, which the stream's own entry id gives: the store's clock, in ms). Each write
trims the oldest entries beyond ``max_entries`` and those older than ``retention_ms``, exactly:
changes are made by people, a few a minute at most, so the exact trim's cost does not matter
and the bounds hold as the settings say. The function that applies a change records it, once, right after the
store accepted the change; each entry is also one JSON line on the ``audit`` logger.

An entry never holds a token, a secret or an event's text: callers give names, targets and
rules, and a window's note (operator text) at most.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .client import Store, as_text
from .keys import Keys

log = logging.getLogger("audit")

SCAN = 1000  # stream entries read per round trip while filtering
MAX_SCANNED = 20_000  # entries one page looks through at most; past them, "next" resumes the search


@dataclass(frozen=True)
class Change:
    """One change to record: what was done (``action``), to what, by whom, from which face."""

    action: str  # override.put, override.delete, window.open, window.end, ack, unack, requeue, reload
    target: Mapping[str, Any]
    by: str  # a token's name; slack:<user id> for a click
    via: str  # api, console, cli, slack, or file (a reload by signal or by the file's change)
    before: Any = None
    after: Any = None


@dataclass(frozen=True)
class Query:
    """What ``GET /v1/audit`` asks for: bounds in ms (inclusive), filters, a page size and where to go on."""

    since_ms: int | None = None
    until_ms: int | None = None
    action: str | None = None
    by: str | None = None
    limit: int = 100
    before: str | None = None  # an entry id: the page starts after it (older)


@dataclass(frozen=True)
class Page:
    """A page of entries, newest first, and the entry id to ask ``before`` for the next (None: no more)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    next: str | None = None


class Audit:
    """The audit stream of one deployment."""

    def __init__(self, store: Store, keys: Keys, max_entries: int, retention_ms: int) -> None:
        self._store, self._key = store, keys.audit
        self._max, self._retention_ms = max_entries, retention_ms

    async def record(self, change: Change) -> str:
        """Append ``change``; its entry id. Trims by count and by age in the same round trip."""
        body = {
            "by": change.by,
            "via": change.via,
            "action": change.action,
            "target": dict(change.target),
            "before": change.before,
            "after": change.after,
        }
        now_ms = (await self._store.server_time_us(self._key)) // 1000
        pipe = self._store.redis.pipeline(transaction=False)
        pipe.xadd(self._key, {"e": json.dumps(body, separators=(",", ":"))}, maxlen=self._max, approximate=False)
        pipe.xtrim(self._key, minid=str(max(0, now_ms - self._retention_ms)), approximate=False)
        entry_id, _ = await self._store.call(pipe.execute)
        entry = _entry(as_text(entry_id), body)
        log.info(json.dumps(entry, separators=(",", ":")))
        return str(entry["id"])

    async def page(self, query: Query) -> Page:
        """Entries matching ``query``, newest first."""
        if query.before is not None and not any(map(int, query.before.split("-"))):
            return Page()  # nothing is older than 0-0, and Redis refuses the range "(0-0"
        # An id of ms alone is that ms's first entry as a start and its last as an end: bounds inclusive.
        top = f"({query.before}" if query.before else ("+" if query.until_ms is None else str(query.until_ms))
        bottom = "-" if query.since_ms is None else str(query.since_ms)
        found: list[dict[str, Any]] = []
        scanned, last = 0, ""
        while scanned < MAX_SCANNED:
            raw = await self._store.call(self._store.redis.xrevrange, self._key, top, bottom, count=SCAN)
            for entry_id, fields in raw:
                last, scanned = as_text(entry_id), scanned + 1
                entry = _decoded(last, fields)
                if entry is not None and _matches(entry, query):
                    found.append(entry)
                    if len(found) == query.limit:
                        return Page(found, last)
            if len(raw) < SCAN:
                return Page(found, None)
            top = f"({last}"
        return Page(found, last)


def _matches(entry: Mapping[str, Any], query: Query) -> bool:
    return (query.action is None or entry["action"] == query.action) and (query.by is None or entry["by"] == query.by)


def _decoded(entry_id: str, fields: Mapping[Any, Any]) -> dict[str, Any] | None:
    try:
        body = json.loads(as_text(fields.get(b"e") or fields.get("e") or ""))
    except ValueError:
        log.error("audit entry %s cannot be read, skipped", entry_id)
        return None
    return _entry(entry_id, body) if isinstance(body, dict) else None


def _entry(entry_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    at = datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, timezone.utc)
    return {"id": entry_id, "at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), **body}
