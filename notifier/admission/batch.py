"""The arguments of one ``admit.lua`` call, and its reply: the script's protocol in one place.

``lua/admit.lua``'s header states the layout; :class:`Protocol` builds it from a
policy snapshot (the part that only changes with the snapshot is built once)
and reads the reply into named records.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..models import Event
from ..outbox import EventEntry, encode_event
from ..policy import GLOBAL, Policy
from ..rules import Rules
from ..settings import Settings
from ..store.client import as_text
from ..store.keys import Keys

MAX_REMEMBERED = 10_000  # categories held in per-category caches: names come from clients
NO_HOLD: list[Any] = ["", 0, 0, ""]  # the hold arguments of an event no window holds
MODES = {"firing": 1, "resolved": 2}  # the dedup mode of an event with a dedup_key, by its status (0: none)


def rule_args(rules: Rules) -> list[int]:
    """Rules as the Lua scripts read them: the count of rules, then limit, window in us."""
    args = [len(rules)]
    for rule in rules:
        args += [rule.count, rule.window_ms * 1000]
    return args


class ScriptResult(NamedTuple):
    """One event's entry in the reply of ``admit.lua``."""

    outcome: str
    id: str
    level: str
    global_wait_us: int
    global_rule: int  # index from 1 of the global rule that stays full longest; 0 = none
    category_wait_us: int
    category_rule: int
    life_us: int = 0  # a firing alert's remaining life after this event (us), else 0

    @classmethod
    def of(cls, reply: list[Any]) -> ScriptResult:
        outcome, first_id, level = (as_text(v) for v in reply[:3])
        gw, grule, cw, crule, life = (int(v) for v in reply[3:8])
        return cls(outcome, first_id, level, gw, grule, cw, crule, life)


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


class Category(NamedTuple):
    """What the script needs of a category, built once per category and policy."""

    log_key: str
    suppressed_key: str
    channel: str
    args: list[int]  # the lapse of its override, then its rules


@dataclass
class Pending:
    """An event waiting for its decision."""

    event: Event
    id: str
    deadline: float  # time.monotonic() after which its request answers 503


class Protocol:
    """Builds ``admit.lua`` calls under one policy snapshot."""

    def __init__(self, keys: Keys, settings: Settings, policy: Policy, edits: bool) -> None:
        self.policy, self._keys = policy, keys
        cap = 0 if settings.categories is not None else settings.max_categories
        self._options = [settings.digest_interval * 1000, int(settings.shadow), cap, int(edits)]
        classes = ["none", *(reserve.class_id for reserve in policy.reserves)]
        self._keys_head = [
            keys.global_log,
            keys.outbox,
            keys.stats,
            keys.categories,
            keys.digest_due,
            keys.overrides_version,
            keys.edits,
            *(keys.class_log(c) for c in classes),
            *keys.alert_keys,
            keys.held_pairs,
            keys.alert_epoch,
        ]
        rules = policy.rules_for(GLOBAL)
        reserves = [reserve.slots(rule) for reserve in policy.reserves for rule in rules]
        self._global = [*rule_args(rules), policy.until_us(GLOBAL) or 0, len(policy.reserves), *reserves]
        self._categories: dict[str, Category] = {}

    def category(self, name: str) -> Category:
        """Keys, channel and arguments of a category, built once per policy."""
        known = self._categories.get(name)
        if known is None:
            policy, channel = self.policy, self.policy.channel_for(name)
            known = Category(
                self._keys.category_log(name),
                self._keys.suppressed(channel),
                channel,
                [policy.until_us(name) or 0, *rule_args(policy.rules_for(name))],
            )
            if len(self._categories) < MAX_REMEMBERED:
                self._categories[name] = known
        return known

    def call(
        self,
        batch: list[Pending],
        refused: dict[tuple[str, str], int],
        deadline_us: int,
        now_us: int,
        repeats: Sequence[Repeat] = (),
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of one call: refusals and repeats counted here, then the batch in order.

        ``now_us`` (the store's clock, as last sampled) picks each channel's window in force
        or next; the script decides by its own clock whether it holds.
        """
        policy = self.policy
        keys = list(self._keys_head)
        args: list[Any] = [
            deadline_us,
            policy.version,
            policy.earliest_until_us or 0,
            *self._options,
            *self._global,
            len(refused),
        ]
        for (category, level), count in refused.items():
            known = self.category(category)
            keys.append(known.suppressed_key)
            args += [category, known.channel, level, count, *self._hold(known.channel, category, "", now_us)]
        args.append(len(repeats))
        for repeat in repeats:
            keys.append(repeat.record)
            args += [repeat.first_id, repeat.times, repeat.last_us]
        received = time.time()
        for item in batch:
            self._event_args(item, received, now_us, keys, args)
        return keys, args

    def _hold(self, channel: str, category: str, severity: str, now_us: int) -> list[Any]:
        """The hold arguments of an event: the window of its channel in force or next, or none."""
        policy = self.policy
        held = None if severity in policy.hold_bypass else policy.hold(channel, category, now_us)
        if held is None:
            return NO_HOLD
        name, span = held
        return [name, span.start_us, span.end_us, Keys.held_pair(channel, name, span.start_us)]

    def _event_args(self, item: Pending, received: float, now_us: int, keys: list[str], args: list[Any]) -> None:
        event, known = item.event, self.category(item.event.category)
        mode = MODES[event.status] if event.dedup_key else 0
        # Without a dedup_key the script never reads the record: any key of the slot will do.
        record = self._keys.record(event.category, event.dedup_key) if event.dedup_key else known.log_key
        keys += [known.log_key, record, known.suppressed_key]
        entry = EventEntry(
            item.id,
            event.category,
            known.channel,
            event.model_dump(exclude_none=True),
            received,
            record if mode else "",
        )
        args += [
            item.id,
            event.category,
            known.channel,
            self.policy.class_of(event.category, event.severity),
            mode,
            *self._hold(known.channel, event.category, event.severity, now_us),
            encode_event(entry),
        ]
        if mode == 2:
            args.append(encode_event(replace(entry, reply=True)))
        args += known.args


def read_reply(reply: list[Any]) -> Reply | Refused:
    """The script's reply as one result per event and the epoch, or why it decided nothing."""
    if isinstance(reply[0], (bytes, str)):
        return Refused(as_text(reply[0]))
    return Reply([ScriptResult.of(item) for item in reply[:-1]], int(reply[-1]))
