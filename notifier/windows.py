"""Quiet hours: their grammar, and when they are in force, in their own time zone.

``NOTIFIER_QUIET_HOURS`` maps a channel (or ``*``, every channel) to windows
``[DAYS ]HH:MM-HH:MM TIMEZONE`` separated by ``;``, e.g. ``mon-fri 19:00-08:00
Europe/Berlin; sat-sun 00:00-24:00 Europe/Berlin``. DAYS are the days on which a
window starts (every day when omitted); an end at or before the start is on the
next day; the zone is an IANA name, read with :mod:`zoneinfo`.

Daylight saving time: a window is never skipped nor doubled. A wall time in the
repeated hour counts once, at its first occurrence; a wall time in the skipped
hour is the change itself (the first instant after the gap).

Times are microseconds of the store's clock (unix time), as everywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
US = 1_000_000
_WINDOW = re.compile(r"^(?:(?P<days>[A-Za-z,\-]+)\s+)?(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)\s+(?P<zone>\S+)$")
LOOKBACK_DAYS = 2  # a window starts at most a day before it covers an instant (plus a day of zone offsets)


@dataclass(frozen=True)
class Span:
    """One stretch of time a window is in force: ``start_us`` <= t < ``end_us``."""

    start_us: int
    end_us: int


@dataclass(frozen=True)
class QuietWindow:
    """One window of quiet hours as configured."""

    text: str  # as written, for messages and GET /v1/windows
    days: frozenset[int]  # weekdays (0 = Monday) on which it starts
    start: tuple[int, int]  # hour, minute (local)
    end: tuple[int, int]  # hour, minute (local); 24:00 is the end of the day
    zone: ZoneInfo

    def spans(self, from_us: int, to_us: int) -> list[Span]:
        """The spans of this window that overlap [from_us, to_us), in order."""
        first = _local_date(from_us, self.zone) - timedelta(days=LOOKBACK_DAYS)
        last = _local_date(to_us, self.zone)
        found, day = [], first
        while day <= last:
            if day.weekday() in self.days:
                span = self._span(day)
                if span.start_us < span.end_us and span.end_us > from_us and span.start_us < to_us:
                    found.append(span)
            day += timedelta(days=1)
        return found

    def _span(self, day: date) -> Span:
        end_day = day if self.end > self.start else day + timedelta(days=1)
        return Span(wall_to_us(day, self.start, self.zone), wall_to_us(end_day, self.end, self.zone))


def parse_quiet_hours(value: str) -> tuple[QuietWindow, ...]:
    """The windows of one channel's value; ``ValueError`` naming what is wrong."""
    parts = [part.strip() for part in value.split(";")]
    if not any(parts):
        raise ValueError("no window given: write e.g. 'mon-fri 19:00-08:00 Europe/Berlin'")
    return tuple(_window(part) for part in parts if part)


def _window(text: str) -> QuietWindow:
    match = _WINDOW.match(" ".join(text.split()))
    if not match:
        raise ValueError(f"{text!r} is not '[DAYS ]HH:MM-HH:MM TIMEZONE', e.g. 'mon-fri 19:00-08:00 Europe/Berlin'")
    start, end = _clock(match["start"], text, end=False), _clock(match["end"], text, end=True)
    days = _days(match["days"].lower(), text) if match["days"] else frozenset(range(7))
    return QuietWindow(" ".join(text.split()), days, start, end, _zone(match["zone"], text))


def _clock(hhmm: str, text: str, end: bool) -> tuple[int, int]:
    hour, minute = int(hhmm[:2]), int(hhmm[3:])
    if (hour, minute) == (24, 0) and end:
        return 24, 0
    if hour > 23 or minute > 59:
        raise ValueError(f"{hhmm!r} in {text!r} is not a time of day (00:00 to 23:59, or 24:00 as an end)")
    return hour, minute


def _days(spec: str, text: str) -> frozenset[int]:
    days: set[int] = set()
    for item in spec.split(","):
        first, _, last = item.partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise ValueError(f"{item!r} in {text!r} is not a day or a range of days ({', '.join(DAYS)})")
        a, b = DAYS.index(first), DAYS.index(last or first)
        days.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(b + 1)])
    return frozenset(days)


def _zone(name: str, text: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"{name!r} in {text!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from exc


def _local_date(at_us: int, zone: ZoneInfo) -> date:
    return datetime.fromtimestamp(at_us / US, zone).date()


def wall_to_us(day: date, hhmm: tuple[int, int], zone: ZoneInfo) -> int:
    """The instant of a wall time in ``zone``: its first occurrence, or the change when it is skipped."""
    if hhmm == (24, 0):
        day, hhmm = day + timedelta(days=1), (0, 0)
    wall = datetime(day.year, day.month, day.day, *hhmm)
    first = _seconds(wall.replace(tzinfo=zone, fold=0))
    if _wall(first, zone) == wall:
        return first * US
    # In the skipped hour: fold=0 reads it with the offset before the change, fold=1 with the one
    # after, and the change lies between; it is the first instant whose wall time is not earlier.
    low, high = sorted((first, _seconds(wall.replace(tzinfo=zone, fold=1))))
    while low < high:
        middle = (low + high) // 2
        if _wall(middle, zone) >= wall:
            high = middle
        else:
            low = middle + 1
    return low * US


def _seconds(moment: datetime) -> int:
    return int(moment.timestamp())


def _wall(seconds: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc).astimezone(zone).replace(tzinfo=None)


def merged(spans: list[Span]) -> list[Span]:
    """Overlapping or touching spans as one (two windows back to back are one quiet stretch)."""
    out: list[Span] = []
    for span in sorted(spans, key=lambda s: s.start_us):
        if out and span.start_us <= out[-1].end_us:
            out[-1] = Span(out[-1].start_us, max(out[-1].end_us, span.end_us))
        else:
            out.append(span)
    return out


def current_or_next(windows: tuple[QuietWindow, ...], now_us: int, horizon_days: int = 8) -> Span | None:
    """The stretch in force at ``now_us`` (merged with what touches it), else the next one to start."""
    horizon = now_us + horizon_days * 86_400 * US
    spans = merged([s for w in windows for s in w.spans(now_us, horizon)])
    return next((s for s in spans if s.end_us > now_us), None)


@dataclass(frozen=True)
class MaintenanceWindow:
    """A maintenance window: it holds the events of its categories and channels from start to end."""

    name: str
    start_us: int
    end_us: int
    categories: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    note: str = ""
    by: str = ""

    def covers(self, channel: str, category: str) -> bool:
        """True when an event of ``category`` posted to ``channel`` is this window's to hold."""
        return channel in self.channels or category in self.categories

    @property
    def span(self) -> Span:
        return Span(self.start_us, self.end_us)
