"""Which store the gateway runs on, and how it is reached: one Redis, a Cluster, the primary Sentinels
name, or the embedded one. Nothing above ``store/`` knows which.

Every client fails fast: a request must answer 503 when Redis is gone, not stall in
redis-py's retries with backoff, so they are off (the cluster client keeps one immediate
retry for commands other than scripts, see ``client.Store.run``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from .client import Store

log = logging.getLogger(__name__)

SOCKET_MARGIN = 0.4  # seconds a socket read may take beyond NOTIFIER_REDIS_TIMEOUT


def connect(
    url: str | None,
    cluster: bool = False,
    timeout: float = 1.0,
    min_replicas: int = 0,
    sentinels: tuple[str, ...] = (),
    sentinel_master: str = "notifier",
) -> Store:
    """A store at ``url`` (None: the embedded one), or the primary ``sentinels`` name, with short
    timeouts and no retry stalls.

    A request must fail fast when Redis is gone (the caller answers 503), so
    redis-py's own retry-with-backoff is turned off.
    """
    options: dict[str, Any] = dict(
        socket_timeout=timeout + SOCKET_MARGIN,
        socket_connect_timeout=timeout,
        health_check_interval=0,
        **without_maintenance(),
    )
    if sentinels:
        return Store(_sentinel_client(url, sentinels, sentinel_master, options), False, timeout, min_replicas)
    if not url:
        return Store(_embedded(), embedded=True)
    if cluster:
        # One immediate retry, after the client re-read the slot map, rides out a failover
        # or a moved slot; the default (three, with backoff) would stall requests for seconds.
        # Scripts never ride it (they go to a client of their node, see Store.run): it sends
        # a command again after a connection error, when the first may have run.
        client = RedisCluster.from_url(url, retry=Retry(NoBackoff(), 1), **options)
        return Store(client, False, timeout, min_replicas, **{**_node_options(url), **options})
    return Store(redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options), False, timeout, min_replicas)


def _node_options(url: str) -> dict[str, Any]:
    """What a client of one cluster node takes from the cluster's URL besides the address: credentials, TLS."""
    parsed = parse_url(url)
    options = {k: v for k, v in parsed.items() if k not in ("host", "port", "db", "connection_class")}
    return {**options, "ssl": True} if url.startswith("rediss://") else options


def _sentinel_client(url: str | None, sentinels: tuple[str, ...], master: str, options: dict[str, Any]) -> Any:
    """A client of the primary the Sentinels name, asked again on each new connection.

    ``url``, when set, gives the primary's password, database and TLS; its host is ignored.
    """
    extra: dict[str, Any] = {}
    if url:
        parsed = parse_url(url)
        extra = {k: v for k, v in parsed.items() if k in ("username", "password", "db")}
    addresses = [(host, int(port)) for host, _, port in (s.rpartition(":") for s in sentinels)]
    manager = Sentinel(addresses, sentinel_kwargs=dict(options), **options, **extra)  # type: ignore[no-untyped-call]
    return manager.master_for(master, retry=Retry(NoBackoff(), 0), **options, **extra)


def _embedded() -> Any:
    import fakeredis  # only the embedded mode needs it

    log.warning(
        "NOTIFIER_REDIS_URL is not set: using the embedded in-process store. "
        "Limits hold for this one replica only; set NOTIFIER_REDIS_URL to share them."
    )
    return fakeredis.FakeAsyncRedis()


def without_maintenance() -> dict[str, Any]:
    """Client options that turn redis-py's maintenance notifications off, where its asyncio client has them.

    redis-py 8.1's asyncio pool skips its check of a pooled connection while they are
    on, as they are by default over RESP3 (redis/redis-py#4260): a connection the
    server closed (a restart, a failover) is handed out, and the first command on it
    is written, then fails. The circuit opens for nothing, and the failure looks like
    a lost reply. The notifications serve Redis Enterprise's planned maintenance.
    """
    if importlib.util.find_spec("redis.asyncio.maint_notifications") is None:  # before 8.1: no such check skipped
        return {}
    config = importlib.import_module("redis.maint_notifications").MaintNotificationsConfig
    return {"maint_notifications_config": config(enabled=False)}
