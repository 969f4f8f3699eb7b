"""A failure after the admission was sent is a doubt (503 outcome unknown), one before it is not."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as redis_asyncio
from builders import build_limiter
from helpers import free_port
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ReadOnlyError, RedisClusterException, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifier.admission.admit import Admission
from notifier.admission.fallback import Fallback
from notifier.errors import OutcomeUnknown, ReplyLost, StoreUnavailable
from notifier.http import alertmanager
from notifier.http.app import create_app
from notifier.metrics import Metrics
from notifier.models import Event
from notifier.settings import load_settings
from notifier.store.client import Store, refused
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect


def _demoted() -> RedisConnectionError:
    """What Sentinel's client raises for READONLY: a connection error whose context is the refusal."""
    try:
        try:
            raise ReadOnlyError("You can't write against a read only replica.")
        except ReadOnlyError:
            raise RedisConnectionError("The previous master is now a slave") from None
    except RedisConnectionError as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "did_not_run"),
    [
        (NoScriptError("No matching script."), True),
        (ReadOnlyError("You can't write against a read only replica."), True),
        (_demoted(), True),
        (ResponseError("NOREPLICAS Not enough good replicas to write. script: 1a2b"), True),
        (ResponseError("ERR user_script:9: attempt to compare nil with number script: 1a2b"), False),
        (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value script: 1a2b"), False),
        (RedisConnectionError("Connection closed by server."), False),
        (RedisTimeoutError("Timeout reading from socket"), False),
        (asyncio.TimeoutError(), False),
    ],
)
def test_only_an_answer_that_refused_the_script_says_it_did_not_run(error, did_not_run):
    assert refused(error) is did_not_run


def failing(error: BaseException):
    """A command that fails with ``error`` once sent (its client: the embedded store's, never used)."""

    async def send(client: object) -> None:
        raise error

    return send


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (RedisConnectionError("Connection closed by server."), ReplyLost),
        (asyncio.TimeoutError(), ReplyLost),
        (ReadOnlyError("You can't write against a read only replica."), StoreUnavailable),
    ],
)
async def test_a_call_sent_and_not_answered_is_a_lost_reply(error, raised):
    store = Store(object(), embedded=True)
    with pytest.raises(StoreUnavailable) as caught:
        await store._once(1.0, "k", failing(error))
    assert type(caught.value) is raised


async def test_a_store_that_refuses_the_connection_was_sent_nothing():
    store = connect(f"redis://127.0.0.1:{free_port()}/0", timeout=0.3)
    with pytest.raises(StoreUnavailable) as caught:
        await store.run(Scripts(store.redis).admit, ["k"], [], 0.3)
    assert type(caught.value) is StoreUnavailable
    await store.close()


async def test_nothing_is_sent_while_the_circuit_is_open():
    store = Store(object(), embedded=True)
    store._probe = asyncio.get_running_loop().create_future()  # open, as after a timeout
    with pytest.raises(StoreUnavailable) as caught:
        await store._once(1.0, "k", failing(RedisConnectionError("never sent")))
    assert type(caught.value) is StoreUnavailable
    store._probe = None


async def test_a_lost_reply_is_outcome_unknown_and_never_decided_by_fail_open(monkeypatch):
    settings = load_settings(digest_interval=0, on_store_error="fail_open")
    limiter, store = build_limiter(settings, connect(None))
    metrics = Metrics()
    fallback = Fallback(settings, store, Scripts(store.redis), Keys(settings.key_prefix), metrics, limiter)
    admission = Admission(limiter, fallback, metrics.decisions)

    async def lost(*args, **kwargs):
        raise ReplyLost("Timeout reading from socket")

    monkeypatch.setattr(store, "run", lost)
    with pytest.raises(OutcomeUnknown) as caught:
        await admission.decide(Event(category="db", text="x"))
    assert len(caught.value.id) == 32 and fallback.held == 0

    async def unreachable(*args, **kwargs):
        raise StoreUnavailable("Connection refused")

    monkeypatch.setattr(store, "run", unreachable)  # certainly not run: fail_open decides
    assert (await admission.decide(Event(category="db", text="y"))).outcome.value == "accepted"
    assert fallback.held == 1
    await fallback.close()


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(create_app(load_settings(digest_interval=0)))


