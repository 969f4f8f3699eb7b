"""Durability: a Redis crash sends nothing twice and loses nothing answered 202.

Redis runs with ``appendfsync always`` and is SIGKILLed under load, then restarted on the same
port and data directory, several rounds in a row. Every event answered ``202`` must reach the
Slack stand-in exactly once; an event answered a plain ``503`` never (a request in flight at a
kill, whose script may have run, answers ``503 outcome unknown``). The failover tests hold the
same: plain ``503``s delivered, 0. Here: the crash rounds, ``NOTIFIER_REDIS_MIN_REPLICAS`` and a
Sentinel failover under load (and its control without replicas to wait for); a Redis Cluster's
failover and the deploy Sentinel example are in ``test_durability_failover.py``. The load and
the checks both use are in ``durability_load.py`` (tests/support).
"""

from __future__ import annotations

import time

import pytest
from durability_load import IN_DOUBT, Load, crash_env, delivered, stop_after_a_202, summary, truth, until_delivered
from helpers import Gateway, RedisServer, free_port, slack_env, wait_for
from slack_standin import SlackStandin
from topology import Replicated, Sentinels, freeze, thaw


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


@pytest.mark.parametrize("frozen", [0.0, 4.0], ids=["killed", "replicas-frozen-then-killed"])
def test_sentinel_failover_with_one_replica_loses_no_202(frozen, tmp_path):
    seen = _failover_under_load(1, frozen, tmp_path)
    print(f"N=1, replicas frozen {frozen}s: {summary(seen)}")
    assert seen["lost"] == [] and seen["twice"] == [] and seen["other"] == 0, seen
    assert seen["plain_503_delivered"] == [], seen  # every 503 told the truth
    assert seen["accepted"] > 100 and seen["failovers_seen"], seen
    # 503 within NOTIFIER_REDIS_TIMEOUT + 0.5 s, as the load client sees it (room for its own lag on a
    # loaded machine: 2.22 s seen beside two other test workers; an answer that waited for the frozen
    # replicas would take their 4 s); 202 again within 2 s.
    assert seen["slowest_answer_s"] < 1.0 + 0.5 + 1.0, seen
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
