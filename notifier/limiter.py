"""Admission: the hierarchical limiter, batching concurrent events into one script call.

Concurrent requests are coalesced: every event that arrives while a call is in
flight rides in the next one, in arrival order, each with its own answer, so
the limiter costs one round trip per batch rather than per event.

A sliding log loses entries only with time, so a level Redis reported full
stays full at least for the wait it returned. Until then this replica refuses
events of that level itself, exactly, without a round trip; the refusals are
still written to the shared counters with the next call (or within
``FLUSH_DELAY``, and before ``/v1/stats`` answers).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from .models import Event
from .rules import rule_args
from .settings import Settings
from .store import Keys, Scripts, StoreUnavailable, as_text, run

MAX_BATCH = 256
FLUSH_DELAY = 0.05
RETRY_DELAY = 1.0  # between attempts to count refusals while the store is unreachable
MAX_REMEMBERED = 10_000  # categories held in per-category caches: names come from clients
_OPEN = (0.0, "", "")  # a level with room: (full until, level, rule text)


def retry_seconds(wait: float) -> float:
    """``retry_after`` of a refusal: ``wait`` rounded up to the millisecond, so never 0 and
    never shorter than the real wait (and ``round`` costs seven times as much)."""
    return max(1, math.ceil(wait * 1000)) / 1000


class Decision(NamedTuple):
    """The limiter's answer for one event (a tuple: an alert storm makes millions)."""

    outcome: str  # accepted | dropped | duplicate | shadow
    id: str
    level: str = ""
    rule: str = ""
    retry_after: float = 0.0


# NamedTuple's generated __new__ is Python code, a visible cost when every request of a
# storm is a local refusal: that path builds the tuple directly (all five fields given).
_new_decision = tuple.__new__


@dataclass
class _Pending:
    event: Event
    id: str
    future: asyncio.Future


class Limiter:
    """Decides each event against the global and category levels in one atomic call."""

    def __init__(self, scripts: Scripts, keys: Keys, settings: Settings) -> None:
        self._scripts, self._keys, self._settings = scripts, keys, settings
        self._shadow = settings.shadow
        self._head = rule_args(settings.global_limit) + [
            settings.digest_interval * 1000 if settings.digest_interval else 0,
            1 if settings.shadow else 0,
        ]
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
        self._categories: dict[str, tuple[str, str, str, list[int]]] = {}

    async def admit(self, event: Event) -> Decision:
        """Admit or refuse ``event``; raises :class:`StoreUnavailable` when the store is down."""
        return self.refuse_locally(event) or await self.decide_in_store(event)

    async def decide_in_store(self, event: Event) -> Decision:
        """Send ``event`` with the next batch to the script and wait for its answer."""
        event_id = uuid.uuid4().hex
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(event, event_id, future))
        self._schedule(0)
        return await future

    async def flush(self, timeout: float = 2.0) -> None:
        """Write pending local refusals to the shared counters (waits at most ``timeout``)."""
        if self._queue or self._refused or self._busy:
            self._idle.clear()
            self._schedule(0)
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except asyncio.TimeoutError:
                pass

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
        return _new_decision(Decision, ("dropped", "", level, rule, math.ceil(wait * 1000) / 1000))

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
        asyncio.get_running_loop().create_task(self._call(batch, refused))

    async def _call(self, batch: list[_Pending], refused: dict[tuple[str, str], int]) -> None:
        sent, failed = time.monotonic(), True
        try:
            results = await self._run(batch, refused)
        except StoreUnavailable as exc:
            self._fail(batch, refused, exc)
        except BaseException as exc:  # never leave a request waiting forever
            self._fail(batch, refused, StoreUnavailable(repr(exc)))
            raise
        else:
            failed = False
            for item, result in zip(batch, results):
                self._settle(item, result, sent)
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

    async def _run(self, batch: list[_Pending], refused: dict[tuple[str, str], int]) -> list:
        keys = [self._keys.global_log, self._keys.outbox, self._keys.stats,
                self._keys.categories, self._keys.digest_due]
        # Refusals decided here are only counted, a group per category and level at once.
        args = [*self._head, len(refused)]
        for (category, level), count in refused.items():
            _, suppressed, channel, _ = self._per_category(category)
            keys.append(suppressed)
            args += [category, channel, level, count]
        for item in batch:
            event = item.event
            log_key, suppressed, channel, rules = self._per_category(event.category)
            # Without a dedup_key the script never reads that key: any name of the slot will do.
            dedup = self._keys.dedup(event.category, event.dedup_key) if event.dedup_key else log_key
            keys += [log_key, dedup, suppressed]
            args += [item.id, event.category, channel, 1 if event.dedup_key else 0,
                     event_payload(item.id, event), *rules]
        return await run(self._scripts.admit, keys, args)

    def _per_category(self, category: str) -> tuple[str, str, str, list[int]]:
        """Keys, channel and rule arguments of a category, built once (they never change)."""
        cached = self._categories.get(category)
        if cached is None:
            channel = self._settings.channel_for(category)
            cached = (self._keys.category_log(category), self._keys.suppressed(channel), channel,
                      rule_args(self._settings.rules_for(category)))
            if len(self._categories) < MAX_REMEMBERED:
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

    def _settle(self, item: _Pending, result: list, sent: float) -> None:
        outcome, first_id, level = (as_text(v) for v in result[:3])
        global_wait, global_rule, category_wait, category_rule = (int(v) for v in result[3:])
        category = item.event.category
        if outcome == "dropped":
            self._remember_full(category, global_wait, global_rule, category_wait, category_rule, sent)
        if item.future.done():
            return
        if outcome in ("dropped", "shadow"):
            wait, rule = (global_wait, global_rule) if level == "global" else (category_wait, category_rule)
            decision = Decision("dropped", item.id, level, self._rule_text(category, level, rule),
                                retry_seconds(wait / 1e6))
            if outcome == "shadow":
                decision = decision._replace(outcome="shadow")
        else:
            decision = Decision(outcome, first_id)
        item.future.set_result(decision)

    def _remember_full(self, category: str, global_wait: int, global_rule: int,
                       category_wait: int, category_rule: int, sent: float) -> None:
        """Note levels the script reported full, to refuse their events here until then."""
        if len(self._blocked) > MAX_REMEMBERED:
            self._blocked.clear()  # only a shortcut: forgetting costs round trips, not answers
        # Measured from when the call was sent, which is no later than Redis's
        # clock at execution, so a local refusal never outlasts the real one.
        if global_wait:
            self._blocked[None] = (sent + global_wait / 1e6, "global",
                                   self._rule_text(category, "global", global_rule))
        if category_wait:
            self._blocked[category] = (sent + category_wait / 1e6, "category",
                                       self._rule_text(category, "category", category_rule))

    def _rule_text(self, category: str, level: str, rule: int) -> str:
        """The text of rule number ``rule`` (from 1) of a level, e.g. ``10/30m``."""
        rules = self._settings.global_limit if level == "global" else self._settings.rules_for(category)
        return rules[max(rule, 1) - 1].text


def event_payload(event_id: str, event: Event) -> str:
    """The outbox copy of an admitted event: its fields, id and arrival time, as JSON."""
    body = event.model_dump(exclude_none=True)
    body["id"] = event_id
    body["received_at"] = time.time()
    return json.dumps(body, separators=(",", ":"))
