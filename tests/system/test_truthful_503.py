"""Every 503 tells the truth: a reply lost after the admission ran is ``503 outcome unknown``.

A proxy between the gateway and Redis (``redis_proxy.ReplyProxy``) lets the request that
carries a marker reach Redis, so the script runs, and then holds, drops or cuts its reply:
the late reply of a busy host, the reply lost in a failover, without depending on either.
A plain ``503`` is kept for what certainly changed nothing (the store unreachable before
anything was sent), and its event is never delivered.
"""

from __future__ import annotations

import time

import pytest
import redis
from helpers import Gateway, RedisServer, need, slack_env, wait_for
from redis_proxy import ReplyProxy
from test_cluster import cluster_port
from topology import Replicated, client

from notifier.store.scripts import script_dir

PLAIN = "store unavailable, try again later"


@pytest.fixture
def proxy(redis_server, redis_url):
    """A proxy in front of the session's redis-server (emptied for the test)."""
    made = ReplyProxy(redis_server.port).start()
    yield made
    made.stop()


@pytest.fixture
def launch(slack, tmp_path):
    """Start gateways posting to the Slack stand-in; all stop at the end of the test."""
    started: list[Gateway] = []

    def start(redis_url: str, **env: str) -> Gateway:
        settings = slack_env(redis_url, slack, NOTIFIER_REDIS_TIMEOUT="500ms", NOTIFIER_CHANNEL_RATE="100/1s", **env)
        started.append(Gateway(settings, log_dir=str(tmp_path)).start())
        # The scripts are loaded now: a lost reply below is the script's, not a NOSCRIPT's.
        assert started[-1].post({"category": "warm", "text": "warm-up"})[0] == 202
        return started[-1]

    yield start
    for gateway in started:
        gateway.stop()


def posted(slack, text: str) -> int:
    """How many Slack messages carry ``text``, once any late second post would have come."""
    wait_for(lambda: any(text in t for t in slack.texts()), 15, what=f"{text} posted")
    time.sleep(1.5)
    return sum(text in t for t in slack.texts())


def answered(gateway: Gateway, body: dict, path: str = "/v1/events"):
    """The answer to ``body`` once the store answers again (the circuit closes within a moment)."""
    return wait_for(lambda: (a := gateway.post(body, path=path))[0] != 503 and a, 10, 0.1, what="an answer, not 503")


def unknown_answers(gateway: Gateway) -> str:
    raw = gateway.get("/metrics")[1]["_raw"]
    return next((line for line in raw.splitlines() if line.startswith("notifier_outcome_unknown_total")), "")


@pytest.mark.parametrize("mode", ["hold", "drop", "cut"])
def test_a_lost_reply_answers_outcome_unknown_and_the_retry_is_a_duplicate(proxy, launch, slack, mode):
    gateway = launch(proxy.url)
    event = {"category": "db", "text": f"lost-{mode}", "dedup_key": f"lost-{mode}"}
    proxy.arm(event["text"].encode(), mode, seconds=1.5)
    status, body, headers = gateway.post(event)
    assert (status, body.get("error")) == (503, "outcome unknown"), body
    assert int(headers["Retry-After"]) >= 1 and len(body["id"]) == 32
    assert proxy.seen == 1  # sent once: the gateway never sends an admission twice
    assert answered(gateway, event)[:2] == (200, {"status": "duplicate", "id": body["id"]})
    assert posted(slack, event["text"]) == 1
    assert unknown_answers(gateway) == "notifier_outcome_unknown_total 1.0"


def test_a_store_refusing_connections_is_a_plain_503_and_nothing_is_delivered(proxy, launch, slack):
    gateway = launch(proxy.url)
    assert gateway.post({"category": "db", "text": "before"})[0] == 202
    proxy.refuse()
    for i in range(3):  # the first finds its connection closed, the next the circuit open
        status, body, headers = gateway.post({"category": "db", "text": f"refused-{i}"})
        assert (status, body) == (503, {"error": PLAIN}) and "Retry-After" in headers
    proxy.accept()
    assert answered(gateway, {"category": "db", "text": "after"})[0] == 202
    assert posted(slack, "after") == 1
    assert not any("refused-" in t for t in slack.texts())
    assert unknown_answers(gateway) == "notifier_outcome_unknown_total 0.0"


def test_with_min_replicas_a_lost_reply_is_outcome_unknown_not_not_replicated(launch, slack):
    nodes = Replicated(replicas=1).start()
    proxy = ReplyProxy(nodes.primary.port).start()
    try:
        gateway = launch(proxy.url, NOTIFIER_REDIS_MIN_REPLICAS="1")
        event = {"category": "db", "text": "replicated-lost", "dedup_key": "replicated-lost"}
        proxy.arm(b"replicated-lost", "drop")
        status, body, _ = gateway.post(event)
        assert (status, body.get("error")) == (503, "outcome unknown"), body
        assert answered(gateway, event)[:2] == (200, {"status": "duplicate", "id": body["id"]})
        assert posted(slack, "replicated-lost") == 1
    finally:
        proxy.stop()
        nodes.stop()


