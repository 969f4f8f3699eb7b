"""The gateway on a real 3-master Redis Cluster that the test makes itself.

Every key of a deployment carries the hash tag ``{prefix}``, so one deployment
lives in one slot (its limits are checked atomically there), and deployments
with other key prefixes spread over the other masters.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from helpers import Gateway, RedisServer, free_port, http, need, wait_for
from redis.cluster import RedisCluster
from slack_standin import TOKEN

MASTERS = 3


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is a valid, free port too."""
    while True:
        port = free_port()
        if port + 10000 <= 65535 and _free(port + 10000):
            return port


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Cluster:
    """Three cluster-enabled redis-servers joined with ``redis-cli --cluster create``."""

    def __init__(self) -> None:
        self.nodes: list[RedisServer] = []

    def start(self) -> Cluster:
        cli = need("redis-cli")
        for _ in range(MASTERS):
            node = RedisServer(
                port=cluster_port(), extra=["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]
            )
            # The cluster config file is written by the node: keep it in the node's temp dir.
            node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf"]
            self.nodes.append(node.start())
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_for(self._all_ok, 30, 0.2, what="cluster_state:ok on every node")
        return self

    def _all_ok(self) -> bool:
        return all(self._state(n) == "ok" for n in self.nodes)

    def _state(self, node: RedisServer) -> str:
        client = self.node_client(node)
        try:
            return client.execute_command("CLUSTER INFO").get("cluster_state", "")
        finally:
            client.close()

    @staticmethod
    def node_client(node: RedisServer) -> redis.Redis:
        return redis.Redis(port=node.port, decode_responses=True)

    @property
    def seed_url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def client(self) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, decode_responses=True)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
            shutil.rmtree(node.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster():
    need("redis-server")
    made = Cluster()
    try:
        yield made.start()
    finally:
        made.stop()


@pytest.fixture
def launch(cluster, slack, tmp_path):
    """Start gateways on the cluster, one key prefix each; all stop at the end of the test."""
    started: list[Gateway] = []

    def start(prefix: str, **env: str) -> Gateway:
        settings = {
            "NOTIFIER_REDIS_URL": cluster.seed_url,
            "NOTIFIER_REDIS_CLUSTER": "true",
            "NOTIFIER_KEY_PREFIX": prefix,
            "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
            "NOTIFIER_CHANNEL_RATE": "1000/1s",
            "NOTIFIER_DIGEST_INTERVAL": "0",
            **env,
        }
        gateway = Gateway(settings, log_dir=str(tmp_path))
        started.append(gateway)
        return gateway.start()

    try:
        yield start
    finally:
        for gateway in started:
            gateway.stop()
            with contextlib.suppress(AttributeError):
                gateway.log.close()


def keys_of(client: RedisCluster, prefix: str) -> list[str]:
    return list(client.scan_iter(match=f"{prefix}:*", target_nodes=RedisCluster.ALL_NODES))


def fire(gateway: Gateway, events: list[tuple[str, str]]) -> list[tuple[str, str, int, dict]]:
    """POST every (category, text) concurrently; (category, text, status, body) of each."""

    def send(item):
        category, text = item
        status, body, _ = gateway.post({"category": category, "text": text})
        return category, text, status, body

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(send, events))


def delivered(slack, marker: str) -> list[str]:
    pattern = re.compile(re.escape(marker) + r"-\d+")
    return [m.group() for m in (pattern.search(r.text) for r in slack.received()) if m]


def test_gateway_on_cluster_admits_exactly_and_keeps_one_slot(cluster, launch, slack):
    prefix = "cl-a"
    gateway = launch(prefix, NOTIFIER_GLOBAL_LIMIT="12/30m", NOTIFIER_CATEGORY_LIMIT="5/30m")
    assert gateway.get("/readyz")[0] == 200
    slack.script((429, 1))  # one Slack rate limit: the cooldown key goes through the cluster too
    categories = ["db", "web", "auth", "queue"]
    # A burst of one category (its own limit binds), then one over the others (the global binds).
    answers = fire(gateway, [("db", f"cl-event-{i}") for i in range(10)])
    assert [status for *_, status, _ in answers].count(202) == 5
    answers += fire(gateway, [(categories[1 + i % 3], f"cl-event-{i}") for i in range(10, 60)])
    assert all(status in (202, 429) for _, _, status, _ in answers)
    accepted = [(c, t) for c, t, status, _ in answers if status == 202]
    per_category = Counter(c for c, _ in accepted)
    print(f"cluster: 60 sent, {len(accepted)} admitted {dict(sorted(per_category.items()))}")
    assert len(accepted) == 12
    assert max(per_category.values()) <= 5
    for category, _, status, body in answers:
        if status == 429 and body["limit"] == "category":
            assert body["rule"] == "5/30m" and per_category[category] == 5
        elif status == 429:
            assert (body["limit"], body["rule"]) == ("global", "12/30m")

    wait_for(lambda: len(delivered(slack, "cl-event")) >= 12, 20, what="12 deliveries")
    assert sorted(delivered(slack, "cl-event")) == sorted(t for _, t in accepted)  # each exactly once

    stats = gateway.get("/v1/stats")[1]
    assert (stats["accepted"], stats["dropped"]) == (12, 48)
    assert {c: v["accepted"] for c, v in stats["by_category"].items()} == dict(per_category)
    status, limits, _ = gateway.get("/v1/limits")
    assert status == 200
    assert (limits["global"][0]["used"], limits["global"][0]["remaining"]) == (12, 0)
    assert {c: v[0]["used"] for c, v in limits["categories"].items()} == dict(per_category)

    client = cluster.client()
    try:
        keys = keys_of(client, prefix)
        base = f"{prefix}:{{{prefix}}}:"
        assert {base + "log:global", base + "outbox", base + "stats", base + "slots:#alerts"} <= set(keys)
        slots = {client.keyslot(k) for k in keys}
        assert len(slots) == 1, slots
        assert client.cluster_keyslot(keys[0]) == slots.pop()  # the server agrees with redis-py
    finally:
        client.close()


