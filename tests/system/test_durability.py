"""Durability: a Redis crash sends nothing twice and loses nothing answered 202.

Redis runs with ``appendfsync always`` and is SIGKILLed under load, then restarted on the same
port and data directory, several rounds in a row. Every event answered ``202`` must reach the
Slack stand-in exactly once; an event answered a plain ``503`` never (a request in flight at a
kill, whose script may have run, answers ``503 outcome unknown``). The failover tests hold the
same: plain ``503``s delivered, 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import aiohttp
import pytest
import redis
from helpers import Gateway, RedisServer, free_port, slack_env, wait_for
from slack_standin import SlackStandin
from test_cluster import Cluster, cluster_port
from topology import Replicated, Sentinels, client, freeze, thaw

CHANNELS = 32  # one sender per channel: many posts (and settles) in flight at each kill
IN_DOUBT = ("outcome unknown", "not replicated")  # the 503s that may have admitted their event


class Answer(NamedTuple):
    text: str
    status: int  # 0: no answer
    sent: float
    answered: float
    error: str = ""  # a 503's error


class Load(threading.Thread):
    """Posts events with unique texts, ``in_flight`` at a time, until stopped; records each answer."""

    def __init__(self, url: str, prefix: str, in_flight: int = 8) -> None:
        super().__init__(daemon=True)
        self.url, self.prefix, self.in_flight = url, prefix, in_flight
        self.answers: list[Answer] = []
        self.stopping = threading.Event()
        self._n = 0

    def run(self) -> None:
        asyncio.run(self._load())

    async def _load(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            await asyncio.gather(*(self._worker(session) for _ in range(self.in_flight)))

    async def _worker(self, session: aiohttp.ClientSession) -> None:
        while not self.stopping.is_set():
            self._n += 1
            n, text = self._n, f"{self.prefix}-{self._n}"
            body = {"category": f"c{n % CHANNELS}", "text": text}
            sent, error = time.monotonic(), ""
            try:
                async with session.post(self.url + "/v1/events", json=body) as response:
                    answer = json.loads(await response.read())
                    status = response.status
                    error = answer.get("error", "") if status == 503 else ""
            except (aiohttp.ClientError, asyncio.TimeoutError):
                status = 0
            self.answers.append(Answer(text, status, sent, time.monotonic(), error))
            # A steady load the stand-in keeps up with, and no busy loop against a store that is down.
            await asyncio.sleep(0.02)


def delivered(slack) -> Counter[str]:
    """How many times each event text of the loads reached Slack."""
    return Counter(m.group() for m in (re.search(r"\br\d+-\d+\b", t) for t in slack.texts()) if m)


def truth(answers: list[Answer], sent: Counter[str]) -> dict:
    """What the 503s said, against what reached Slack: a plain 503 delivered is a lie."""
    doubted = [a for a in answers if a.error in IN_DOUBT]
    plain = [a for a in answers if a.status == 503 and a.error not in IN_DOUBT]
    return {
        "plain_503": len(plain),
        "plain_503_delivered": sorted(a.text for a in plain if a.text in sent),
        "outcome_unknown": sum(1 for a in doubted if a.error == "outcome unknown"),
        "not_replicated": sum(1 for a in doubted if a.error == "not replicated"),
        "in_doubt_delivered": sum(1 for a in doubted if a.text in sent),
    }


def until_delivered(answers, slack, timeout: float) -> set[str]:
    """The texts answered 202, once Slack has each of them (or after ``timeout`` seconds)."""
    accepted = {a.text for a in answers if a.status == 202}
    deadline = time.monotonic() + timeout
    while not accepted <= set(delivered(slack)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return accepted


def stop_after_a_202(load) -> float:
    """Now (the new primary replicates): wait for a 202 after it, let the load run 1 s more, stop it."""
    replicating = time.monotonic()
    wait_for(lambda: any(a.status == 202 and a.sent > replicating for a in load.answers), 10, what="202 again")
    time.sleep(1.0)
    load.stopping.set()
    load.join(20)
    return replicating


def crash_env(redis_url: str, slack, **extra: str) -> dict[str, str]:
    channels = {f"c{i}": f"#ch{i}" for i in range(CHANNELS)}
    return slack_env(
        redis_url,
        slack,
        NOTIFIER_REDIS_TIMEOUT="500ms",
        NOTIFIER_CHANNEL_RATE="1000/1s",
        NOTIFIER_GLOBAL_LIMIT="1000000/1h",
        NOTIFIER_CATEGORY_LIMIT="1000000/1h",
        NOTIFIER_CATEGORY_CHANNELS=json.dumps(channels),
        **extra,
    )


def _kill_rounds(server: RedisServer, gateway: Gateway, rounds: int) -> tuple[list, list[tuple[float, float]]]:
    """SIGKILL Redis under load ``rounds`` times, restarting it each time; every answer, and each kill's span."""
    answers, kills = [], []
    for round_ in range(rounds):
        load = Load(gateway.url, f"r{round_}")
        load.start()
        time.sleep(0.8)
        killing = time.monotonic()
        server.stop(kill=True)
        kills.append((killing, time.monotonic()))
        time.sleep(0.3)
        server.start()
        restarted = time.monotonic()
        wait_for(lambda: any(a.status == 202 and a.sent > restarted for a in load.answers), 20, what="202 again")  # noqa: B023
        time.sleep(0.8)
        load.stopping.set()
        load.join(20)
        answers += load.answers
    return answers, kills


