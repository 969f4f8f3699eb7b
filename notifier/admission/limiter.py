"""The hierarchical limiter, batching concurrent events into one script call.

Concurrent requests are coalesced: every event that arrives while a call is in
flight rides in the next one, in arrival order, each with its own answer, so
the limiter costs one round trip per batch rather than per event.

A sliding log loses entries only with time, so a level Redis reported full
stays full at least for the wait it returned. Until then this replica refuses
events of that level itself, exactly, without a round trip; the refusals are
still written to the shared counters with the next call (or within
``FLUSH_DELAY``, and before ``/v1/stats`` answers).

This module is the hot path of an alert storm and is hand-tuned where
``bench/instructions.py`` showed a cost (plain dicts, tuples built directly).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import StoreUnavailable
from ..models import Decision, Event, Outcome
from ..outbox import EventEntry, encode_event
from ..policy import GLOBAL, Policy
from ..rules import Rules
from ..settings import Settings
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts

MAX_BATCH = 256
FLUSH_DELAY = 0.05
RETRY_DELAY = 1.0  # between attempts to count refusals while the store is unreachable
MAX_REMEMBERED = 10_000  # categories held in per-category caches: names come from clients
_OPEN = (0.0, "", "")  # a level with room: (full until, level, rule text)

# Decision's generated __new__ is Python code, a visible cost when every request of a
# storm is a local refusal: that path builds the tuple directly (all five fields given).
_new_decision = tuple.__new__
_DROPPED = Outcome.DROPPED


def retry_seconds(wait: float) -> float:
    """``retry_after`` of a refusal: ``wait`` rounded up to the millisecond, so never 0 and
    never shorter than the real wait (and ``round`` costs seven times as much)."""
    return max(1, math.ceil(wait * 1000)) / 1000


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

    @classmethod
    def of(cls, reply: list[Any]) -> ScriptResult:
        outcome, first_id, level = (as_text(v) for v in reply[:3])
        gw, grule, cw, crule = (int(v) for v in reply[3:7])
        return cls(outcome, first_id, level, gw, grule, cw, crule)


@dataclass
class _Pending:
    event: Event
    id: str
    future: asyncio.Future[Decision]


class _Category(NamedTuple):
    """What the script needs of a category, built once per category and policy."""

    log_key: str
    suppressed_key: str
    channel: str
    rule_args: list[int]


class Limiter:
    """Decides each event against the global and category levels in one atomic call."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys, settings: Settings, policy: Policy) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self._shadow = settings.shadow
        self._digest_us = settings.digest_interval * 1000
        self._queue: list[_Pending] = []
        # Refusals decided here, not yet counted in Redis: (category, level) -> how many.
        self._refused: dict[tuple[str, str], int] = {}
        self._busy = False
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        # Levels known to be full: None (global) or a category -> (until, level, rule text).
        self._blocked: dict[str | None, tuple[float, str, str]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._categories: dict[str, _Category] = {}
        self.policy = policy

    @property
    def policy(self) -> Policy:
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        """Swap the snapshot: what was cached under the old one is void."""
        self._policy = policy
        self._blocked.clear()
        self._categories.clear()
        self._head = [*rule_args(policy.rules_for(GLOBAL)), self._digest_us, 1 if self._shadow else 0]

    async def admit(self, event: Event) -> Decision:
        """Admit or refuse ``event``; raises :class:`StoreUnavailable` when the store is down."""
        return self.refuse_locally(event) or await self.decide_in_store(event)

    async def decide_in_store(self, event: Event) -> Decision:
        """Send ``event`` with the next batch to the script and wait for its answer."""
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(event, uuid.uuid4().hex, future))
        self._schedule(0)
        return await future

    async def flush(self, timeout: float = 2.0) -> None:
        """Write pending local refusals to the shared counters (waits at most ``timeout``)."""
        if self._queue or self._refused or self._busy:
            self._idle.clear()
            self._schedule(0)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout)

    def count_refusal(self, category: str, level: str) -> None:
        """Count a refusal decided here (locally or by ``fail_open``) with the next call to the script."""
        key = (category, level)
        self._refused[key] = self._refused.get(key, 0) + 1  # a plain dict: half a Counter's cost
        if self._timer is None and not self._busy:  # else a call is already due
            self._schedule(FLUSH_DELAY)

    def refuse_locally(self, event: Event) -> Decision | None:
        """The refusal of ``event`` when its level is known to be full, else None (no I/O)."""
        # A repeated dedup_key is answered "duplicate" before any limit is checked,
        # which only Redis knows: such events always go to the script.
        blocked = self._blocked
        if not blocked or event.dedup_key or self._shadow:
            return None
        # Like the script, name the level that stays full longer (global on a tie).
        until, level, rule = blocked.get(None, _OPEN)
        category = blocked.get(event.category)
        if category is not None and category[0] > until:
            until, level, rule = category
        wait = until - time.monotonic()
        if wait <= 0:
            return None
        self.count_refusal(event.category, level)
        # No id: none is shown for a refusal, and the script only counts it. The wait is
        # positive, so its milliseconds rounded up are at least 1 (retry_seconds, inlined).
        return _new_decision(Decision, (_DROPPED, "", level, rule, math.ceil(wait * 1000) / 1000))

    def _schedule(self, delay: float) -> None:
        """Start the next call after ``delay`` unless one is in flight or due sooner."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if self._busy or (self._timer and self._due <= due):
            return
        if self._timer:
            self._timer.cancel()
        # The due time is kept here: uvloop's call_later(0) returns a Handle without when().
        self._timer, self._due = loop.call_later(delay, self._start), due

    def _start(self) -> None:
        self._timer = None
        if not self._queue and not self._refused:
            self._idle.set()
            return
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        refused, self._refused = self._refused, {}
        self._busy = True
        asyncio.get_running_loop().create_task(self._call(batch, refused, self._policy))

    async def _call(self, batch: list[_Pending], refused: dict[tuple[str, str], int], policy: Policy) -> None:
        sent, failed = time.monotonic(), True
        try:
            replies = await self._run(batch, refused, policy)
        except StoreUnavailable as exc:
            self._fail(batch, refused, exc)
        except BaseException as exc:  # never leave a request waiting forever
            self._fail(batch, refused, StoreUnavailable(repr(exc)))
            raise
        else:
            failed = False
            for item, reply in zip(batch, replies, strict=True):
                self._settle(item, ScriptResult.of(reply), sent, policy)
        finally:
            self._busy = False
            if self._queue:
                self._schedule(0)
            elif self._refused:
                # A store that is down is not asked 20 times a second just to count refusals
                # (against a hung one, each attempt would hold up the next events for a timeout).
                self._schedule(RETRY_DELAY if failed else FLUSH_DELAY)
            else:
                self._idle.set()

    async def _run(self, batch: list[_Pending], refused: dict[tuple[str, str], int], policy: Policy) -> Any:
        keys = [
            self._keys.global_log,
            self._keys.outbox,
            self._keys.stats,
            self._keys.categories,
            self._keys.digest_due,
        ]
        # Refusals decided here are only counted, a group per category and level at once.
        args: list[Any] = [*self._head, len(refused)]
        for (category, level), count in refused.items():
            known = self._category(category, policy)
            keys.append(known.suppressed_key)
            args += [category, known.channel, level, count]
        received = time.time()
        for item in batch:
            event = item.event
            known = self._category(event.category, policy)
            # Without a dedup_key the script never reads that key: any name of the slot will do.
            dedup = self._keys.record(event.category, event.dedup_key) if event.dedup_key else known.log_key
            keys += [known.log_key, dedup, known.suppressed_key]
            entry = EventEntry(item.id, event.category, known.channel, event.model_dump(exclude_none=True), received)
            args += [
                item.id,
                event.category,
                known.channel,
                1 if event.dedup_key else 0,
                encode_event(entry),
                *known.rule_args,
            ]
        return await self._store.run(self._scripts.admit, keys, args)

    def _category(self, category: str, policy: Policy) -> _Category:
        """Keys, channel and rule arguments of a category, built once per policy."""
        cached = self._categories.get(category)
        if cached is None or policy is not self._policy:
            channel = policy.channel_for(category)
            cached = _Category(
                self._keys.category_log(category),
                self._keys.suppressed(channel),
                channel,
                rule_args(policy.rules_for(category)),
            )
            if len(self._categories) < MAX_REMEMBERED and policy is self._policy:
                self._categories[category] = cached
        return cached

    def _fail(self, batch: list[_Pending], refused: dict[tuple[str, str], int], exc: StoreUnavailable) -> None:
        # The store may have restarted empty: what we knew about full levels is void.
        self._blocked.clear()
        for key, count in refused.items():  # keep local refusals until they are counted
            self._refused[key] = self._refused.get(key, 0) + count
        for item in batch:
            if not item.future.done():
                item.future.set_exception(exc)

    def _settle(self, item: _Pending, result: ScriptResult, sent: float, policy: Policy) -> None:
        category = item.event.category
        if result.outcome == "dropped" and policy is self._policy:
            self._remember_full(category, result, sent, policy)
        if item.future.done():
            return
        if result.outcome in ("dropped", "shadow"):
            level = result.level
            wait, rule = (
                (result.global_wait_us, result.global_rule)
                if level == GLOBAL
                else (result.category_wait_us, result.category_rule)
            )
            outcome = Outcome.SHADOW if result.outcome == "shadow" else Outcome.DROPPED
            decision = Decision(
                outcome, item.id, level, _rule_text(policy, category, level, rule), retry_seconds(wait / 1e6)
            )
        else:
            decision = Decision(Outcome(result.outcome), result.id)
        item.future.set_result(decision)

    def _remember_full(self, category: str, result: ScriptResult, sent: float, policy: Policy) -> None:
        """Note levels the script reported full, to refuse their events here until then."""
        if len(self._blocked) > MAX_REMEMBERED:
            self._blocked.clear()  # only a shortcut: forgetting costs round trips, not answers
        # Measured from when the call was sent, which is no later than Redis's
        # clock at execution, so a local refusal never outlasts the real one.
        if result.global_wait_us:
            self._blocked[None] = (
                sent + result.global_wait_us / 1e6,
                GLOBAL,
                _rule_text(policy, category, GLOBAL, result.global_rule),
            )
        if result.category_wait_us:
            self._blocked[category] = (
                sent + result.category_wait_us / 1e6,
                "category",
                _rule_text(policy, category, "category", result.category_rule),
            )


def _rule_text(policy: Policy, category: str, level: str, rule: int) -> str:
    """The text of rule number ``rule`` (from 1) of a level, e.g. ``10/30m``."""
    rules = policy.rules_for(GLOBAL if level == GLOBAL else category)
    return rules[max(rule, 1) - 1].text
