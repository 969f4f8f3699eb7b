"""Connecting to the store, and the one place a Redis error becomes a domain error.

Every call the gateway makes to the store goes through :meth:`Store.call` (or
:meth:`Store.run` for a script), which turns redis-py's errors, and socket
errors, into :class:`StoreUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError
from redis.retry import Retry

from ..errors import StoreUnavailable

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def as_text(value: object) -> str:
    """A reply value as text: redis-py answers bytes unless told to decode."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Store:
    """One deployment's store: a redis-py client (or the embedded one) and what it answers."""

    def __init__(self, client: Any, embedded: bool = False) -> None:
        self.redis: Any = client  # redis.asyncio.Redis, RedisCluster or the embedded FakeAsyncRedis
        self.embedded = embedded
        self.failures = 0  # calls that failed, for notifier_store_errors_total

    async def call(self, command: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await command(*args, **kwargs)``, any store failure raised as :class:`StoreUnavailable`."""
        try:
            return await command(*args, **kwargs)
        except (RedisError, OSError) as exc:
            self.failures += 1
            raise StoreUnavailable(str(exc) or type(exc).__name__) from exc

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        """Run a Lua script (EVALSHA, loaded again on NOSCRIPT)."""
        return await self.call(script, keys=keys, args=args)

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

    async def close(self) -> None:
        await self.redis.aclose()


def connect(url: str | None, cluster: bool = False, timeout: float = 1.0) -> Store:
    """A store at ``url`` (None: the embedded one), with short timeouts and no retry stalls.

    A request must fail fast when Redis is gone (the caller answers 503), so
    redis-py's own retry-with-backoff is turned off.
    """
    if not url:
        return Store(_embedded(), embedded=True)
    options: dict[str, Any] = dict(socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=0)
    if cluster:
        # One immediate retry, after the client re-read the slot map, rides out a failover
        # or a moved slot; the default (three, with backoff) would stall requests for seconds.
        return Store(RedisCluster.from_url(url, retry=Retry(NoBackoff(), 1), **options))
    return Store(redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options))


def _embedded() -> Any:
    import fakeredis  # only the embedded mode needs it

    log.warning(
        "NOTIFIER_REDIS_URL is not set: using the embedded in-process store. "
        "Limits hold for this one replica only; set NOTIFIER_REDIS_URL to share them."
    )
    return fakeredis.FakeAsyncRedis()
