"""Connecting to the store, and the one place a Redis error becomes a domain error.

Every call the gateway makes to the store goes through :meth:`Store.call` (or
:meth:`Store.run` for a script), which turns redis-py's errors, and socket
errors, into :class:`StoreUnavailable`.

A store that does not answer (a timeout, a refused or broken connection) opens
a circuit: from then on every call fails at once, without waiting, while a
probe keeps a ``PING`` outstanding; the moment it is answered the circuit
closes. So a hung Redis costs one timeout, not one per request, and the first
request after it answers again goes through.

The store also keeps its clock's offset from this process's monotonic clock
(``TIME``, the sample with the shortest round trip): admission calls carry a
deadline in the store's clock, after which the script does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterDownError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ..errors import StoreUnavailable

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# Failures that mean the store is not answering, as opposed to an answer that is an error.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ClusterDownError, OSError, asyncio.TimeoutError)
PROBE_PAUSE = 0.05  # seconds between two probes of a store that failed the last one
SOCKET_MARGIN = 0.4  # seconds a socket read may take beyond NOTIFIER_REDIS_TIMEOUT
CLOCK_RESAMPLE = 30.0  # seconds after which a clock sample is replaced even by a slower one
CLOCK_JUMP_US = 500_000  # a sample further than this (plus its round trip) from the last: the store's clock was set


def as_text(value: object) -> str:
    """A reply value as text: redis-py answers bytes unless told to decode."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Store:
    """One deployment's store: a redis-py client (or the embedded one), its circuit, its clock."""

    def __init__(self, client: Any, embedded: bool = False, timeout: float = 1.0) -> None:
        self.redis: Any = client  # redis.asyncio.Redis, RedisCluster or the embedded FakeAsyncRedis
        self.embedded = embedded
        self.timeout = timeout  # NOTIFIER_REDIS_TIMEOUT, seconds
        self.failures = 0  # calls that failed, for notifier_store_errors_total
        self._probe: asyncio.Task[None] | None = None
        self._offset_us: float | None = None  # store clock minus time.monotonic(), in us
        self._offset_rtt, self._offset_at = float("inf"), 0.0

    @property
    def answering(self) -> bool:
        """False while the circuit is open: calls fail at once until a probe is answered."""
        return self._probe is None

    async def call(self, command: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await command(*args, **kwargs)``, any store failure raised as :class:`StoreUnavailable`."""
        if self._probe is not None:
            self.failures += 1
            raise StoreUnavailable("the store did not answer; waiting for it to answer again")
        try:
            return await command(*args, **kwargs)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            self.failures += 1
            if isinstance(exc, UNREACHABLE):
                self._open_circuit(exc)
            raise StoreUnavailable(str(exc) or type(exc).__name__) from exc

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any], timeout: float | None = None) -> Any:
        """Run a Lua script (EVALSHA, loaded again on NOSCRIPT), waiting at most ``timeout`` seconds."""
        if timeout is None:
            return await self.call(script, keys=keys, args=args)
        return await self.call(_within, max(timeout, 0.001), script, keys, args)

    def _open_circuit(self, exc: BaseException) -> None:
        if self._probe is None:
            log.warning(
                "the store did not answer (%s): failing fast until it answers a probe", str(exc) or type(exc).__name__
            )
            self._probe = asyncio.get_running_loop().create_task(self._until_answered())

    async def _until_answered(self) -> None:
        """Keep one PING outstanding until the store answers one, then close the circuit."""
        while True:
            try:
                await asyncio.wait_for(self.redis.ping(), self.timeout)
            except (RedisError, OSError, asyncio.TimeoutError):
                await asyncio.sleep(PROBE_PAUSE)
                continue
            log.warning("the store answers again")
            self._probe = None
            return

    async def server_time_us(self, key: str) -> int:
        """Redis ``TIME`` in microseconds, of the node holding ``key``.

        The scripts read the clock of the node that owns the deployment's slot; on a
        cluster a bare ``TIME`` would go to any node, with a clock of its own.
        """
        if isinstance(self.redis, RedisCluster):
            await self.call(self.redis.initialize)  # no-op once the slot map is known
            seconds, micros = await self.call(self.redis.time, target_nodes=self.redis.get_node_from_key(key))
        else:
            seconds, micros = await self.call(self.redis.time)
        return int(seconds) * 1_000_000 + int(micros)

    async def sync_clock(self, key: str) -> None:
        """Sample the store's clock; keep the sample with the shortest round trip (the most exact)."""
        sent = time.monotonic()
        now_us = await self.server_time_us(key)
        answered = time.monotonic()
        rtt = answered - sent
        offset_us = now_us - (sent + answered) / 2 * 1e6
        jumped = self._offset_us is not None and abs(offset_us - self._offset_us) > CLOCK_JUMP_US + rtt * 1e6
        if jumped or rtt <= self._offset_rtt or answered - self._offset_at > CLOCK_RESAMPLE:
            self._offset_us = now_us - (sent + answered) / 2 * 1e6
            self._offset_rtt, self._offset_at = rtt, answered

    @property
    def clock_known(self) -> bool:
        return self._offset_us is not None

    def store_time_us(self, monotonic: float) -> int:
        """The store's clock at ``monotonic`` (a ``time.monotonic()`` value), as last sampled."""
        if self._offset_us is None:
            raise RuntimeError("the store's clock was never sampled")
        return int(monotonic * 1e6 + self._offset_us)

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        await self.redis.aclose()


async def _within(timeout: float, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
    return await asyncio.wait_for(script(keys=keys, args=args), timeout)


def connect(url: str | None, cluster: bool = False, timeout: float = 1.0) -> Store:
    """A store at ``url`` (None: the embedded one), with short timeouts and no retry stalls.

    A request must fail fast when Redis is gone (the caller answers 503), so
    redis-py's own retry-with-backoff is turned off.
    """
    if not url:
        return Store(_embedded(), embedded=True)
    options: dict[str, Any] = dict(
        socket_timeout=timeout + SOCKET_MARGIN, socket_connect_timeout=timeout, health_check_interval=0
    )
    if cluster:
        # One immediate retry, after the client re-read the slot map, rides out a failover
        # or a moved slot; the default (three, with backoff) would stall requests for seconds.
        return Store(RedisCluster.from_url(url, retry=Retry(NoBackoff(), 1), **options), timeout=timeout)
    return Store(redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options), timeout=timeout)


def _embedded() -> Any:
    import fakeredis  # only the embedded mode needs it

    log.warning(
        "NOTIFIER_REDIS_URL is not set: using the embedded in-process store. "
        "Limits hold for this one replica only; set NOTIFIER_REDIS_URL to share them."
    )
    return fakeredis.FakeAsyncRedis()