def test_redis_sigkill_under_load_loses_nothing_and_sends_nothing_twice(tmp_path):
    # Slack takes 50 ms a post: every channel has a post in flight at each kill, settled after it.
    slack = SlackStandin(post_latency=0.05).start()
    server = RedisServer(port=free_port(), extra=["--appendonly", "yes", "--appendfsync", "always"]).start()
    gateway = Gateway(crash_env(server.url, slack), log_dir=str(tmp_path)).start()
    try:
        answers, kills = _kill_rounds(server, gateway, 8)
        accepted = until_delivered(answers, slack, 30)
        time.sleep(2.5)  # a late second post of any entry would arrive by now
    finally:
        gateway.stop()
        server.stop(kill=True)
        slack.stop()
    sent = delivered(slack)
    twice = sorted(text for text, n in sent.items() if n > 1)
    lost = sorted(accepted - set(sent))
    told = truth(answers, sent)
    # In doubt: requests in flight at a kill (the script may have run), or whose reply came late.
    in_flight = {a.text for a in answers if any(a.sent <= end and a.answered >= start for start, end in kills)}
    told["in_doubt_at_a_kill"] = sum(1 for a in answers if a.error in IN_DOUBT and a.text in in_flight)
    print(f"{len(accepted)} answered 202, {len(twice)} sent twice, {len(lost)} lost, {summary(told)}")
    assert (twice, lost, told["plain_503_delivered"]) == ([], [], []), (twice[:5], lost[:5], told)
    assert len(accepted) > 100 and slack.refusals == []


@pytest.fixture
def replicated():
    nodes = Replicated(replicas=2).start()
    yield nodes
    nodes.stop()


def test_min_replicas_answers_202_only_once_replicas_hold_the_event(replicated, slack):
    env = slack_env(replicated.primary.url, slack, NOTIFIER_REDIS_MIN_REPLICAS="2", NOTIFIER_REDIS_TIMEOUT="500ms")
    first, second = Gateway(env).start(), Gateway(env).start()
    alert = {"category": "db", "text": "disk full", "dedup_key": "disk"}
    try:
        assert first.post({"category": "db", "text": "replicated"})[0] == 202
        for replica in replicated.replicas:
            freeze(replica)
        try:
            started = time.monotonic()
            status, body, headers = first.post(alert)
            took = time.monotonic() - started
            assert (status, body.get("error")) == (503, "not replicated") and int(headers["Retry-After"]) >= 1, body
            assert took < 0.5 + 0.5
            # A repeat on another process (its own connections) wrote nothing the WAIT would cover
            # but for the marker: it must not claim the first event is held.
            status, again, _ = second.post(alert)
            assert (status, again) == (503, {"error": "not replicated", "id": body["id"]})
            time.sleep(1)
            assert not any("disk full" in t for t in slack.texts())  # not posted before replicas hold it
        finally:
            for replica in replicated.replicas:
                thaw(replica)
        wait_for(
            lambda: second.post(alert)[:2] == (200, {"status": "duplicate", "id": body["id"]}),
            10,
            0.2,
            what="the repeat answered duplicate once replicas hold it",
        )
        wait_for(lambda: any("disk full" in t for t in slack.texts()), 10, what="the event posted")
        time.sleep(1)
        assert sum("disk full" in t for t in slack.texts()) == 1
        metrics = first.get("/metrics")[1]["_raw"]
        assert "notifier_not_replicated_total 1.0" in metrics
        assert "notifier_replication_wait_seconds_count" in metrics
    finally:
        first.stop()
        second.stop()