def test_deployments_with_other_prefixes_spread_over_the_masters(cluster, launch):
    """Two deployments on one cluster: each in one slot, on different masters, limits apart."""
    prefixes = ("team-red", "team-blue")
    for prefix in prefixes:
        gateway = launch(prefix, NOTIFIER_GLOBAL_LIMIT="3/30m")
        statuses = [gateway.post({"category": "x", "text": f"{prefix}-{i}"})[0] for i in range(5)]
        assert statuses.count(202) == 3  # each deployment has its own limits
    client = cluster.client()
    try:
        slots = [{client.keyslot(k) for k in keys_of(client, p)} for p in prefixes]
        assert all(len(s) == 1 for s in slots) and slots[0] != slots[1]
        nodes = {client.get_node_from_key(f"{p}:{{{p}}}:x").name for p in prefixes}
        assert len(nodes) == 2  # these two prefixes hash to different masters
    finally:
        client.close()


def test_digest_of_drops_on_cluster(launch, slack):
    """Digest bookkeeping and the digest clock (the slot node's TIME) work on a cluster."""
    gateway = launch("cl-digest", NOTIFIER_CATEGORY_LIMIT="2/30m", NOTIFIER_DIGEST_INTERVAL="1s")
    statuses = [gateway.post({"category": "noisy", "text": f"noisy-{i}"})[0] for i in range(5)]
    assert statuses == [202, 202, 429, 429, 429]

    def digests():
        return [m.text for m in slack.received() if "Suppressed" in m.text]

    wait_for(digests, 15, what="a digest")
    assert len(digests()) == 1 and "Suppressed 3" in digests()[0]
    assert sorted(delivered(slack, "noisy")) == ["noisy-0", "noisy-1"]


def test_alerts_on_cluster_reopen_acknowledge_escalate_and_list(launch, slack):
    """The alert scripts (ack.lua, timers.lua) and the open-alert index keep to the one slot."""
    gateway = launch("cl-alerts", NOTIFIER_ESCALATION='{"critical": ["1s <@U0ONCALL1>"]}')
    alert = {"category": "db", "text": "cl-alert down", "dedup_key": "cl-1", "severity": "critical"}
    assert gateway.post(alert)[0] == 202
    assert gateway.post({**alert, "dedup_key": "cl-2", "text": "cl-other down"})[0] == 202
    assert gateway.post({**alert, "status": "resolved"})[0] == 202
    assert gateway.post(alert)[1]["status"] == "reopened"
    status, body, _ = http("POST", gateway.url + "/v1/alerts/cl-2/ack", {"by": "dana"})
    assert status == 200 and body["acknowledged_by"] == "dana", body
    status, listed, _ = http("GET", gateway.url + "/v1/alerts")
    assert status == 200 and [a["dedup_key"] for a in listed["alerts"]] == ["cl-2", "cl-1"], listed
    post = wait_for(lambda: next((m for m in slack.received() if "cl-alert down" in m.text and not m.thread_ts), None))
    wait_for(lambda: any("Not acknowledged after 1s" in r.text for r in slack.replies(post.ts)), 15, what="the step")


def test_a_cluster_with_a_password_runs_every_script_on_its_slot_node(slack, tmp_path):
    """Scripts go to a client of the slot's node alone (sent once): it has the URL's password too."""
    node = RedisServer(port=cluster_port(), extra=["--cluster-enabled", "yes", "--requirepass", "s3cret"])
    node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf"]
    node.start()
    admin = redis.Redis(port=node.port, password="s3cret", decode_responses=True)
    gateway = None
    try:
        admin.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: admin.execute_command("CLUSTER INFO")["cluster_state"] == "ok", 20, what="cluster_state:ok")
        env = {
            "NOTIFIER_REDIS_URL": f"redis://:s3cret@127.0.0.1:{node.port}/0",
            "NOTIFIER_REDIS_CLUSTER": "true",
            "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
            "NOTIFIER_DIGEST_INTERVAL": "0",
        }
        gateway = Gateway(env, log_dir=str(tmp_path)).start()
        assert gateway.post({"category": "db", "text": "cl-password"})[0] == 202
        wait_for(lambda: any("cl-password" in t for t in slack.texts()), 10, what="delivered")
    finally:
        if gateway is not None:
            gateway.stop()
        admin.close()
        node.stop()
        shutil.rmtree(node.dir, ignore_errors=True)
