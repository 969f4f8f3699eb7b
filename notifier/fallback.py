"""``NOTIFIER_ON_STORE_ERROR=fail_open``: admission by a local limiter while the store is down.

With ``fail_closed`` (the default) a store error is a 503 and nothing else
happens. With ``fail_open`` each replica decides on its own, against the
configured rules with every count divided by ``NOTIFIER_REPLICAS`` (rounded
up, at least 1), so the fleet together stays near the configured limits.

An event admitted this way cannot be queued in the outbox, which lives in the
store. It is held in a bounded in-memory queue and, as soon as the store
answers again, appended to the outbox, written into the global and category
sliding logs at the time it was admitted (so the fleet's windows count it) and
counted in ``/v1/stats``, then delivered as usual. A refusal is handed to the
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

from prometheus_client import Counter
from redis.exceptions import RedisError

from .limiter import Decision, Limiter, event_payload, retry_seconds
from .models import Event
from .rules import Rule
from .settings import Settings
from .store import Keys, StoreUnavailable
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_HELD = 10_000  # admitted events kept in memory while the store is down
DRAIN_INTERVAL = 0.5  # seconds between attempts to hand held events to the store


def scaled(rules: tuple[Rule, ...], replicas: int) -> list[tuple[int, float, str]]:
    """Each rule as (count per replica, window in seconds, text), count = ceil(count / replicas) >= 1
    (0 stays 0: a muted level stays muted)."""
    out = []
    for rule in rules:
        count = max(1, math.ceil(rule.count / replicas)) if rule.count else 0
        seconds = rule.window_ms / 1000
        out.append((count, seconds, f"{count}/{rule.text.split('/', 1)[1]}"))
    return out


class LocalWindow:
    """One level's sliding log in this process: admission times, oldest first."""

    def __init__(self, rules: list[tuple[int, float, str]]) -> None:
        self.rules = rules
        self.longest = max(seconds for _, seconds, _ in rules)
        self.times: deque[float] = deque()

    def wait(self, now: float) -> tuple[float, str]:
        """Seconds until every rule has room (0 = room now), and the rule that waits longest."""
        while self.times and self.times[0] <= now - self.longest:
            self.times.popleft()
        worst, worst_rule = 0.0, ""
        ordered = list(self.times)
        for count, seconds, text in self.rules:
            start = bisect.bisect_right(ordered, now - seconds)
            used = len(ordered) - start
            if used >= count:
                free_at = (ordered[len(ordered) - count] if count else now) + seconds
                if free_at - now > worst:
                    worst, worst_rule = free_at - now, text
        return worst, worst_rule

    def add(self, now: float) -> None:
        self.times.append(now)


class Fallback:
    """The fail_open limiter and the queue of events it admitted."""

    def __init__(self, settings: Settings, client, keys: Keys, registry, limiter: Limiter) -> None:
        self._settings, self._client, self._keys, self._limiter = settings, client, keys, limiter
        self._replicas = settings.replicas
        self._global = LocalWindow(scaled(settings.global_limit, self._replicas))
        self._categories: dict[str, LocalWindow] = {}
        self._held: deque[tuple[str, dict, int]] = deque()  # (category, outbox fields, admitted at, us)
        self._task: asyncio.Task | None = None
        self.decisions = Counter("notifier_fail_open", "Events decided locally while the store was "
                                 "unreachable (NOTIFIER_ON_STORE_ERROR=fail_open), by outcome",
                                 ["category", "outcome"], registry=registry)

    @property
    def held(self) -> int:
        """Admitted events not yet handed to the store."""
        return len(self._held)

    def admit(self, event: Event) -> Decision:
        """Decide ``event`` locally; raises :class:`StoreUnavailable` when the queue is full."""
        if len(self._held) >= MAX_HELD:
            raise StoreUnavailable("store unreachable and the fail_open queue is full")
        now = time.monotonic()
        category = self._categories.get(event.category)
        if category is None:
            rules = scaled(self._settings.rules_for(event.category), self._replicas)
            category = self._categories[event.category] = LocalWindow(rules)
        event_id = uuid.uuid4().hex
        global_wait, global_rule = self._global.wait(now)
        category_wait, category_rule = category.wait(now)
        if global_wait or category_wait:
            level, wait, rule = (("category", category_wait, category_rule) if category_wait > global_wait
                                 else ("global", global_wait, global_rule))
            self.decisions.labels(event.category, f"dropped_{level}").inc()
            self._limiter.count_refusal(event.category, level)
            return Decision("dropped", event_id, level, rule, retry_seconds(wait))
        self._global.add(now)
        category.add(now)
        channel = self._settings.channel_for(event.category)
        self._held.append((event.category, {"id": event_id, "category": event.category,
                                            "channel": channel, "payload": event_payload(event_id, event)},
                           int(time.time() * 1e6)))
        self.decisions.labels(event.category, "accepted").inc()
        self._wake()
        return Decision("accepted", event_id)

    def _wake(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain_loop())

    async def _drain_loop(self) -> None:
        while self._held:
            await asyncio.sleep(DRAIN_INTERVAL)
            await self.drain()

    async def drain(self) -> int:
        """Append held events to the outbox and the shared counters; returns how many went."""
        moved = 0
        while self._held:
            try:
                await self._append(*self._held[0])
            except (RedisError, OSError) as exc:
                log.debug("store still unavailable, %d events held: %s", len(self._held), exc)
                break
            self._held.popleft()
            moved += 1
        if moved:
            log.warning("handed %d events admitted in fail_open mode to the store", moved)
        return moved

    async def _append(self, category: str, fields: dict, admitted_us: int) -> None:
        # One transaction per event, so an event is queued, logged and counted together or not at all.
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xadd(self._keys.outbox, fields)
            for log, rules in ((self._keys.global_log, self._settings.global_limit),
                               (self._keys.category_log(category), self._settings.rules_for(category))):
                # The replica's clock, not Redis's: the only record of when it admitted the event.
                pipe.zadd(log, {fields["id"]: admitted_us})
                pipe.pexpire(log, max(rule.window_ms for rule in rules))
            pipe.hincrby(self._keys.stats, "accepted", 1)
            pipe.hincrby(self._keys.stats, f"accepted:{category}", 1)
            pipe.sadd(self._keys.categories, category)
            await pipe.execute()

    async def close(self) -> None:
        """Stop the drain loop after a last attempt; report what could not be handed over."""
        if self._task:
            await cancel_and_wait([self._task])
        await self.drain()
        if self._held:
            log.error("%d events admitted in fail_open mode are lost: the store never came back",
                      len(self._held))


def make_fallback(settings: Settings, client, keys: Keys, registry, limiter: Limiter) -> Fallback | None:
    """The fail_open fallback, or None with ``fail_closed``."""
    if settings.on_store_error != "fail_open":
        return None
    return Fallback(settings, client, keys, registry, limiter)
