"""Store outages: Redis killed, refused or silent; the gateway answers 503 fast and recovers alone."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from helpers import Gateway, RedisServer, free_port, wait_for

from notifier.http.app import create_app
from notifier.settings import load_settings

EVENT = {"category": "db", "text": "disk full"}


@pytest.fixture
def own_redis():
    """A redis-server of the test's own on a fixed port, so it can be killed and restarted there."""
    server = RedisServer(port=free_port()).start()
    yield server
    server.stop(kill=True)


def gateway_env(redis: RedisServer, **extra: str) -> dict[str, str]:
    return {
        "NOTIFIER_REDIS_URL": redis.url,
        "NOTIFIER_REDIS_TIMEOUT": "500ms",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        **extra,
    }


def posted(gateway: Gateway, body: dict, status: int):
    """A predicate for wait_for: the POST answered ``status``."""
    return lambda: gateway.post(body)[0] == status


def test_redis_killed_and_restarted_empty(own_redis):
    gateway = Gateway(gateway_env(own_redis)).start()
    try:
        assert gateway.post(EVENT)[0] == 202
        own_redis.stop(kill=True)

        status, body, headers = gateway.post(EVENT)
        assert status == 503 and "store" in body["error"] and int(headers["Retry-After"]) >= 1
        alert = {"version": "4", "alerts": [{"labels": {"alertname": "Down"}, "fingerprint": "f"}]}
        status, _, headers = gateway.post(alert, path="/v1/alertmanager")
        assert status == 503 and "Retry-After" in headers
        assert gateway.get("/readyz")[0] == 503
        assert gateway.get("/healthz")[0] == 200
        assert gateway.proc.poll() is None

        # Back, but empty: no scripts cached, no consumer group, no counters.
        own_redis.start()
        wait_for(
            posted(gateway, {"category": "db", "text": "after restart"}, 202),
            20,
            interval=0.2,
            what="POST to succeed after Redis returned",
        )
        assert gateway.get("/readyz")[0] == 200
        stats = gateway.get("/v1/stats")[1]
        assert stats["accepted"] >= 1 and stats["dropped"] == 0
        # The delivery worker recreated its consumer group and delivered (console sink).
        wait_for(lambda: "after restart" in gateway.output(), 20, what="delivery after the restart")
        assert gateway.proc.poll() is None
    finally:
        gateway.stop()


def test_fail_open_admits_locally_and_hands_over_on_recovery(own_redis):
    env = gateway_env(
        own_redis,
        NOTIFIER_ON_STORE_ERROR="fail_open",
        NOTIFIER_REPLICAS="2",
        NOTIFIER_CATEGORY_LIMIT="4/1m",
        NOTIFIER_GLOBAL_LIMIT="100/1m",
    )
    gateway = Gateway(env).start()
    try:
        own_redis.stop(kill=True)
        answers = [gateway.post({"category": "db", "text": f"held {i}"}) for i in range(3)]
        # 4/1m over 2 replicas is 2/1m for this one.
        assert [a[0] for a in answers] == [202, 202, 429]
        assert answers[2][1]["limit"] == "category" and answers[2][1]["rule"] == "2/1m"
        metrics = gateway.get("/metrics")[1].get("_raw", "")
        assert 'notifier_fail_open_total{category="db",outcome="accepted"} 2.0' in metrics
        assert gateway.get("/readyz")[0] == 503

        own_redis.start()
        wait_for(
            lambda: gateway.get("/v1/stats")[1].get("accepted") == 2,
            20,
            what="held events counted once the store is back",
        )
        wait_for(
            lambda: "held 0" in gateway.output() and "held 1" in gateway.output(), 20, what="held events delivered"
        )
        assert "held 2" not in gateway.output()
        # The local refusal is counted like any other...
        stats = gateway.get("/v1/stats")[1]
        assert (stats["dropped"], stats["dropped_by_limit"]["category"]) == (1, 1), stats
        assert stats["by_category"]["db"] == {"accepted": 2, "dropped": 1}, stats
        # ...and the two held events sit in the sliding logs: 4/1m leaves room for two more.
        after = [gateway.post({"category": "db", "text": f"after {i}"})[0] for i in range(3)]
        assert after == [202, 202, 429]
    finally:
        gateway.stop()


