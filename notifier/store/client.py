"""Connecting to the store, and the one place a Redis error becomes a domain error.

Every call the gateway makes to the store goes through :meth:`Store.call` (or
:meth:`Store.run` for a script), which turns redis-py's errors, and socket
errors, into :class:`StoreUnavailable`.

A store that does not answer (a timeout, a refused or broken connection) opens
a circuit: from then on every call fails at once, without waiting, while a
probe keeps a ``PING`` outstanding; the moment it is answered the circuit
closes. So a hung Redis costs one timeout, not one per request, and the first
request after it answers again goes through. While it is open, every failure
names the last reason the store gave (a refused connection, a TLS certificate
it does not trust, ...), so ``/readyz`` says why for as long as it lasts.

With ``min_replicas`` (``NOTIFIER_REDIS_MIN_REPLICAS``), :meth:`Store.run_replicated`
and :meth:`Store.call_replicated` also say how many replicas acknowledged the
write (see ``replication``). With Sentinels, the client asks them for the
primary on each new connection and drops connections to a demoted one; the
store counts the primaries it saw change (``failovers``).

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
from redis.asyncio.connection import parse_url
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterDownError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ..errors import StoreUnavailable
from .replication import Written, script_then_wait, supports_waitaof, then_wait, wait_command

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

    def __init__(
        self, client: Any, embedded: bool = False, timeout: float = 1.0, min_replicas: int = 0, **options: Any
    ) -> None:
        self.redis: Any = client  # redis.asyncio.Redis, RedisCluster or the embedded FakeAsyncRedis
        self.embedded = embedded
        self.timeout = timeout  # NOTIFIER_REDIS_TIMEOUT, seconds
        self.min_replicas = min_replicas  # NOTIFIER_REDIS_MIN_REPLICAS
        self.failures = 0  # calls that failed, for notifier_store_errors_total
        self.failovers = 0  # times the primary changed, for notifier_store_failovers_total
        self.on_wait: Callable[[float], None] = lambda seconds: None  # each replication wait's duration
        self._options = options  # for connections to one cluster node
        self._nodes: dict[str, Any] = {}  # cluster node name -> a client of that node alone
        self._waitaof: bool | None = None  # detected once
        self._primary: Any = None  # the address the Sentinels named last
        self._probe: asyncio.Task[None] | None = None
        self.last_error = ""  # why the store last failed to answer, while the circuit is open
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
            raise StoreUnavailable(f"the store did not answer ({self.last_error}); waiting for it to answer again")
        try:
            return await command(*args, **kwargs)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            self.failures += 1
            if isinstance(exc, UNREACHABLE):
                self._open_circuit(exc)
                raise StoreUnavailable(self.last_error) from exc
            raise StoreUnavailable(_reason(exc)) from exc

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any], timeout: float | None = None) -> Any:
        """Run a Lua script (EVALSHA, loaded again on NOSCRIPT), waiting at most ``timeout`` seconds."""
        if timeout is None:
            return await self.call(script, keys=keys, args=args)
        return await self.call(_within, max(timeout, 0.001), script, keys, args)

    async def run_replicated(
        self, script: AsyncScript, keys: list[str], args: list[Any], marker: str, timeout: float, wait: float
    ) -> Written:
        """Run a script, then wait at most ``wait`` seconds for ``min_replicas`` to hold its writes.

        One pipeline on the connection to the node of ``keys[0]`` (see ``replication``);
        the whole call takes at most ``timeout`` seconds.
        """
        timeout = max(timeout, 0.001)
        return await self.call(self._waited, timeout, keys[0], wait, script_then_wait, script, keys, args, marker)

    async def call_replicated(self, commands: list[tuple[Any, ...]], marker: str, wait: float) -> Written:
        """Raw ``commands``, then wait at most ``wait`` seconds for ``min_replicas`` to hold them."""
        return await self.call(self._waited, None, marker, wait, then_wait, commands, marker)

    async def _waited(self, timeout: float | None, key: str, wait: float, how: Any, *args: Any) -> Written:
        client = await self._client_of(key)
        if self._waitaof is None:
            self._waitaof = await supports_waitaof(client)
        command = wait_command(self.min_replicas, int(wait * 1000), self._waitaof)
        started = time.perf_counter()
        try:
            written: Written = await asyncio.wait_for(how(client, *args, command), timeout)
        except RedisError:
            if isinstance(self.redis, RedisCluster):  # a moved slot or a dead node: read the slot map again
                await self.redis.nodes_manager.initialize()
            raise
        self.on_wait(time.perf_counter() - started)
        return written

    async def _client_of(self, key: str) -> Any:
        """The client whose connection reaches the node that owns ``key``.

        A cluster client sends keyless commands (``WAIT``) to a default node, so the
        pipeline goes to a client of the slot's primary alone.
        """
        if not isinstance(self.redis, RedisCluster):
            return self.redis
        await self.redis.initialize()  # no-op once the slot map is known
        node = self.redis.get_node_from_key(key)
        if node is None:
            raise ClusterDownError(f"no node serves the slot of {key}")
        client = self._nodes.get(node.name)
        if client is None:
            options = dict(self._options, host=node.host, port=node.port, retry=Retry(NoBackoff(), 0))
            client = self._nodes[node.name] = redis.Redis(**options)
        return client

    def _open_circuit(self, exc: BaseException) -> None:
        if self._primary is None:  # the primary that stopped answering, to see whether it changes
            self._primary = self._named_primary()
        self.last_error = _reason(exc, self.last_error if self._probe is not None else "")
        if self._probe is None:
            log.warning("the store did not answer (%s): failing fast until it answers a probe", self.last_error)
            self._probe = asyncio.get_running_loop().create_task(self._until_answered())

    async def _until_answered(self) -> None:
        """Keep one PING outstanding until the store answers one, then close the circuit."""
        while True:
            try:
                await asyncio.wait_for(self.redis.ping(), self.timeout)
            except (RedisError, OSError, asyncio.TimeoutError) as exc:
                self.last_error = _reason(exc, self.last_error)
                await asyncio.sleep(PROBE_PAUSE)
                continue
            log.warning("the store answers again")
            self._note_primary()
            self._probe = None
            return

    def _named_primary(self) -> Any:
        """The (host, port) the Sentinels named when a connection was last made; None without Sentinels."""
        return getattr(getattr(self.redis, "connection_pool", None), "master_address", None)

    def _note_primary(self) -> None:
        """Count a failover when the Sentinels now name another primary than before."""
        primary = self._named_primary()
        if primary is None:
            return
        if self._primary is not None and primary != self._primary:
            self.failovers += 1
            log.warning("the Sentinels name a new primary: %s:%s", *primary)
        self._primary = primary

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
        for client in self._nodes.values():
            await client.aclose()
        await self.redis.aclose()


def _reason(exc: BaseException, before: str = "") -> str:
    """What a failure says, for a person: its text, else its kind (a timeout has no text).

    A reset that follows a TLS error of the same outage keeps that error: in TLS 1.3 a server
    refuses a client certificate after the client's handshake has ended, and the client then
    reads either the server's alert or, as often, only the reset that follows it.
    """
    text = str(exc) or type(exc).__name__
    if "SSL" in before and isinstance(exc, (RedisConnectionError, OSError)) and "reset by peer" in text.lower():
        return before
    return text


async def _within(timeout: float, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
    return await asyncio.wait_for(script(keys=keys, args=args), timeout)


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
        socket_timeout=timeout + SOCKET_MARGIN, socket_connect_timeout=timeout, health_check_interval=0
    )
    if sentinels:
        return Store(_sentinel_client(url, sentinels, sentinel_master, options), False, timeout, min_replicas)
    if not url:
        return Store(_embedded(), embedded=True)
    if cluster:
        # One immediate retry, after the client re-read the slot map, rides out a failover
        # or a moved slot; the default (three, with backoff) would stall requests for seconds.
        client = RedisCluster.from_url(url, retry=Retry(NoBackoff(), 1), **options)
        return Store(client, False, timeout, min_replicas, **options)
    return Store(redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options), False, timeout, min_replicas)


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
