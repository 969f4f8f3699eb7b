"""Events admitted and dropped per minute over the last hour, fleet-wide, at no cost to admission.

The admission scripts already keep cumulative counters in the stats hash (``lua/counts.lua``):
in all, and per value of every level below the root. Soon after each minute starts, by the
store's clock, every replica asks ``lua/history.lua`` to copy those counters into the minute's
record; the first does, the others find it written (the record is its own claim, so one
replica samples for the fleet). A record expires after :data:`KEEP_MS`, so at most a little
over an hour of them exists, each no larger than the stats hash, whose values are capped.

A minute's count is the next record's counter minus its own (the current minute: the stats
hash now minus its record). No false spike can come from it:

- the counters live in the store, not in a replica: one that restarts, or joins, changes
  nothing, and any replica's sample serves all;
- a minute that no replica sampled (the whole fleet down, the store unreachable) has no
  record: the minute before it and the minute itself are unknown (``None``), never the sum
  of several minutes shown as one;
- counters that went back (the store emptied, a failover to a replica that had not got
  them) give ``None`` for that minute, never a negative count nor the whole total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .client import Store, as_text
from .keys import Keys, Stat
from .scripts import Scripts

MINUTE_MS = 60_000
SHOWN = 60  # minutes answered: the last hour, the current minute last
KEEP_MS = 65 * MINUTE_MS  # the hour shown and a margin for a late sample; bounds the records
LATE = 0.25  # seconds past a minute's start the replicas sample, so the store's clock has passed it
RETRY = 5.0  # seconds before trying again when the store did not answer
AT = "@at"  # a record's field: when it was taken (store's clock, ms); never a counter's name


@dataclass(frozen=True)
class Minute:
    """One minute: its start (unix seconds) and the events admitted and dropped in it (None: unknown)."""

    at: int
    admitted: int | None
    dropped: int | None


@dataclass(frozen=True)
class Series:
    """The last :data:`SHOWN` minutes, oldest first; the last one counts up to ``now_ms``."""

    now_ms: int
    minutes: list[Minute]


def fields_of(level: str | None = None, value: str = "") -> tuple[str, str]:
    """The stats hash's counters of admitted and dropped events: in all, or of one level value."""
    if level is None:
        return (Stat.ACCEPTED, Stat.DROPPED)
    prefix = f"{Stat.PER_LEVEL}:{level}"  # as counts.lua names them
    return (f"{prefix}:{Stat.ACCEPTED}:{value}", f"{prefix}:{Stat.DROPPED}:{value}")


class History:
    """The per-minute records of one deployment: taken by :meth:`sample`, read by :meth:`series`."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self._next_in = 0.0  # seconds until the next sample: the first at once

    def pause(self) -> float:
        """Seconds to wait before the next :meth:`sample` (for ``tasks.every``)."""
        return self._next_in

    async def sample(self) -> bool:
        """Record this minute's counters unless a replica did; True when this call wrote them."""
        self._next_in = RETRY  # kept if the store fails below
        now_ms = await self._store.server_time_us(self._keys.stats) // 1000
        minute = now_ms // MINUTE_MS
        keys = [self._keys.stats, self._keys.history(minute)]
        wrote = await self._store.run(self._scripts.history, keys, [now_ms, KEEP_MS])
        # Sleep to the next minute by the store's clock (measured here as a duration, so a
        # replica's own clock being off does not matter).
        self._next_in = ((minute + 1) * MINUTE_MS - now_ms) / 1000 + LATE
        return bool(wrote)

    async def series(self, fields: tuple[str, str]) -> Series:
        """Per minute, how much ``fields`` (admitted, dropped; see :func:`fields_of`) grew."""
        now_ms = await self._store.server_time_us(self._keys.stats) // 1000
        current = now_ms // MINUTE_MS
        starts = range(current - SHOWN + 1, current + 1)
        pipe = self._store.redis.pipeline(transaction=False)
        for minute in starts:
            pipe.hmget(self._keys.history(minute), AT, *fields)
        pipe.hmget(self._keys.stats, AT, *fields)
        replies = await self._store.call(pipe.execute)
        records = [_record(reply, live=False) for reply in replies[:-1]]
        records.append(_record(replies[-1], live=True))
        minutes = [Minute(minute * 60, *_grown(records[i], records[i + 1])) for i, minute in enumerate(starts)]
        return Series(now_ms, minutes)


Counts = tuple[int, int] | None  # a record's (admitted, dropped); None when there is no record


def _record(reply: Sequence[object], live: bool) -> Counts:
    """A record's counters; a counter it lacks is 0 (nothing counted yet), a record that is not there None."""
    at, *counts = reply
    if at is None and not live:
        return None
    admitted, dropped = (int(as_text(c)) if c is not None else 0 for c in counts)
    return admitted, dropped


def _grown(before: Counts, after: Counts) -> tuple[int | None, int | None]:
    """How much each counter grew; None where a record is missing or a counter went back."""
    if before is None or after is None:
        return None, None
    grown = [b - a for a, b in zip(before, after, strict=True)]
    return (grown[0], grown[1]) if min(grown) >= 0 else (None, None)