@pytest.fixture
def blackhole():
    """A peer that accepts connections and never says a word (a hung Redis, a dead NAT entry)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    sock.close()


@pytest.mark.parametrize("target", ["refused", "blackhole"])
async def test_unreachable_store_is_503_not_a_hang(aiohttp_client, blackhole, target):
    url = blackhole if target == "blackhole" else f"redis://127.0.0.1:{free_port()}/0"
    client = await aiohttp_client(create_app(load_settings(redis_url=url, redis_timeout="300ms", digest_interval=0)))
    for _ in range(2):  # the second request must not be stuck behind the first
        response = await client.post("/v1/events", json=EVENT)
        assert response.status == 503 and "Retry-After" in response.headers
    assert (await client.get("/readyz")).status == 503
    assert (await client.get("/healthz")).status == 200


def test_redis_frozen_then_thawed(own_redis):
    """SIGSTOP: connections stay open but nothing answers; after SIGCONT no stale reply is misread."""
    import os
    import signal

    gateway = Gateway(gateway_env(own_redis, NOTIFIER_CATEGORY_LIMIT="1000/1m")).start()
    try:
        assert gateway.post(EVENT)[0] == 202
        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                status, _, headers = gateway.post(EVENT)
                assert status == 503 and "Retry-After" in headers
            assert gateway.get("/readyz")[0] == 503 and gateway.get("/healthz")[0] == 200
        finally:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
        wait_for(posted(gateway, EVENT, 202), 20, interval=0.2, what="POST after SIGCONT")
        # Every answer now belongs to its own request: ids are fresh, stats add up.
        before = gateway.get("/v1/stats")[1]["accepted"]
        ids = {gateway.post({**EVENT, "text": f"n{i}"})[1]["id"] for i in range(20)}
        assert len(ids) == 20
        assert gateway.get("/v1/stats")[1]["accepted"] == before + 20
    finally:
        gateway.stop()


def test_local_limiter_scales_rules_to_replicas():
    from notifier.admission.fallback import LocalWindow, scaled
    from notifier.rules import parse_rules

    assert [r[0] for r in scaled(parse_rules("10/1m,3/1s,1/1h"), 4)] == [3, 1, 1]
    window = LocalWindow(scaled(parse_rules("4/10s"), 2))
    window.add(100.0)
    assert window.wait(101.0) == (0.0, "")
    window.add(101.0)
    wait, rule = window.wait(102.0)
    assert rule == "2/10s" and wait == pytest.approx(8.0)
    assert window.wait(110.5) == (0.0, "")
    muted = LocalWindow(scaled(parse_rules("0/1h"), 3))  # a muted level stays muted in fail_open
    assert muted.wait(100.0) == (3600.0, "0/1h")


def store_errors(gateway: Gateway) -> float:
    raw = gateway.get("/metrics")[1]["_raw"]
    return float(next(line for line in raw.splitlines() if line.startswith("notifier_store_errors_total")).split()[1])


def test_connections_the_store_closed_are_replaced_before_anything_is_sent(own_redis):
    """Redis closes the gateway's idle connections (as a restart or a failover does): none may carry a request."""
    gateway = Gateway(gateway_env(own_redis, NOTIFIER_CATEGORY_LIMIT="1000/1m")).start()
    admin = redis.Redis(port=own_redis.port)
    try:
        with ThreadPoolExecutor(8) as pool:  # connections in the pool, each used
            assert set(pool.map(lambda _: gateway.get("/v1/limits")[0], range(32))) == {200}
        errors = store_errors(gateway)
        idle = [c["id"] for c in admin.client_list() if "b" not in c["flags"] and c["cmd"] != "client|list"]
        for client_id in idle:  # not the delivery worker's blocked read: its failure would be seen
            admin.client_kill_filter(_id=client_id)
        time.sleep(0.2)  # the gateway's event loop sees each connection closed
        statuses = [gateway.post({**EVENT, "text": f"after {i}"})[0] for i in range(8)]
        statuses += [gateway.get(path)[0] for path in ("/readyz", "/v1/limits", "/v1/stats") * 3]
        assert len(idle) >= 2 and statuses == [202] * 8 + [200] * 9, (idle, statuses)
        assert store_errors(gateway) == errors
    finally:
        admin.close()
        gateway.stop()
