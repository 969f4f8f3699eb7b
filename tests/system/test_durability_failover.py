"""Durability through a failover: a Redis Cluster's slot primary, and the deploy Sentinel example.

A cluster primary is stalled and killed under load with one replica to wait for: every event
answered ``202`` reaches the Slack stand-in exactly once, a plain ``503`` never. The Sentinel
example of the deploy folder fails over, and fails fast when it has no replicas. The Redis crash
and the Sentinel failover under load are in ``test_durability.py``; the load and the checks
both use are in ``durability_load.py`` (tests/support).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import redis
from durability_load import Load, crash_env, delivered, stop_after_a_202, summary, truth, until_delivered
from helpers import Gateway, RedisServer, slack_env, wait_for
from test_cluster import Cluster, cluster_port
from topology import Replicated, Sentinels, client, freeze


def _knows(node: redis.Redis, node_id: str) -> bool:
    return any(info.get("node_id") == node_id for info in node.execute_command("CLUSTER NODES").values())


def _add_replicas(cluster, master_port: int, count: int) -> list[RedisServer]:
    """``count`` new cluster nodes, each a replica of the master on ``master_port``."""
    master = client(master_port)
    master_id = master.execute_command("CLUSTER MYID")
    added = []
    for _ in range(count):
        # No replica migration: both stay with the slot's primary, not with a master that has none.
        node = RedisServer(port=cluster_port(), extra=["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
        node.extra += ["--cluster-allow-replica-migration", "no", "--cluster-migration-barrier", "99"]
        node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf"]
        node.start()
        new = client(node.port)
        new.execute_command("CLUSTER MEET", "127.0.0.1", master_port)
        wait_for(lambda: _knows(new, master_id), 20, 0.1, what="the node met")  # noqa: B023
        new.execute_command("CLUSTER REPLICATE", master_id)
        added.append(node)
    wait_for(lambda: Replicated.online(RedisServer(port=master_port)) >= count, 30, 0.2, what="replicas online")
    return added


def _stall_and_kill_under_load(gateway: Gateway, primary: RedisServer, extra: list[RedisServer], slack):
    """Under load on ``gateway``, the slot's ``primary`` frozen for a second, then killed; waits until one
    of its two replicas (``extra``) is promoted and followed, and the load has a 202 again.

    Returns (load, killed, named, replicating, accepted): the stopped load, when the primary was
    killed, when a replica was promoted, when the first 202 after that was sent, and the texts
    accepted (every one delivered).
    """
    load = Load(gateway.url, "r0")
    load.start()
    time.sleep(1.0)
    freeze(primary)
    time.sleep(1.0)
    killed = time.monotonic()
    primary.stop(kill=True)

    def promoted() -> bool:
        try:
            return client(extra[0].port).execute_command("ROLE")[0] == "master" or (
                client(extra[1].port).execute_command("ROLE")[0] == "master"
            )
        except (redis.RedisError, OSError):
            return False

    wait_for(promoted, 30, 0.02, what="a replica promoted")
    named = time.monotonic()
    new = next(n for n in extra if client(n.port).execute_command("ROLE")[0] == "master")
    wait_for(lambda: Replicated.online(new) >= 1, 20, 0.05, what="the other replica following it")
    replicating = stop_after_a_202(load)
    accepted = until_delivered(load.answers, slack, 30)
    return load, killed, named, replicating, accepted


def test_cluster_failover_of_the_slot_primary_with_one_replica_loses_no_202(slack, tmp_path):
    """The slot's primary stalls for a second (the requests in flight time out), then is killed."""
    made = Cluster().start()
    extra: list[RedisServer] = []
    try:
        seed = made.client()
        owner = seed.get_node_from_key("{durable}")
        primary = next(n for n in made.nodes if n.port == owner.port)
        for node in made.nodes:  # a quicker failure detection than the other tests' cluster
            client(node.port).config_set("cluster-node-timeout", 2000)
        extra = _add_replicas(made, primary.port, 2)
        other = next(n for n in made.nodes if n is not primary)
        env = {
            **crash_env(f"redis://127.0.0.1:{other.port}/0", slack),
            "NOTIFIER_REDIS_CLUSTER": "true",
            "NOTIFIER_KEY_PREFIX": "durable",
            "NOTIFIER_REDIS_MIN_REPLICAS": "1",
            "NOTIFIER_REDIS_TIMEOUT": "1s",
        }
        gateway = Gateway(env, log_dir=str(tmp_path)).start()
        try:
            load, killed, named, replicating, accepted = _stall_and_kill_under_load(gateway, primary, extra, slack)
        finally:
            gateway.stop()
    finally:
        for node in extra:
            node.stop(kill=True)
        made.stop()
    sent = delivered(slack)
    lost = sorted(accepted - set(sent))
    after = [a.answered for a in load.answers if a.status == 202 and a.sent > replicating]
    seen = {
        "accepted": len(accepted),
        "answered_503": sum(1 for a in load.answers if a.status == 503),
        **truth(load.answers, sent),
        "lost": len(lost),
        "promoted_s": round(named - killed, 2),
        "first_202_after_replicating_s": round(min(after) - replicating, 2),
        "slowest_answer_s": round(max(a.answered - a.sent for a in load.answers), 2),
    }
    print(f"cluster, N=1: {summary(seen)}")
    assert lost == [] and seen["accepted"] > 100, seen
    assert seen["plain_503_delivered"] == [], seen  # every 503 told the truth
    assert {a.status for a in load.answers} <= {202, 503}, seen
    assert seen["slowest_answer_s"] < 1.0 + 0.5 + 0.3, seen
    assert seen["first_202_after_replicating_s"] < 2.0, seen


DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "sentinel"


def test_the_deploy_sentinel_example_fails_over_and_fails_fast_without_replicas(slack, tmp_path):
    """deploy/sentinel as shipped (ports and folders aside): 202, a failover, 202 again; with every
    replica gone the primary itself refuses writes (min-replicas-to-write) and the gateway answers 503."""
    # min-replicas-max-lag 1 instead of 10 s: the same rule, sooner.
    nodes = Replicated(2, extra=["--appendonly", "yes", "--min-replicas-max-lag", "1"], configs=DEPLOY).start()
    sentinels = Sentinels(nodes.primary, template=DEPLOY / "sentinel.conf").start()
    env = {k: v for k, v in slack_env("", slack).items() if k != "NOTIFIER_REDIS_URL"}
    env |= {"NOTIFIER_REDIS_SENTINELS": sentinels.addresses, "NOTIFIER_REDIS_MIN_REPLICAS": "1"}
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        assert gateway.post({"category": "ha", "text": "before"})[0] == 202
        nodes.primary.stop(kill=True)
        port, _ = sentinels.wait_failover(nodes.primary.port)
        new = next(n for n in nodes.replicas if n.port == port)
        wait_for(lambda: gateway.post({"category": "ha", "text": "after"})[0] == 202, 20, 0.2, what="202 again")
        wait_for(lambda: {"before", "after"} <= set(_texts(slack)), 20, what="both delivered")
        for replica in nodes.replicas:
            if replica is not new:
                replica.stop(kill=True)
        wait_for(lambda: _refuses_writes(new), 10, 0.2, what="NOREPLICAS from the primary")
        started = time.monotonic()
        status, body, headers = gateway.post({"category": "ha", "text": "alone"})
        assert status == 503 and "Retry-After" in headers and time.monotonic() - started < 1.5, body
        time.sleep(1)
        assert "alone" not in _texts(slack)  # the primary took nothing
    finally:
        gateway.stop()
        sentinels.stop()
        nodes.stop()


def _refuses_writes(node: RedisServer) -> bool:
    try:
        client(node.port).set("probe", "1")
    except redis.ResponseError as exc:
        return "NOREPLICAS" in str(exc)
    return False


def _texts(slack) -> list[str]:
    return [m.group() for m in (re.search(r"\b(before|after|alone)\b", t) for t in slack.texts()) if m]