def test_the_cluster_client_never_sends_an_admission_twice(launch, slack):
    """A one-node cluster that announces the proxy's port, so every connection goes through it."""
    need("redis-server")
    proxy = ReplyProxy(cluster_port())
    node = RedisServer(port=proxy.target, extra=["--cluster-enabled", "yes"])
    proxy.start()
    node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf", "--cluster-announce-port", str(proxy.port)]
    try:
        node.start()
        client(node.port).execute_command("CLUSTER ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: client(node.port).cluster("info")["cluster_state"] == "ok", 10, what="cluster ok")
        gateway = launch(proxy.url, NOTIFIER_REDIS_CLUSTER="true")
        proxy.arm(b"cut-once", "cut")
        status, body, _ = gateway.post({"category": "db", "text": "cut-once"})
        assert (proxy.seen, status, body.get("error")) == (1, 503, "outcome unknown"), (proxy.seen, status, body)
        assert posted(slack, "cut-once") == 1
        assert gateway.get("/v1/stats")[1]["accepted"] == 2  # the warm-up, and this one once
    finally:
        proxy.stop()
        node.stop(kill=True)


def test_a_cluster_no_node_of_which_answers_is_503_until_it_is_back(launch, slack):
    """With every node gone redis-py's cluster client raises RedisClusterException, which is not one of
    its RedisErrors: still a 503, and the gateway serves again the moment the node is back."""
    need("redis-server")
    node = RedisServer(port=cluster_port(), extra=["--cluster-enabled", "yes"])
    node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf"]
    ok = lambda: client(node.port).cluster("info")["cluster_state"] == "ok"  # noqa: E731
    try:
        node.start()
        client(node.port).execute_command("CLUSTER ADDSLOTSRANGE", 0, 16383)
        wait_for(ok, 10, what="cluster ok")
        gateway = launch(node.url, NOTIFIER_REDIS_CLUSTER="true")
        node.stop(kill=True)
        for i in range(3):  # the first may find its connection cut once sent; the others the circuit open
            status, body, _ = gateway.post({"category": "db", "text": f"gone-{i}"})
            assert status == 503 and (i == 0 or body == {"error": PLAIN}), (i, status, body)
        assert gateway.get("/readyz")[0] == 503
        node.start()  # the same port and nodes.conf: it serves every slot again, empty
        wait_for(ok, 10, what="cluster ok again")
        assert answered(gateway, {"category": "db", "text": "back-1"})[0] == 202
        assert posted(slack, "back-1") == 1
        assert not any("gone-" in t for t in slack.texts())
    finally:
        node.stop(kill=True)


STARTS = "2025-01-01T00:00:00Z"
ALERT = {"labels": {"alertname": "DiskFull", "instance": "db-1"}, "fingerprint": "f1", "startsAt": STARTS}
HELD = {"labels": {"alertname": "HeldAlert", "instance": "db-2"}, "fingerprint": "f2", "startsAt": STARTS}


def test_alertmanager_says_which_alerts_may_have_been_admitted(proxy, launch, slack):
    gateway = launch(proxy.url)
    first = gateway.post({"version": "4", "alerts": [ALERT]}, path="/v1/alertmanager")[1]["results"][0]
    assert first["status"] == "accepted", first
    proxy.arm(b"HeldAlert", "hold", 1.5)
    payload = {"version": "4", "alerts": [ALERT, HELD]}
    status, body, headers = gateway.post(payload, path="/v1/alertmanager")
    assert (status, body.get("error")) == (503, "outcome unknown") and "Retry-After" in headers, body
    repeat, held = body["results"]
    assert (repeat["status"], repeat["id"]) == ("duplicate", first["id"]), body
    assert held["status"] == "outcome unknown" and len(held["id"]) == 32, body
    # Alertmanager sends the payload again: both are duplicates now, and each is posted once.
    again = answered(gateway, payload, path="/v1/alertmanager")[1]["results"]
    assert [(a["status"], a["id"]) for a in again] == [("duplicate", first["id"]), ("duplicate", held["id"])]
    assert posted(slack, "HeldAlert") == 1 and posted(slack, "DiskFull") == 1


def test_fail_open_never_decides_again_what_the_store_may_have_admitted(proxy, launch, slack):
    gateway = launch(proxy.url, NOTIFIER_ON_STORE_ERROR="fail_open")
    proxy.arm(b"open-late", "hold", 1.5)
    status, body, _ = gateway.post({"category": "db", "text": "open-late"})
    assert (status, body.get("error")) == (503, "outcome unknown"), body
    assert posted(slack, "open-late") == 1
    assert gateway.get("/v1/stats")[1]["accepted"] == 2  # the warm-up, and this one once


def test_fail_open_hands_an_event_over_once_when_the_reply_to_the_hand_over_is_lost(proxy, launch, slack):
    gateway = launch(proxy.url, NOTIFIER_ON_STORE_ERROR="fail_open")
    restore = (script_dir() / "restore.lua").read_text()
    redis.Redis.from_url(proxy.url).script_load(restore)  # the reply lost below is the script's, not a NOSCRIPT's
    proxy.refuse()
    assert gateway.post({"category": "db", "text": "open-held"})[0] == 202  # admitted here, held
    proxy.arm(b"open-held", "cut")  # the hand-over runs, its reply is lost: it is sent again
    proxy.accept()
    assert posted(slack, "open-held") == 1
    assert proxy.seen >= 2
    wait_for(lambda: gateway.get("/v1/stats")[1].get("accepted") == 2, 5, what="the hand-over counted")
    time.sleep(1)
    assert gateway.get("/v1/stats")[1]["accepted"] == 2  # the warm-up, and this one once
