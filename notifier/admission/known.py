"""What this replica knows of alerts, so it can answer their repeats without a store round trip.

The store tells the limiter, with each decision of an alert's firing event, whether the alert
is firing after it (and how long its record lives on), or whether the event was refused by
the limits. While this replica knows an alert firing it answers the alert's firing repeats
``duplicate`` itself, as the store would; the repeats are counted here and sent to the store
in groups ("N repeats of this alert, the last at T") with the next call. A key known refused
is refused here while a level that every event of the key passes alike is known full for
every class such an event can have (``local.FullLevels``).

The alert epoch. Only the store knows when an alert stops firing (a resolution on any replica,
an HTTP event, a Slack click, ``/v1/alertmanager``). Every resolution bumps a counter in the
store, the alert epoch; each reply of the admission script carries its value as of the call's
start. A new value voids everything known. A repeat is answered ``duplicate`` here only when the
epoch was read unchanged by a call *sent* less than ``FRESH`` ago: a resolution that happened
before that call was sent would have changed the value read. So a firing repeat that arrives
more than ``FRESH`` after a resolution anywhere in the fleet (the contract allows 100 ms) always
goes to the store. Nothing polls: the calls that count the repeats are the reads. Once the
latest read is ``REFRESH`` old, the next repeat answered here starts a call at once, so while
repeats keep coming the reads stay fresh. When the read is too old (a quiet replica's first
repeat after a pause; a loaded process or a slow store making a read late), a repeat of an alert
known firing waits for the next read (the call in flight, or one started for it) and is answered
here if that read leaves it fresh, else asked of the store: never wrong, and a late read does not
turn a storm's repeats into store decisions, which would load the process further and make the
next read later still. An alert's expiry needs no message: its record's life is known.

Memory stays bounded whatever clients send: at most ``max_keys`` keys of each kind are kept,
the oldest learned forgotten first. Forgetting costs one round trip, never a wrong answer.
"""

from __future__ import annotations

from typing import TypeVar

MAX_KEYS = 20_000
FRESH = 0.09  # seconds: a local "duplicate" needs an epoch read sent this recently (the contract: 100 ms)
REFRESH = FRESH / 2  # seconds: a repeat answered here past this age of the read starts the next call at once

AlertKey = tuple[str, str]  # (category, dedup_key): an alert's record is per category
JOIN = "\x00"  # in no category: ``category + JOIN + dedup_key`` names one key, as one string
RepeatKey = tuple[str, str]  # (the alert's record key, first event id)
Repeats = dict[RepeatKey, list[float]]  # -> [count, time.monotonic() of the last]
K = TypeVar("K")
V = TypeVar("V")


class KnownAlerts:
    """Alerts known firing, keys known refused, and the repeats answered here not yet counted."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        # -> (first event id, record's end (monotonic), record key: hashed once, not at every flush)
        self.firing: dict[AlertKey, tuple[str, float, str]] = {}
        # Keys known refused, each ``category + JOIN + dedup_key``, insertion-ordered: the oldest is
        # forgotten first. One string, not an AlertKey: a storm's lookup then touches one object, not a
        # tuple and two strings, which served costs about 1 us with 5,000 keys (bench/RESULTS.md).
        self.refused: dict[str, None] = {}
        self.repeats: Repeats = {}
        self.epoch: int | None = None
        self._epoch_sent = float("-inf")  # when the read that found the current epoch was sent
        self.read_at = float("-inf")  # when the latest read that found it unchanged was sent

    def duplicate(self, key: AlertKey, now: float) -> str | None:
        """The first event id when a firing repeat of ``key`` is a duplicate for sure (and count it)."""
        known = self.firing.get(key)
        if known is None or known[1] <= now or now - self.read_at > FRESH:
            return None
        first = known[0]
        repeat = self.repeats.get((known[2], first))
        if repeat is None:
            self.repeats[(known[2], first)] = [1, now]
        else:
            repeat[0] += 1
            repeat[1] = now
        return first

    def awaits_read(self, key: AlertKey, now: float) -> bool:
        """True when ``key``'s alert is known firing and only the epoch's read is too old to answer
        its repeat here: the next read may let this replica answer it (``Limiter.repeat_after_read``)."""
        known = self.firing.get(key)
        return known is not None and known[1] > now and now - self.read_at > FRESH

    def observe(self, epoch: int, sent: float) -> bool:
        """Note the epoch read by a request sent at ``sent``; False when that read is older news."""
        if epoch != self.epoch:
            if sent < self._epoch_sent:
                return False  # a reply overtaken by a read that already saw a newer epoch
            self.clear()
            self.epoch, self._epoch_sent = epoch, sent
        if sent > self.read_at:
            self.read_at = sent
        return True

    def learn_firing(self, key: AlertKey, first_id: str, until: float, record: str) -> None:
        """``key``'s alert is firing, its record ``record`` lives until ``until`` (monotonic)."""
        self.refused.pop(_joined(key), None)
        self.firing.pop(key, None)
        _bounded(self.firing, self.max_keys)
        self.firing[key] = (first_id, until, record)

    def learn_refused(self, key: AlertKey) -> None:
        """``key``'s firing event was decided by the limits and refused."""
        self.firing.pop(key, None)
        joined = _joined(key)
        self.refused.pop(joined, None)
        _bounded(self.refused, self.max_keys)
        self.refused[joined] = None

    def knows_refused(self, key: AlertKey) -> bool:
        """True when ``key`` is known refused (the storm path looks in ``refused`` itself)."""
        return _joined(key) in self.refused

    def forget(self, key: AlertKey) -> None:
        """Nothing more is known of ``key``."""
        self.firing.pop(key, None)
        self.refused.pop(_joined(key), None)

    def clear(self) -> None:
        """Everything known is void (the counts of repeats already answered stay)."""
        self.firing.clear()
        self.refused.clear()
        self.read_at = float("-inf")

    def take_repeats(self) -> Repeats:
        """The repeats to count with the next call (given back if it fails)."""
        repeats, self.repeats = self.repeats, {}
        return repeats

    def give_back(self, repeats: Repeats) -> None:
        """Keep repeats a call did not count, to count them with a later one."""
        for key, (count, last) in repeats.items():
            kept = self.repeats.setdefault(key, [0, last])
            kept[0] += count
            kept[1] = max(kept[1], last)


def _joined(key: AlertKey) -> str:
    return key[0] + JOIN + key[1]


def _bounded(known: dict[K, V], cap: int) -> None:
    """Make room for one more entry: the oldest learned go first."""
    while len(known) >= cap:
        del known[next(iter(known))]
