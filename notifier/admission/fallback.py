"""``NOTIFIER_ON_STORE_ERROR=fail_open``: admission by a local limiter while the store is down.

With ``fail_closed`` (the default) a store error is a 503 and nothing else
happens. With ``fail_open`` each replica decides on its own, against the
configured rules with every count divided by ``NOTIFIER_REPLICAS`` (rounded
up, at least 1), so the fleet together stays near the configured limits.

An event admitted this way cannot be queued in the outbox, which lives in the
store. It is held in a bounded in-memory queue and, as soon as the store
answers again, appended to the outbox, written into the sliding logs of its
value at every level at the time it was admitted (so the fleet's windows count
it) and counted in ``/v1/stats``, then delivered as usual; a hand-over whose
reply was lost is sent again and then does nothing (``restore.lua`` marks the
event). Only a store that certainly did not decide is replaced here: an event
the store may have admitted (its reply lost) answers ``OutcomeUnknown``, never a
local decision, which would count it twice. A refusal is handed to the
limiter's pending refusal counts, which reach ``/v1/stats`` and the digests
with its next call. Honest limits: held events are lost if this process dies
before the store returns; dedup keys are not checked; when the queue is full
the event is refused with 503 rather than admitted and dropped silently.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import time
import uuid
from collections import deque
from typing import Any, NamedTuple

from prometheus_client import Counter

from ..errors import StoreUnavailable
from ..metrics import Metrics
from ..models import Decision, Event, Outcome
from ..outbox import EventEntry, encode_event
from ..policy import Policy
from ..routing import Path
from ..rules import Rule, Rules
from ..settings import Settings
from ..store.client import Store
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..tasks import cancel_and_wait
from ..tree import Reserves
from .batch import retry_seconds
from .limiter import Limiter

log = logging.getLogger(__name__)

MAX_HELD = 10_000  # admitted events kept in memory while the store is down
MAX_WINDOWS = 10_000  # level values with a local window: values come from clients
DRAIN_INTERVAL = 0.5  # seconds between attempts to hand held events to the store
HANDED_OVER_MS = 86_400_000  # how long the store remembers a handed-over event, so a retry does nothing


class LocalRule(NamedTuple):
    """A rule scaled to one replica's part of the fleet."""

    limit: int
    seconds: float
    text: str


def scaled(rules: Rules, replicas: int) -> list[LocalRule]:
    """Each rule with count = ceil(count / replicas) >= 1 (0 stays 0: a muted level stays muted)."""
    out = []
    for rule in rules:
        count = max(1, math.ceil(rule.count / replicas)) if rule.count else 0
        out.append(LocalRule(count, rule.window_ms / 1000, f"{count}/{rule.text.split('/', 1)[1]}"))
    return out


class LocalWindow:
    """One level's sliding log in this process: admission times, oldest first."""

    def __init__(self, rules: list[LocalRule]) -> None:
        self.rules = rules
        self.longest = max(rule.seconds for rule in rules)
        self.times: deque[float] = deque()

    def wait(self, now: float) -> tuple[float, str]:
        """Seconds until every rule has room (0 = room now), and the rule that waits longest."""
        while self.times and self.times[0] <= now - self.longest:
            self.times.popleft()
        worst, worst_rule = 0.0, ""
        ordered = list(self.times)
        for limit, seconds, text in self.rules:
            start = bisect.bisect_right(ordered, now - seconds)
            used = len(ordered) - start
            if used >= limit:
                free_at = (ordered[len(ordered) - limit] if limit else now) + seconds
                if free_at - now > worst:
                    worst, worst_rule = free_at - now, text
        return worst, worst_rule

    def wait_of(self, now: float, cls: int) -> tuple[float, str]:
        """As :meth:`wait`: without reserves, every class waits alike."""
        return self.wait(now)

    def add(self, now: float) -> None:
        self.times.append(now)

    def add_of(self, now: float, cls: int) -> None:
        self.add(now)


