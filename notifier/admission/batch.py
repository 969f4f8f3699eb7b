"""The arguments of one ``admit.lua`` call, and its reply: the script's protocol in one place.

``lua/admit.lua``'s header states the layout; :class:`Protocol` builds it from a
policy snapshot (the part that only changes with the snapshot is built once)
and reads the reply into named records.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..models import Event
from ..outbox import EventEntry, encode_event
from ..policy import Policy
from ..routing import Path
from ..rules import Rules
from ..settings import Settings
from ..store.client import as_text
from ..store.keys import Keys

MAX_REMEMBERED = 10_000  # level values held in per-value caches: values come from clients
NO_HOLD: list[Any] = ["", 0, 0, ""]  # the hold arguments of an event no window holds
MODES = {"firing": 1, "resolved": 2}  # the dedup mode of an event with a dedup_key, by its status (0: none)
SENT = 3  # the mode of a front-door message with a gateway ts: its record is the ts's
SENT_LIFE_US = 24 * 3600 * 1_000_000  # how long a gateway ts is known: replies and updates within it find the message


def rule_args(rules: Rules) -> list[int]:
    """Rules as the Lua scripts read them: the count of rules, then limit, window in us."""
    args = [len(rules)]
    for rule in rules:
        args += [rule.count, rule.window_ms * 1000]
    return args


class Wait(NamedTuple):
    """How long one level refuses an event (0: it has room), and its rule that stays full longest."""

    us: int
    rule: int  # from 1; 0 = none


class ScriptResult(NamedTuple):
    """One event's entry in the reply of ``admit.lua``."""

    outcome: str
    id: str
    level: int  # the refusing level, from 0 (the root); -1 = none
    life_us: int = 0  # a firing alert's remaining life after this event (us), else 0
    waits: tuple[Wait, ...] = ()  # per level, root first; empty for a duplicate or a resolution

    @classmethod
    def of(cls, reply: list[Any]) -> ScriptResult:
        outcome, first_id = as_text(reply[0]), as_text(reply[1])
        numbers = [int(v) for v in reply[4:]]
        waits = tuple(Wait(numbers[i], numbers[i + 1]) for i in range(0, len(numbers), 2))
        return cls(outcome, first_id, int(reply[2]) - 1, int(reply[3]), waits)


class Reply(NamedTuple):
    """A call's results, one per event, and the alert epoch when the call began."""

    results: list[ScriptResult]
    epoch: int


class Repeat(NamedTuple):
    """Firing repeats of one alert answered ``duplicate`` by a replica, to count in the store."""

    record: str  # the alert's record key
    first_id: str
    times: int
    last_us: int  # when the last one came, in the store's clock


class Refused(NamedTuple):
    """A reply that decided nothing: the deadline passed, or the policy was out of date."""

    reason: str  # "expired" or "stale"


class Bucket(NamedTuple):
    """What the script needs of one value of one level, built once per policy."""

    keys: list[str]  # its log, and with reserves the log of no class and of each class
    args: list[Any]  # level (from 1), value, lapse of its override, rules, K, reserved slots


def bucket_of(keys: Keys, policy: Policy, level: int, value: str) -> Bucket:
    """Keys and arguments of the value ``value`` of level number ``level``, as lua/buckets.lua reads them."""
    name = policy.tree[level].name
    rules, reserves = policy.rules_for(level, value), policy.tree[level].reserves_of(value)
    names = [keys.bucket_log(name, value)]
    if reserves:
        classes = ["none", *(reserve.class_id for reserve in reserves)]
        names += [keys.class_log(name, value, c) for c in classes]
    slots = [reserve.slots(rule) for reserve in reserves for rule in rules]
    args = [level + 1, value, policy.until_us(level, value) or 0, *rule_args(rules), len(reserves), *slots]
    return Bucket(names, args)


RefusalKey = tuple[Path, int]  # (the refused event's path, the refusing level): counted together


@dataclass
class Pending:
    """An event waiting for its decision."""

    event: Event
    id: str
    deadline: float  # time.monotonic() after which its request answers 503
    path: Path
    source: str = "anonymous"
    message: dict[str, Any] | None = None  # a front-door client's message, posted as sent (EventEntry.message)