def sentinel_env(sentinels: Sentinels, slack, replicas: int) -> dict[str, str]:
    # Delivery slower than admission: a backlog of admitted events waits in the outbox at the kill.
    env = {**crash_env("", slack), "NOTIFIER_REDIS_TIMEOUT": "1s", "NOTIFIER_CHANNEL_RATE": "3/1s"}
    del env["NOTIFIER_REDIS_URL"]
    return {**env, "NOTIFIER_REDIS_SENTINELS": sentinels.addresses, "NOTIFIER_REDIS_MIN_REPLICAS": str(replicas)}


def _failover_under_load(replicas: int, frozen: float, tmp_path) -> dict:
    """Kill the primary under load (after freezing its replicas for ``frozen`` seconds, then
    resuming them as it dies); what the clients were told, and what reached Slack."""
    slack = SlackStandin().start()
    # A primary drops replicas silent for 2 s: what it writes afterwards reaches no replica (the
    # kernel's socket buffers would otherwise hand a frozen replica everything once resumed).
    nodes = Replicated(replicas=2, extra=["--repl-timeout", "2", "--repl-ping-replica-period", "1"]).start()
    sentinels = Sentinels(nodes.primary, down_after_ms=2000).start()
    gateway = Gateway(sentinel_env(sentinels, slack, replicas), log_dir=str(tmp_path)).start()
    try:
        load = Load(gateway.url, "r0")
        load.start()
        time.sleep(1.0)
        for replica in nodes.replicas if frozen else ():
            freeze(replica)
        time.sleep(frozen)
        killed = time.monotonic()
        nodes.primary.stop(kill=True)
        for replica in nodes.replicas if frozen else ():
            thaw(replica)
        new_port, named = sentinels.wait_failover(nodes.primary.port)
        new = next(n for n in nodes.replicas if n.port == new_port)
        wait_for(lambda: Replicated.online(new) >= replicas, 20, what="replicas of the new primary")
        replicating = stop_after_a_202(load)
        accepted = until_delivered(load.answers, slack, 60)
        time.sleep(1.5)
        metrics = gateway.get("/metrics")[1]["_raw"]
    finally:
        gateway.stop()
        sentinels.stop()
        nodes.stop()
        slack.stop()
    sent = delivered(slack)
    after = [a for a in load.answers if a.sent > replicating and a.status == 202]
    return {
        "accepted": len(accepted),
        "answered_503": sum(1 for a in load.answers if a.status == 503),
        **truth(load.answers, sent),
        "lost": sorted(accepted - set(sent)),
        "twice": sorted(t for t, n in sent.items() if n > 1),
        "failover_s": round(named - killed, 2),
        "first_202_after_named_s": round(min(a.answered for a in after) - named, 2),
        "slowest_answer_s": round(max(a.answered - a.sent for a in load.answers), 2),
        "other": sum(1 for a in load.answers if a.status not in (202, 503)),
        "failovers_seen": "notifier_store_failovers_total 1.0" in metrics,
    }


def summary(seen: dict) -> dict:
    """``seen`` with the lists counted, for the test's printed line."""
    return seen | {k: len(v) for k, v in seen.items() if isinstance(v, list)}


@pytest.mark.parametrize("frozen", [0.0, 4.0], ids=["killed", "replicas-frozen-then-killed"])
def test_sentinel_failover_with_one_replica_loses_no_202(frozen, tmp_path):
    seen = _failover_under_load(1, frozen, tmp_path)
    print(f"N=1, replicas frozen {frozen}s: {summary(seen)}")
    assert seen["lost"] == [] and seen["twice"] == [] and seen["other"] == 0, seen
    assert seen["plain_503_delivered"] == [], seen  # every 503 told the truth
    assert seen["accepted"] > 100 and seen["failovers_seen"], seen
    # 503 within NOTIFIER_REDIS_TIMEOUT + 0.5 s (room for a loaded machine); 202 again within 2 s.
    assert seen["slowest_answer_s"] < 1.0 + 0.5 + 0.3, seen
    assert seen["first_202_after_named_s"] < 2.0, seen


def test_sentinel_failover_without_replicas_to_wait_for_can_lose_202s(tmp_path):
    """The negative control: N = 0, the same fault (replicas frozen, then the primary killed)."""
    for attempt in range(2):  # a loss needs the primary to have dropped its replicas before it dies
        (tmp_path / str(attempt)).mkdir()
        seen = _failover_under_load(0, 4.0, tmp_path / str(attempt))
        print(f"N=0, replicas frozen 4s: {summary(seen)}")
        assert seen["plain_503_delivered"] == [], seen  # N = 0 may lose a 202, never lie with a 503
        if seen["lost"]:
            return
    raise AssertionError(f"no loss seen with N=0 in two runs: the control could not show one ({seen})")


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