class ClassWindow(LocalWindow):
    """A level value with reserves (the contract's fair shares), for this replica's part.

    Each admission is kept with its class; a rule admits an event of class c when c
    admitted fewer than its reserved slots, or else when the overflow is below the
    shared slots. Waits are found among the departures and kept until the next
    admission, so a storm of refusals costs a lookup each.
    """

    def __init__(self, rules: list[LocalRule], reserves: Reserves) -> None:
        super().__init__(rules)
        self.classes: deque[int] = deque()
        self._slots = [[r.slots(Rule(rule.limit, 1, "")) for rule in rules] for r in reserves]
        self._waits: dict[int, tuple[float, str]] = {}

    def wait(self, now: float) -> tuple[float, str]:
        return self.wait_of(now, 0)

    def wait_of(self, now: float, cls: int) -> tuple[float, str]:
        """Seconds until an event of class ``cls`` has room under every rule, and the rule that waits longest."""
        while self.times and self.times[0] <= now - self.longest:
            self.times.popleft()
            self.classes.popleft()
        cached = self._waits.get(cls)
        if cached is not None and cached[0] > 0 and now < cached[0]:
            return cached[0] - now, cached[1]
        worst, worst_rule = 0.0, ""
        for index, rule in enumerate(self.rules):
            if self._admits(index, cls, now):
                continue
            free = [t + rule.seconds for t in self.times if t + rule.seconds > now]
            at = next((t for t in sorted(free) if self._admits(index, cls, t)), now + rule.seconds)
            if at - now > worst:
                worst, worst_rule = at - now, rule.text
        self._waits[cls] = (now + worst if worst else 0.0, worst_rule)
        return worst, worst_rule

    def _admits(self, index: int, cls: int, at: float) -> bool:
        rule = self.rules[index]
        used = [0] * (len(self._slots) + 1)
        for t, c in zip(self.times, self.classes, strict=True):
            if t > at - rule.seconds:
                used[c] += 1
        reserved = [0] + [slots[index] for slots in self._slots]
        overflow = sum(max(0, n - r) for n, r in zip(used, reserved, strict=True))
        return (cls > 0 and used[cls] < reserved[cls]) or overflow < rule.limit - sum(reserved)

    def add_of(self, now: float, cls: int) -> None:
        self.add(now)
        self.classes.append(cls)
        self._waits.clear()


class Held(NamedTuple):
    """An event admitted here, waiting to be handed to the store."""

    entry: EventEntry
    admitted_us: int  # this replica's clock: the only record of when it was admitted
    path: Path