async def test_outcome_unknown_is_a_503_naming_the_event_and_counted(client, monkeypatch):
    async def in_doubt(self, *args):
        raise OutcomeUnknown("e1")

    monkeypatch.setattr(Admission, "decide_in_store", in_doubt)
    response = await client.post("/v1/events", json={"category": "db", "text": "x"})
    assert (response.status, await response.json()) == (503, {"error": "outcome unknown", "id": "e1"})
    assert response.headers["Retry-After"] == "2"
    metrics = await (await client.get("/metrics")).text()
    assert "notifier_outcome_unknown_total 1.0" in metrics


ALERTS = {"version": "4", "alerts": [{"labels": {"alertname": n}, "fingerprint": n} for n in ("a", "b")]}


@pytest.mark.parametrize(
    ("second", "error"),
    [
        (OutcomeUnknown("e2"), "outcome unknown"),
        (StoreUnavailable("Connection refused"), "outcome unknown"),  # the first was admitted
    ],
)
async def test_an_alertmanager_payload_says_what_became_of_each_alert(client, monkeypatch, second, error):
    decided = iter([None, second])

    async def decide(self, event, *args):
        failure = next(decided)
        if failure is None:
            return await original(self, event, *args)
        raise failure

    original = Admission.decide_on
    monkeypatch.setattr(Admission, "decide_on", decide)
    response = await client.post("/v1/alertmanager", json=ALERTS)
    body = await response.json()
    assert (response.status, body["error"], "Retry-After" in response.headers) == (503, error, True)
    assert [r["status"] for r in body["results"]] == ["accepted", second_status(second)]


def second_status(error: Exception) -> str:
    return "outcome unknown" if isinstance(error, OutcomeUnknown) else "unavailable"


def test_a_payload_is_a_plain_503_only_when_nothing_of_it_may_post():
    def of(*statuses: str) -> str:
        return alertmanager.payload_error([{"status": s} for s in statuses])

    assert of("unavailable", "dropped", "duplicate", "rejected") == "store unavailable, try again later"
    assert of("unavailable", "not replicated") == "not replicated"
    assert of("unavailable", "accepted") == of("resolved", "unavailable") == "outcome unknown"
    assert of("not replicated", "outcome unknown") == "outcome unknown"


async def test_a_cluster_no_node_of_which_answers_opens_the_circuit():
    """The cluster client raises RedisClusterException, which is not a RedisError, when no node answers."""
    store = connect(f"redis://127.0.0.1:{free_port()}/0", cluster=True, timeout=0.3)
    with pytest.raises(StoreUnavailable, match="cannot be connected"):
        await store.call(store.redis.get, "k")
    assert not store.answering
    await asyncio.sleep(0.3)  # the probe fails meanwhile, and keeps probing
    assert store._probe is not None and not store._probe.done()
    with pytest.raises(StoreUnavailable):
        await store.run(Scripts(store.redis).admit, ["k"], [], 0.3)
    await store.close()


async def test_the_probe_outlasts_whatever_a_cluster_client_raises():
    """Seen from redis-py's cluster client: its own exception, and uvloop's of a transport it closed."""
    failures = [
        RedisClusterException("Redis Cluster cannot be connected."),
        RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed"),
    ]

    class Cluster:
        pings = 0

        async def ping(self) -> bool:
            self.pings += 1
            if self.pings <= len(failures):
                raise failures[self.pings - 1]
            return True

        async def aclose(self) -> None:
            pass

    store = Store(Cluster(), timeout=0.3)
    store._open_circuit(RedisClusterException("Redis Cluster cannot be connected."))
    for _ in range(100):
        if store.answering:
            break
        await asyncio.sleep(0.01)
    assert store.answering and store.redis.pings == 3
    await store.close()


async def test_a_connection_closed_under_a_command_is_a_store_that_did_not_answer():
    """redis-py's cluster client closes every connection on CLUSTERDOWN, also one another command is
    writing on: that command fails inside redis-py with an AttributeError (or uvloop's RuntimeError)."""
    closed = redis_asyncio.Connection(host="127.0.0.1", port=free_port())  # no writer: as after its close
    store = Store(object(), embedded=True)
    with pytest.raises(StoreUnavailable, match="writelines"):
        await store.call(closed._send_packed_command, [b"PING\r\n"])
    assert not store.answering
    store._probe.cancel()  # its PING, of an object(), would never be answered


async def test_an_attribute_error_of_the_gateways_own_is_raised_as_it_is():
    async def bug() -> None:
        raise AttributeError("'Event' object has no attribute 'txt'")

    store = Store(object(), embedded=True)
    with pytest.raises(AttributeError, match="txt"):
        await store.call(bug)
    assert store.answering and store.failures == 0