class Protocol:
    """Builds ``admit.lua`` calls under one policy snapshot."""

    def __init__(self, keys: Keys, settings: Settings, policy: Policy, edits: bool) -> None:
        self.policy, self._keys = policy, keys
        cap = 0 if settings.categories is not None else settings.max_categories
        tree = policy.tree
        self._head: list[Any] = [settings.digest_interval * 1000, int(settings.shadow), cap, int(edits)]
        self._head += [len(tree), *(level.name for level in tree)]
        self._keys_head = [
            keys.outbox,
            keys.stats,
            keys.categories,
            keys.digest_due,
            keys.overrides_version,
            keys.edits,
            *keys.alert_keys,
            keys.held_pairs,
            keys.alert_epoch,
            *(keys.level_values(level.name) for level in tree[1:]),
        ]
        keyed = [i for i, level in enumerate(tree) if level.key == "category"]
        self.window_level = keyed[0] if keyed else len(tree) - 1  # whose longest window an alert lives
        self._buckets: dict[tuple[int, str], Bucket] = {}

    def bucket(self, level: int, value: str) -> Bucket:
        """Keys and arguments of one level value, built once per policy."""
        known = self._buckets.get((level, value))
        if known is None:
            known = self._bucket(level, value)
            if len(self._buckets) < MAX_REMEMBERED:
                self._buckets[(level, value)] = known
        return known

    def _bucket(self, level: int, value: str) -> Bucket:
        return bucket_of(self._keys, self.policy, level, value)

    def alert_window_us(self, path: Path) -> int:
        """How long an alert's record lives: the longest window of its category's level (else the lowest)."""
        level = self.window_level
        return self.policy.longest_ms(level, path.values[level]) * 1000

    def call(
        self,
        batch: list[Pending],
        refused: dict[RefusalKey, int],
        deadline_us: int,
        now_us: int,
        repeats: Sequence[Repeat] = (),
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one call: refusals and repeats counted here, then the batch in order.

        ``now_us`` (the store's clock, as last sampled) picks each channel's window in force
        or next; the script decides by its own clock whether it holds.
        """
        policy = self.policy
        placed: dict[tuple[int, str], int] = {}
        bucket_keys: list[str] = []
        bucket_args: list[Any] = []
        refs: dict[Path, list[int]] = {}
        for item in batch:
            if item.path not in refs:
                refs[item.path] = self._place(item.path, placed, bucket_keys, bucket_args)
        keys = [*self._keys_head, *bucket_keys]
        args: list[Any] = [deadline_us, policy.version, policy.earliest_until_us or 0, *self._head]
        args += [len(placed), *bucket_args, len(refused)]
        for (path, level), count in refused.items():
            keys.append(self._keys.suppressed(path.channel))
            hold = self._hold(path.channel, path.category, "", now_us)
            args += [path.category, path.channel, level + 1, count, *hold, *path.values[1:]]
        args.append(len(repeats))
        for repeat in repeats:
            keys.append(repeat.record)
            args += [repeat.first_id, repeat.times, repeat.last_us]
        received = time.time()
        for item in batch:
            self._event_args(item, refs[item.path], received, now_us, keys, args)
        return keys, args

    def _place(self, path: Path, placed: dict[tuple[int, str], int], keys: list[str], args: list[Any]) -> list[int]:
        """The call's bucket number (from 1) and the class of ``path`` at each level, placing new buckets."""
        refs: list[int] = []
        for level, value, class_index in path.cells:
            number = placed.get((level, value))
            if number is None:
                bucket = self.bucket(level, value)
                number = placed[(level, value)] = len(placed) + 1
                keys += bucket.keys
                args += bucket.args
            refs += [number, class_index]
        return refs

    def _hold(self, channel: str, category: str, severity: str, now_us: int) -> list[Any]:
        """The hold arguments of an event: the window of its channel in force or next, or none."""
        policy = self.policy
        held = None if severity in policy.hold_bypass else policy.hold(channel, category, now_us)
        if held is None:
            return NO_HOLD
        name, span = held
        return [name, span.start_us, span.end_us, Keys.held_pair(channel, name, span.start_us)]

    def _event_args(
        self, item: Pending, refs: list[int], received: float, now_us: int, keys: list[str], args: list[Any]
    ) -> None:
        event, path = item.event, item.path
        gateway_ts = item.message.get("ts") if item.message else None
        mode = MODES[event.status] if event.dedup_key else SENT if gateway_ts else 0
        # Without a dedup_key or a gateway ts the script never reads the record: any key of the slot will do.
        if event.dedup_key:
            record = self._keys.record(event.category, event.dedup_key)
        else:
            record = self._keys.sent(gateway_ts) if gateway_ts else self._keys.outbox
        keys += [record, self._keys.suppressed(path.channel)]
        entry = EventEntry(
            item.id,
            event.category,
            path.channel,
            event.model_dump(exclude_none=True),
            received,
            record if mode else "",
            source=item.source,
            template=path.template,
            message=item.message,
        )
        args += [
            item.id,
            event.category,
            path.channel,
            mode,
            *self._hold(path.channel, event.category, event.severity, now_us),
            encode_event(entry),
        ]
        if mode == 2:
            args.append(encode_event(replace(entry, reply=True)))
        args += [SENT_LIFE_US if mode == SENT else self.alert_window_us(path), *refs]


def read_reply(reply: list[Any]) -> Reply | Refused:
    """The script's reply as one result per event and the epoch, or why it decided nothing."""
    if isinstance(reply[0], (bytes, str)):
        return Refused(as_text(reply[0]))
    return Reply([ScriptResult.of(item) for item in reply[:-1]], int(reply[-1]))


def retry_seconds(wait: float) -> float:
    """``retry_after`` of a refusal: ``wait`` (seconds) rounded up to the millisecond, so never 0 and
    never shorter than the real wait (and ``round`` costs seven times as much)."""
    return max(1, math.ceil(wait * 1000)) / 1000


def retry_after_us(wait_us: int) -> float:
    """``retry_after`` of a wait the script gave in microseconds: whole milliseconds, rounded up
    in integer arithmetic (``2007000 / 1e6 * 1000`` is not 2007 in floating point)."""
    return max(1, -(-wait_us // 1000)) / 1000