class Fallback:
    """The fail_open limiter and the queue of events it admitted."""

    def __init__(
        self, settings: Settings, store: Store, scripts: Scripts, keys: Keys, metrics: Metrics, limiter: Limiter
    ) -> None:
        self._store, self._scripts, self._keys, self._limiter = store, scripts, keys, limiter
        self._replicas = settings.replicas * settings.workers  # each worker holds its share of the limits
        self._cap = 0 if settings.categories is not None else settings.max_categories
        self._label = metrics.decisions.label
        self._windows: dict[tuple[int, str], LocalWindow] = {}
        self._held: deque[Held] = deque()
        self._task: asyncio.Task[None] | None = None
        self.decisions = Counter(
            "notifier_fail_open",
            "Events decided locally while the store was unreachable (NOTIFIER_ON_STORE_ERROR=fail_open), by outcome",
            ["category", "outcome"],
            registry=metrics.registry,
        )

    @property
    def held(self) -> int:
        """Admitted events not yet handed to the store."""
        return len(self._held)

    def admit(
        self, event: Event, path: Path, source: str, policy: Policy, message: dict[str, Any] | None = None
    ) -> Decision:
        """Decide ``event`` (going ``path``) locally; raises :class:`StoreUnavailable` when the queue is full.

        ``message``: a front-door client's message (posted as sent; its gateway ts is not recorded here).
        """
        if len(self._held) >= MAX_HELD:
            raise StoreUnavailable("store unreachable and the fail_open queue is full")
        now = time.monotonic()
        windows = [self._window(level, value, policy) for level, value, _ in path.cells]
        waits = [window.wait_of(now, cls) for window, (_, _, cls) in zip(windows, path.cells, strict=True)]
        level = max(range(len(waits)), key=lambda i: (waits[i][0], -i))  # the longest; the upper on a tie
        wait, rule = waits[level]
        if wait:
            name = policy.tree[level].name
            self.decisions.labels(self._label(event.category), f"dropped_{name}").inc()
            self._limiter.count_refusal(path, level)
            return Decision(Outcome.DROPPED, "", name, rule, retry_seconds(wait), path.values[level] if level else None)
        for window, (_, _, cls) in zip(windows, path.cells, strict=True):
            window.add_of(now, cls)
        entry = EventEntry(
            uuid.uuid4().hex,
            event.category,
            path.channel,
            event.model_dump(exclude_none=True),
            time.time(),
            source=source,
            template=path.template,
            message=message,
        )
        self._held.append(Held(entry, int(time.time() * 1e6), path))
        self.decisions.labels(self._label(event.category), "accepted").inc()
        self._wake()
        return Decision(Outcome.ACCEPTED, entry.id)

    def _window(self, level: int, value: str, policy: Policy) -> LocalWindow:
        window = self._windows.get((level, value))
        if window is None:
            if len(self._windows) >= MAX_WINDOWS:
                # Only windows with no admission left in them can go without loosening a limit.
                now = time.monotonic()
                self._windows = {k: w for k, w in self._windows.items() if w.wait(now)[0] or k[0] == 0}
            rules = scaled(policy.rules_for(level, value), self._replicas)
            reserves = policy.tree[level].reserves_of(value)
            window = ClassWindow(rules, reserves) if reserves else LocalWindow(rules)
            self._windows[(level, value)] = window
        return window

    def _wake(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain_loop())

    async def _drain_loop(self) -> None:
        while self._held:
            await asyncio.sleep(DRAIN_INTERVAL)
            await self.drain()

    async def drain(self) -> int:
        """Hand held events to the store (outbox, logs, counters); returns how many went."""
        moved = 0
        while self._held:
            try:
                await self._hand_over(self._held[0])
            except StoreUnavailable as exc:
                log.debug("store still unavailable, %d events held: %s", len(self._held), exc)
                break
            self._held.popleft()
            moved += 1
        if moved:
            log.warning("handed %d events admitted in fail_open mode to the store", moved)
        return moved

    async def _hand_over(self, held: Held) -> None:
        entry, path, policy, keys = held.entry, held.path, self._limiter.policy, self._keys
        names = [keys.outbox, keys.stats, keys.categories, *(keys.level_values(lv.name) for lv in policy.tree[1:])]
        args: list[object] = [entry.id, entry.category, held.admitted_us, encode_event(entry), self._cap]
        args.append(len(policy.tree))
        for (level, value, cls), tree_level in zip(path.cells, policy.tree, strict=True):
            reserves = tree_level.reserves_of(value)
            names.append(keys.bucket_log(tree_level.name, value))
            if reserves:  # every admitted event is in the log of its class, or of no class
                names.append(keys.class_log(tree_level.name, value, reserves[cls - 1].class_id if cls else "none"))
            args += [tree_level.name, value, policy.longest_ms(level, value), int(bool(reserves))]
        names.append(keys.restored(entry.id))  # a hand-over whose reply was lost is sent again: once only
        args.append(HANDED_OVER_MS)
        await self._store.run(self._scripts.restore, names, args)

    async def close(self) -> None:
        """Stop the drain loop after a last attempt; report what could not be handed over."""
        if self._task:
            await cancel_and_wait([self._task])
        await self.drain()
        if self._held:
            log.error("%d events admitted in fail_open mode are lost: the store never came back", len(self._held))
