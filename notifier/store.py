"""The shared store: Redis (single node or Cluster), or an embedded in-process stand-in.

Every key of one deployment carries the same hash tag, ``{<prefix>}``, so each
Lua call touches a single Redis Cluster slot.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError
from redis.retry import Retry

from .settings import Settings

log = logging.getLogger(__name__)

SCRIPTS = ("admit", "pace", "settle", "digest", "limits", "requeue")


def as_text(value: object) -> str:
    """A reply value as text: redis-py answers bytes unless told to decode."""
    return value.decode() if isinstance(value, bytes) else str(value)


class StoreUnavailable(Exception):
    """The store did not answer; the request changed nothing and may be retried."""


def script_dir() -> Path:
    """Where the Lua scripts live: inside the installed package, else the source tree."""
    installed = Path(__file__).with_name("lua")
    return installed if installed.is_dir() else Path(__file__).resolve().parent.parent / "lua"


class Keys:
    """Names of every key of one deployment, all in the slot of ``{prefix}``."""

    def __init__(self, prefix: str) -> None:
        self.base = f"{prefix}:{{{prefix}}}:"
        self.global_log = self.base + "log:global"
        self.outbox = self.base + "outbox"
        self.dead = self.base + "dead"
        self.stats = self.base + "stats"
        self.categories = self.base + "categories"
        self.digest_due = self.base + "digest:due"
        self.attempts = self.base + "attempts"
        self.cooldown_all = self.base + "cooldown:*"

    def category_log(self, category: str) -> str:
        return f"{self.base}log:cat:{category}"

    def dedup(self, category: str, dedup_key: str) -> str:
        digest = hashlib.sha256(dedup_key.encode()).hexdigest()[:32]
        return f"{self.base}dedup:{category}:{digest}"

    def suppressed(self, channel: str) -> str:
        return f"{self.base}digest:sup:{channel}"

    def pace(self, channel: str) -> str:
        return f"{self.base}pace:{channel}"

    def cooldown(self, channel: str) -> str:
        return f"{self.base}cooldown:{channel}"


def connect(settings: Settings) -> redis.Redis:
    """A client for the configured store, with short timeouts and no retry stalls.

    A request must fail fast when Redis is gone (the caller answers 503), so
    redis-py's own retry-with-backoff is turned off.
    """
    if not settings.redis_url:
        return _embedded()
    timeout = settings.redis_timeout / 1000
    options = dict(socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=0)
    if settings.redis_cluster:
        # One immediate retry, after the client re-read the slot map, rides out a failover
        # or a moved slot; the default (three, with backoff) would stall requests for seconds.
        return RedisCluster.from_url(settings.redis_url, retry=Retry(NoBackoff(), 1), **options)
    return redis.Redis.from_url(settings.redis_url, retry=Retry(NoBackoff(), 0), **options)


def _embedded() -> redis.Redis:
    import fakeredis

    log.warning(
        "NOTIFIER_REDIS_URL is not set: using the embedded in-process store. "
        "Limits hold for this one replica only; set NOTIFIER_REDIS_URL to share them."
    )
    return fakeredis.FakeAsyncRedis()


def is_embedded(client: redis.Redis) -> bool:
    """True for the in-process store, which cannot block on stream reads."""
    return type(client).__module__.startswith("fakeredis")


async def server_time(client: redis.Redis, key: str) -> tuple[int, int]:
    """Redis ``TIME`` (seconds, microseconds) of the node holding ``key``.

    The scripts read the clock of the node that owns the deployment's slot; on a
    cluster a bare ``TIME`` would go to any node, with a clock of its own.
    """
    if isinstance(client, RedisCluster):
        await client.initialize()  # no-op once the slot map is known
        return await client.time(target_nodes=client.get_node_from_key(key))
    return await client.time()


class Scripts:
    """The Lua scripts, read once and run through redis-py's EVALSHA/NOSCRIPT handling."""

    def __init__(self, client: redis.Redis) -> None:
        folder = script_dir()
        for name in SCRIPTS:
            setattr(self, name, client.register_script((folder / f"{name}.lua").read_text()))

    admit: AsyncScript
    pace: AsyncScript
    settle: AsyncScript
    digest: AsyncScript
    limits: AsyncScript
    requeue: AsyncScript


async def run(script: AsyncScript, keys: list[str], args: list) -> list:
    """Run a script, turning any store failure into :class:`StoreUnavailable`."""
    try:
        return await script(keys=keys, args=args)
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(str(exc) or type(exc).__name__) from exc
