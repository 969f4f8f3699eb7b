"""Connecting to the store, and the one place a Redis error becomes a domain error.

Every call the gateway makes to the store goes through :meth:`Store.call` (or
:meth:`Store.run` for a script), which turns redis-py's errors, and socket
errors, into :class:`StoreUnavailable`.

A script is sent once, and a failure says whether it may have run. Its
connection is made first, so a store that cannot be reached fails before
anything is sent (``StoreUnavailable``: it did not run); once it is sent, a
timeout or a broken connection raises :class:`ReplyLost` (it may have run),
unless the store answered with a refusal that comes before any write
(``READONLY``, ``NOREPLICAS``, ``NOSCRIPT``, ``LOADING``, ``MOVED`` ...). No
client retries a script: on Redis Cluster it goes to a client of its slot's
node alone, since redis-py's cluster client sends a command again on another
connection after a connection error, and one admission would then run twice.

Which store and how it is reached (one node, Cluster, Sentinel, the embedded one)
is ``topology.connect``'s.

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
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import (
    AskError,
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ..errors import ReplyLost, StoreFull, StoreUnavailable
from .replication import Written, script_then_wait, supports_waitaof, then_wait, wait_command

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# Failures that mean the store is not answering, as opposed to an answer that is an error.
# RedisClusterException is not a RedisError: the cluster client raises it when no node answers.
UNREACHABLE = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    RedisClusterException,
    OSError,
    asyncio.TimeoutError,
)
FAILURES = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError)  # every failure of a call
_REDIS_PY = os.path.join(os.path.dirname(os.path.dirname(redis.__file__)), "")  # redis-py: its frames in a traceback
# Answers of a store that did not run the command: it refused it before any write.
REFUSALS = (
    NoScriptError,
    ReadOnlyError,
    OutOfMemoryError,
    MasterDownError,
    BusyLoadingError,
    MovedError,
    AskError,
    TryAgainError,
    ClusterDownError,
    AuthenticationError,
)
REFUSAL_CODES = ("NOREPLICAS", "BUSY")  # the rest have no class of their own in redis-py
PROBE_PAUSE = 0.05  # seconds between two probes of a store that failed the last one
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
        except Exception as exc:
            torn = _connection_torn(exc)
            if not torn and not isinstance(exc, FAILURES):
                raise
            self.failures += 1
            if isinstance(exc, OutOfMemoryError):  # over maxmemory: it answers, and refuses writes
                raise StoreFull(f"store full: {exc}") from exc
            if torn or isinstance(exc, UNREACHABLE):
                self._open_circuit(exc)
                raise StoreUnavailable(self.last_error) from exc
            raise StoreUnavailable(_reason(exc)) from exc

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any], timeout: float | None = None) -> Any:
        """Run a Lua script (EVALSHA, loaded again on NOSCRIPT) once, waiting at most ``timeout`` seconds.

        Raises :class:`ReplyLost` when it was sent and no reply came (it may have run),
        :class:`StoreUnavailable` when it certainly did not run.
        """
        return await self._once(timeout, keys[0], _evalsha, script, keys, args)

    async def run_replicated(
        self, script: AsyncScript, keys: list[str], args: list[Any], marker: str, timeout: float, wait: float
    ) -> Written:
        """Run a script, then wait at most ``wait`` seconds for ``min_replicas`` to hold its writes.

        One pipeline on the connection to the node of ``keys[0]`` (see ``replication``);
        the whole call takes at most ``timeout`` seconds. Failures as for :meth:`run`.
        """
        return await self._once(timeout, keys[0], self._waited, wait, script_then_wait, script, keys, args, marker)

    async def call_replicated(self, commands: list[tuple[Any, ...]], marker: str, wait: float) -> Written:
        """Raw ``commands``, then wait at most ``wait`` seconds for ``min_replicas`` to hold them."""
        return await self._once(None, marker, self._waited, wait, then_wait, commands, marker)

    async def _once(self, timeout: float | None, key: str, how: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``how(client, *args)`` with the client of the node that owns ``key``, sent once, within ``timeout``.

        A failure after it was sent, unless the store refused it, raises :class:`ReplyLost`.
        """
        sending = Sending()
        try:
            return await self.call(self._within, timeout, sending, key, how, *args)
        except StoreUnavailable as exc:
            cause = exc.__cause__
            if not sending.sent or cause is None or refused(cause):  # the circuit was open, or it was refused
                raise
            raise ReplyLost(str(exc)) from cause

    async def _within(
        self, timeout: float | None, sending: Sending, key: str, how: Callable[..., Awaitable[T]], *args: Any
    ) -> T:
        limit = None if timeout is None else max(timeout, 0.001)
        return await asyncio.wait_for(self._send(sending, key, how, *args), limit)

    async def _send(self, sending: Sending, key: str, how: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Make a connection to the node first (a failure then sent nothing), then send."""
        client = await self._client_of(key)
        if not self.embedded:
            pool = client.connection_pool
            await pool.release(await pool.get_connection())
        if self.min_replicas and self._waitaof is None:
            self._waitaof = await supports_waitaof(client)
        sending.sent = True
        try:
            return await how(client, *args)
        except RedisError:
            if isinstance(self.redis, RedisCluster):  # a moved slot or a dead node: read the slot map again
                with contextlib.suppress(*FAILURES):  # the error to raise is the call's
                    await self.redis.nodes_manager.initialize()
            raise

    async def _waited(self, client: Any, wait: float, how: Any, *args: Any) -> Written:
        command = wait_command(self.min_replicas, int(wait * 1000), bool(self._waitaof))
        started = time.perf_counter()
        written: Written = await how(client, *args, command)
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
        """Keep one PING outstanding until the store answers one, then close the circuit.

        Whatever a PING raises, the store did not answer it: a probe that stopped would leave the
        circuit open for good (redis-py's cluster client has raised uvloop's RuntimeError of a closed
        transport, after it closed its connections on CLUSTERDOWN while the PING was being written).
        """
        while True:
            try:
                await asyncio.wait_for(self.redis.ping(), self.timeout)
            except Exception as exc:  # whatever it was: see above
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


@dataclass
class Sending:
    """Whether a call went to the store: set once its connection was made, just before it is sent."""

    sent: bool = False


def _connection_torn(exc: BaseException) -> bool:
    """An AttributeError or RuntimeError raised inside redis-py: a connection closed under a command.

    redis-py's cluster client closes every connection when a node answers ``CLUSTERDOWN`` (to read
    the slot map again), also those that other commands are writing on at that moment; these then
    fail with ``'NoneType' object has no attribute 'writelines'`` or uvloop's "the handler is closed".
    Such an error elsewhere is a bug of the gateway's, and is raised as it is.
    """
    if not isinstance(exc, (AttributeError, RuntimeError)):
        return False
    frames = exc.__traceback__
    while frames is not None:
        if frames.tb_frame.f_code.co_filename.startswith(_REDIS_PY):
            return True
        frames = frames.tb_next
    return False


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


async def _evalsha(client: Any, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
    return await script(keys=keys, args=args, client=client)


def refused(error: BaseException) -> bool:
    """True when ``error`` is the store's answer that it did not run a command (before any write).

    A script's own error (``ERR user_script:...``, a ``WRONGTYPE`` from one of its
    commands) is not: the writes it made before are kept. Sentinel's client raises a
    connection error for ``READONLY`` (a demoted primary): its context tells.
    """
    if isinstance(error, REFUSALS) or isinstance(error.__context__, ReadOnlyError):
        return True
    return isinstance(error, ResponseError) and str(error).split(" ", 1)[0] in REFUSAL_CODES
