"""The hierarchical limiter: batches of events decided by one script call each, and local refusals.

Concurrent requests are coalesced: every event that arrives while a call is in flight rides in the
next one, in arrival order, each with its own answer, so the limiter costs one round trip per batch
rather than per event.

A level the script reported full stays full at least for the wait it returned: until then this
replica refuses such events itself, without a round trip, as the store would (``local.FullLevels``,
per level value and class); the refusals are still written to the shared counters with the next call
(or within ``FLUSH_DELAY``, and before ``/v1/stats`` answers).

Alerts (events with a ``dedup_key``) are decided here too when the store told what their key is (see
``known.py``): a firing repeat of an alert known firing is answered ``duplicate`` with the first
event's id (after the next read of the alert epoch when the last one aged), and a key known refused
is refused while a level that all its events pass alike is known full for every class they can have
(``local.FullLevels.refusal``). The repeats are counted in the store with the next call like local
refusals (the alert's ``n``, last seen time and one edit of its message). A locally decided answer
wrote nothing, so it never claims anything of the store (replication too).

Bounded time: each event has a deadline (``NOTIFIER_REDIS_TIMEOUT`` after it arrived). A call
carries the earliest deadline of its batch, in the store's clock, and the script does nothing past
it; the limiter waits for the reply a margin longer, then gives up. A reply that does not come after
the call was sent (late on a busy host, lost in a failover: ``ReplyLost``) leaves the events in
doubt: each raises :class:`OutcomeUnknown` with its id (a retry with its ``dedup_key`` is answered
``duplicate`` or admitted once), never :class:`StoreUnavailable`, which means nothing happened: the
call was not sent, the store refused it, or the script returned past its deadline. At most
``MAX_WAITING`` events wait for the store; past that, and while the store's circuit is open, events
are refused with 503 at once.

Replication: with ``NOTIFIER_REDIS_MIN_REPLICAS=N`` the script call is followed, on the same
connection, by ``WAIT N <time left>`` (``Store.run_replicated``). Every answer that says the event
is held (accepted, resolved, a duplicate of an alert's first event) is then given only when N
replicas acknowledged; otherwise it raises :class:`NotReplicated` with the event's id. A refusal
wrote only counters and is answered as always; local refusals never reach the store, nor wait.

This module is the hot path of an alert storm and is hand-tuned where ``bench/instructions.py``
showed a cost (plain dicts and tuples, no awaits on a local refusal).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import InDoubt, NotReplicated, OutcomeUnknown, ReplyLost, StoreUnavailable
from ..models import Decision, Event, Facts, Outcome
from ..policy import Policy
from ..routing import Path
from ..settings import Settings
from ..store.client import Store
from ..store.keys import Keys
from ..store.scripts import Scripts
from .batch import Pending, Protocol, RefusalKey, Refused, Repeat, Reply, ScriptResult, read_reply, retry_after_us
from .known import JOIN, REFRESH, AlertKey, KnownAlerts, Repeats
from .local import FullLevels

MAX_BATCH = 256
MAX_WAITING = 4 * MAX_BATCH  # events waiting for the store; past it, 503 at once
FLUSH_DELAY = 0.05
RETRY_DELAY = 1.0  # between attempts to count refusals while the store is unreachable
REPLY_MARGIN = 0.25  # seconds the reply may take beyond the script's deadline
STALE_RETRIES = 3  # calls retried after a policy change before the events answer 503

# Decision's generated __new__ is Python code, a visible cost when every request of a
# storm is a local refusal: that path builds the tuple directly (all five fields given).
_new_decision = tuple.__new__
_DROPPED = Outcome.DROPPED
_DUPLICATE = Outcome.DUPLICATE


class Limiter:
    """Decides each event against every level of the tree in one atomic call."""

    def __init__(
        self,
        store: Store,
        scripts: Scripts,
        keys: Keys,
        settings: Settings,
        policy: Policy,
        edits: bool = True,
        alerts: bool = True,
    ) -> None:
        """``alerts=False``: every event with a ``dedup_key`` goes to the store (tests compare)."""
        self._store, self._scripts, self._keys, self._settings = store, scripts, keys, settings
        self._shadow, self._edits = settings.shadow, edits
        self._budget = settings.redis_timeout / 1000
        self._queue: list[Pending] = []
        self._futures: dict[str, asyncio.Future[Decision]] = {}
        self._stale: dict[str, int] = {}  # event id -> calls it rode in that met a policy change
        # Refusals decided here, not yet counted in Redis: (path, refusing level) -> how many.
        self._refused: dict[RefusalKey, int] = {}
        self._busy = False
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._idle = asyncio.Event()
        self._idle.set()
        self._known = KnownAlerts()
        self._read: asyncio.Future[None] | None = None  # the next call's end, awaited by repeats met with an old read
        self._alerts = alerts
        self.reload: Callable[[], Awaitable[None]] | None = None  # reads the policy again (overrides)
        self.policy = policy

    @property
    def policy(self) -> Policy:
        return self._protocol.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        """Swap the snapshot: what was known under the old one is void."""
        self._protocol = Protocol(self._keys, self._settings, policy, self._edits)
        self._levels = FullLevels(policy)
        self._known.clear()

    async def admit(self, event: Event, source: str = "anonymous", channel: str | None = None) -> Decision:
        """Admit or refuse ``event``; raises :class:`StoreUnavailable` when the store is down and
        :class:`InDoubt` (``NotReplicated``, ``OutcomeUnknown``) when it may have admitted it."""
        path = self.policy.route(event, source, channel)
        decision = self.decide_locally(event, path) or await self.repeat_after_read(event)
        return decision or await self.decide_in_store(event, path, source)

    async def decide_in_store(
        self, event: Event, path: Path, source: str = "anonymous", message: dict[str, Any] | None = None
    ) -> Decision:
        """Send ``event`` (going ``path``) with the next batch to the script and wait for its answer.

        ``message``: a front-door client's message, queued to be posted as sent (``EventEntry.message``).
        """
        if len(self._queue) >= MAX_WAITING:
            raise StoreUnavailable(f"{MAX_WAITING} events already wait for the store")
        if not self._store.answering:
            raise StoreUnavailable("the store does not answer")
        event_id = uuid.uuid4().hex
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._futures[event_id] = future
        now = time.monotonic()
        self._levels.sent(path, now)
        self._queue.append(Pending(event, event_id, now + self._budget, path, source, message))
        self._schedule(0)
        try:
            return await future
        finally:
            self._futures.pop(event_id, None)

    async def flush(self, timeout: float = 2.0) -> None:
        """Write pending local refusals and repeats to the store (waits at most ``timeout``)."""
        if self._queue or self._refused or self._known.repeats or self._busy:
            self._idle.clear()
            self._schedule(0)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout)

    def count_refusal(self, path: Path, level: int) -> None:
        """Count a refusal by level number ``level``, decided here (locally or by ``fail_open``), with the
        next call to the script."""
        key = (path, level)
        self._refused[key] = self._refused.get(key, 0) + 1  # a plain dict: half a Counter's cost
        if self._timer is None and not self._busy:  # else a call is already due
            self._schedule(FLUSH_DELAY)

    def decide_locally(self, event: Facts, path: Path) -> Decision | None:
        """The answer to ``event`` (going ``path``) when this replica knows it as the store would,
        else None (no I/O)."""
        if event.dedup_key is None:
            return self._refusal(path)
        if event.status != "firing" or not self._alerts:
            return None
        # First: most keys of a storm are refused ones (a key is of one kind). See KnownAlerts.refused.
        if event.category + JOIN + event.dedup_key in self._known.refused:
            return self._refusal(path, True)
        return self._duplicate((event.category, event.dedup_key), time.monotonic())

    def _duplicate(self, key: AlertKey, now: float) -> Decision | None:
        """``duplicate`` for a firing repeat of ``key`` when it is known firing and the read is fresh."""
        first = self._known.duplicate(key, now)
        if first is None:
            return None
        self._keep_reading(now)
        return _new_decision(Decision, (_DUPLICATE, first, "", "", 0.0, None))

    async def repeat_after_read(self, event: Facts) -> Decision | None:
        """A firing repeat of an alert known firing whose epoch read is too old: ``duplicate`` once a read
        sent less than ``FRESH`` before the repeat arrived leaves it known firing (the call in flight, else
        the next: the contract bounds a resolution's reach by when a repeat arrives, so a slow reply
        still serves), else None (then ``decide_in_store``)."""
        key, arrived = (event.category, event.dedup_key or ""), time.monotonic()  # "" is no alert's key
        if event.status != "firing" or not self._alerts:
            return None
        for _ in range(2):  # the call in flight may have been sent too early for this repeat; the next is not
            if not self._known.awaits_read(key, arrived):
                break
            if self._read is None:
                self._read = asyncio.get_running_loop().create_future()
            read = self._read
            self._schedule(0)
            await asyncio.shield(read)  # one request cancelled must not cancel the others' wait
        return self._duplicate(key, arrived)

    def _keep_reading(self, now: float) -> None:
        """Keep the read of the alert epochs fresh while repeats are answered here."""
        if not self._busy:  # else the call in flight reads them, and its end schedules the next
            if now - self._known.read_at > REFRESH:  # the read is ageing: the next call reads it again
                self._schedule(0)
            elif self._timer is None:
                self._schedule(FLUSH_DELAY)

    def _refusal(self, path: Path, keyed: bool = False) -> Decision | None:
        """The refusal of an event going ``path`` when its levels are known well enough, else None.

        ``keyed``: the event's alert key is known refused (see ``FullLevels.refusal``).
        """
        if not self._levels.blocked or self._shadow:
            return None
        now = time.monotonic()
        block = self._levels.refusal(path, now, keyed)
        if block is None:
            return None
        self.count_refusal(path, block[1])
        # No id: none is shown for a refusal, and the script only counts it. The wait is
        # positive, so its milliseconds rounded up are at least 1 (retry_seconds, inlined).
        retry = math.ceil((block[0] - now) * 1000) / 1000
        return _new_decision(Decision, (_DROPPED, "", block[2], block[4], retry, block[3]))

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
        if not self._queue and not self._refused and not self._known.repeats and self._read is None:
            self._idle.set()
            return
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        refused, self._refused = self._refused, {}
        self._busy = True
        asyncio.get_running_loop().create_task(self._call(batch, refused, self._known.take_repeats(), self._protocol))

    async def _call(
        self, batch: list[Pending], refused: dict[RefusalKey, int], repeats: Repeats, protocol: Protocol
    ) -> None:
        sent, failed = time.monotonic(), True
        try:
            asked = await self._ask(batch, refused, repeats, protocol, sent)
        except StoreUnavailable as exc:
            self._known.give_back(repeats)
            self._fail(batch, refused, exc)
        except BaseException as exc:  # never leave a request waiting forever; the script may have run
            self._known.give_back(repeats)
            self._fail(batch, refused, ReplyLost(repr(exc)))
            raise
        else:
            if isinstance(asked, Refused):
                self._known.give_back(repeats)
                await self._not_decided(batch, refused, asked)
            else:
                failed = False
                reply, replicated = asked
                # Only what N replicas hold is learned: a repeat answered here claims its first event.
                current = self._known.observe(reply.epoch, sent) and protocol is self._protocol and replicated
                for item, result in zip(batch, reply.results, strict=True):
                    if replicated or result.outcome in ("dropped", "shadow"):
                        self._settle(item, result, sent, protocol)
                    else:
                        self._answer(item, NotReplicated(result.id))
                    if item.event.dedup_key is not None:
                        self._learn(item.event, result, sent, current)
        finally:
            self._busy = False
            read, self._read = self._read, None
            if read is not None:
                read.set_result(None)
            if self._queue:
                self._schedule(0)
            elif self._refused or self._known.repeats:
                # A store that is down is not asked 20 times a second just to count refusals
                # (against a hung one, each attempt would hold up the next events for a timeout).
                self._schedule(RETRY_DELAY if failed else FLUSH_DELAY)
            else:
                self._idle.set()

    async def _ask(
        self,
        batch: list[Pending],
        refused: dict[RefusalKey, int],
        repeats: Repeats,
        protocol: Protocol,
        sent: float,
    ) -> tuple[Reply, bool] | Refused:
        """One script call, bounded by the earliest deadline of the batch; True when N replicas hold it."""
        deadline = min((item.deadline for item in batch), default=sent + self._budget)
        if not self._store.clock_known:
            await self._store.sync_clock(self._keys.outbox)
        groups = [
            Repeat(record, first, int(count), self._store.store_time_us(last))
            for (record, first), (count, last) in repeats.items()
        ]
        now_us = self._store.store_time_us(sent)
        keys, args = protocol.call(batch, refused, self._store.store_time_us(deadline), now_us, groups)
        timeout = deadline + REPLY_MARGIN - time.monotonic()
        replicas = self._store.min_replicas
        if not replicas or not batch:  # counting local refusals claims nothing: no need to wait
            reply = read_reply(await self._store.run(self._scripts.admit, keys, args, timeout))
            return reply if isinstance(reply, Refused) else (reply, True)
        wait = deadline - time.monotonic()  # the time the requests have left, after the script ran
        written = await self._store.run_replicated(
            self._scripts.admit, keys, args, self._keys.replicated, timeout, wait
        )
        reply = read_reply(written.replies[0])
        return reply if isinstance(reply, Refused) else (reply, written.replicas >= replicas)

    async def _not_decided(self, batch: list[Pending], refused: dict[RefusalKey, int], why: Refused) -> None:
        """The script did nothing: past the deadline (503), or under an old policy (read it, try again).

        A deadline that passed by the store's clock but not here means that clock was set (a quiet
        hours test moves it): sample it again and try again, as for an old policy.
        """
        clock_set = why.reason == "expired" and bool(batch) and time.monotonic() < min(i.deadline for i in batch)
        resync = functools.partial(self._store.sync_clock, self._keys.outbox)
        again = self.reload if why.reason == "stale" else resync if clock_set else None
        if again is not None:
            with contextlib.suppress(StoreUnavailable):
                await again()
            retry = [item for item in batch if self._stale_again(item)]
            self._queue[:0] = retry
            batch = [item for item in batch if item not in retry]
            self._give_back(refused)
            refused = {}
        self._fail(batch, refused, StoreUnavailable(f"the store did not decide in time ({why.reason})"))

    def _stale_again(self, item: Pending) -> bool:
        count = self._stale[item.id] = self._stale.get(item.id, 0) + 1
        return count <= STALE_RETRIES

    def _give_back(self, refused: dict[RefusalKey, int]) -> None:
        for key, count in refused.items():  # keep local refusals until they are counted
            self._refused[key] = self._refused.get(key, 0) + count

    def _fail(self, batch: list[Pending], refused: dict[RefusalKey, int], exc: StoreUnavailable) -> None:
        """Answer the batch: ``StoreUnavailable`` when the script did not run, else ``OutcomeUnknown`` each."""
        # The store may have restarted empty: what we knew about full levels and alerts is void.
        self._levels.clear()
        self._known.clear()
        self._give_back(refused)
        doubt = isinstance(exc, ReplyLost)
        for item in batch:
            self._answer(item, OutcomeUnknown(item.id) if doubt else exc)

    def _answer(self, item: Pending, answer: Decision | StoreUnavailable | InDoubt) -> None:
        self._stale.pop(item.id, None)
        future = self._futures.get(item.id)
        if future is None or future.done():
            return
        if isinstance(answer, Exception):
            future.set_exception(answer)
        else:
            future.set_result(answer)

    def _settle(self, item: Pending, result: ScriptResult, sent: float, protocol: Protocol) -> None:
        if result.outcome not in ("dropped", "shadow"):
            self._answer(item, Decision(Outcome(result.outcome), result.id))
            return
        if protocol is self._protocol:  # else the policy changed meanwhile: nothing to keep
            self._levels.learn(item.path, result.waits, sent)
        policy, level = protocol.policy, result.level
        value = item.path.values[level]
        wait = result.waits[level]
        rule = policy.rules_for(level, value)[max(wait.rule, 1) - 1].text
        outcome = Outcome.SHADOW if result.outcome == "shadow" else Outcome.DROPPED
        decision = Decision(
            outcome, item.id, policy.tree[level].name, rule, retry_after_us(wait.us), value if level else None
        )
        self._answer(item, decision)

    def _learn(self, event: Event, result: ScriptResult, sent: float, current: bool) -> None:
        """Note what the store said of the event's key (only forget, when the reply is not current)."""
        key: AlertKey = (event.category, event.dedup_key or "")
        if not self._alerts or event.status != "firing" or not current:
            self._known.forget(key)  # a resolution here: its repeats may fire again
        elif result.life_us:
            self._known.learn_firing(key, result.id, sent + result.life_us / 1e6, self._keys.record(*key))
        elif result.outcome == "dropped":
            self._known.learn_refused(key)
        else:
            self._known.forget(key)
