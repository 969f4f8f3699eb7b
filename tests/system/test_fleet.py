"""Three gateway processes behind a real haproxy, one with its clock an hour off.

The limits must hold for the fleet exactly: the only clock the limiter reads is
Redis ``TIME`` inside the admission script, so a replica whose own clock is
wrong admits exactly what the others would.
"""

from __future__ import annotations

import email.utils
import os
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from fleet import SKEW_SECONDS, Fleet, skewed_clock
from helpers import Gateway, http, wait_for
from slack_standin import TOKEN


@pytest.fixture
def make_fleet(redis_url, slack):
    """Start a fleet with the given limits; everything stops at the end of the test."""
    fleets: list[Fleet] = []

    def make(**limits: str) -> Fleet:
        env = {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
            "NOTIFIER_CHANNEL_RATE": "1000/1s",
            "NOTIFIER_DIGEST_INTERVAL": "0",
            **limits,
        }
        fleet = Fleet(env)
        fleets.append(fleet)
        return fleet.start()

    try:
        yield make
    finally:
        for fleet in fleets:
            fleet.stop()


def test_faketime_really_skews_python():
    """The wrapper the fleet uses moves ``time.time()`` of a Python process by an hour."""
    out = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env={**os.environ, **skewed_clock()},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert abs(time.time() - float(out) - SKEW_SECONDS) < 120


def fire(fleet: Fleet, events: list[dict], workers: int = 48) -> list[tuple[dict, int, dict, float, float]]:
    """POST all events concurrently through the balancer: (event, status, body, sent, answered)."""

    def send(event):
        sent = time.monotonic()
        status, body = fleet.post(event)
        return event, status, body, sent, time.monotonic()

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(send, events))


def replica_events(gateway: Gateway) -> float:
    """How many events this replica decided (its own Prometheus counters)."""
    metrics = http("GET", gateway.url + "/metrics")[1].get("_raw", "")
    return sum(float(v) for v in re.findall(r"^notifier_events_total{[^}]*} (\S+)$", metrics, re.M))


def server_skew(gateway: Gateway) -> float:
    """Seconds the replica's clock is behind ours, from its HTTP ``Date`` header."""
    headers = http("GET", gateway.url + "/healthz")[2]
    return time.time() - email.utils.parsedate_to_datetime(headers["Date"]).timestamp()


def delivered(slack, marker: str) -> list[str]:
    pattern = re.compile(re.escape(marker) + r"-\d+")
    return [m.group() for m in (pattern.search(r.text) for r in slack.received()) if m]


def test_fleet_with_a_skewed_replica_admits_exactly_and_delivers_once(make_fleet, slack):
    fleet = make_fleet(NOTIFIER_GLOBAL_LIMIT="60/30m", NOTIFIER_CATEGORY_LIMIT="10/30m")
    assert abs(server_skew(fleet.skewed) - SKEW_SECONDS) < 120  # the gateway itself runs an hour behind
    assert abs(server_skew(fleet.gateways[0])) < 120

    categories = [f"cat{i}" for i in range(10)]
    # First a burst of one hot category (only its own limit binds), then a burst over the
    # other nine, 9 x 10 > 50 places left: the global level binds.
    hot = [{"category": "cat0", "text": f"fleet-{i} happened"} for i in range(50)]
    answers = fire(fleet, hot)
    assert Counter(status for _, status, *_ in answers) == {202: 10, 429: 40}
    assert {(b["limit"], b["rule"]) for _, status, b, *_ in answers if status == 429} == {("category", "10/30m")}
    rest = [{"category": categories[1 + i % 9], "text": f"fleet-{i} happened"} for i in range(50, 300)]
    answers += fire(fleet, rest)
    statuses = Counter(status for _, status, *_ in answers)
    assert set(statuses) <= {202, 429}, statuses

    accepted = {body["id"]: event for event, status, body, *_ in answers if status == 202}
    per_category = Counter(event["category"] for event in accepted.values())
    assert len(accepted) == 60
    assert max(per_category.values()) <= 10
    assert all(replica_events(g) > 0 for g in fleet.gateways)  # round robin reached every replica

    refused = [(event, body) for event, status, body, *_ in answers if status == 429]
    for event, body in refused:
        assert body["status"] == "dropped" and body["retry_after"] > 0
        if body["limit"] == "category":
            assert body["rule"] == "10/30m" and per_category[event["category"]] == 10
        else:
            assert body["limit"] == "global" and body["rule"] == "60/30m"
    by_limit = Counter(body["limit"] for _, body in refused)
    print(
        f"fleet: 300 sent, {len(accepted)} admitted {dict(sorted(per_category.items()))}, "
        f"refused {dict(by_limit)}, decided per replica {[replica_events(g) for g in fleet.gateways]}"
    )

    # Refusals a replica decided locally reach the shared counters within moments.
    stats = wait_for(
        lambda: (lambda s: s["dropped"] == 240 and s)(fleet.get("/v1/stats")), 5, what="the fleet's drops in /v1/stats"
    )
    assert stats["accepted"] == 60
    assert stats["dropped_by_limit"] == {"global": by_limit["global"], "category": by_limit["category"]}
    assert {c: v["accepted"] for c, v in stats["by_category"].items() if v["accepted"]} == dict(per_category)

    # With the global level full, an event of a category with room is refused by the global rule.
    roomy = next(c for c in categories if per_category[c] < 10)
    status, body = fleet.post({"category": roomy, "text": "one more"})
    assert (status, body["limit"], body["rule"]) == (429, "global", "60/30m")

    wanted = sorted(event["text"].split()[0] for event in accepted.values())
    wait_for(lambda: len(delivered(slack, "fleet")) >= 60, 30, what="60 deliveries")
    time.sleep(0.5)  # a duplicate delivery, if there were one, would arrive by now
    assert sorted(delivered(slack, "fleet")) == wanted  # each admitted event exactly once


def test_sliding_window_holds_across_the_skewed_fleet(make_fleet):
    """``5/2s`` for the fleet: no 6 admitted events can fit in 2 s of Redis time."""
    fleet = make_fleet(NOTIFIER_GLOBAL_LIMIT="5/2s", NOTIFIER_CATEGORY_LIMIT="1000/1h")
    answers = []
    first = None  # when the first admitted request was sent
    i = 0
    # Steady pressure for a little over two windows after the first admission.
    while first is None or time.monotonic() - first < 4.5:
        answers += fire(fleet, [{"category": "tick", "text": f"tick-{i + k}"} for k in range(6)], workers=6)
        i += 6
        first = first or min((sent for _, status, _, sent, _ in answers if status == 202), default=None)
        time.sleep(0.05)
    admitted = sorted((sent, answered) for _, status, _, sent, answered in answers if status == 202)
    refused = [body for _, status, body, *_ in answers if status == 429]
    assert {(b["limit"], b["rule"]) for b in refused} == {("global", "5/2s")}
    assert all(0 <= b["retry_after"] <= 2 for b in refused)  # 0.0: a slot frees within the ms
    # Each event was admitted at some Redis instant between its request and its answer, so six
    # admitted events whose requests all lie within 2 s would prove the window was overrun.
    for k in range(len(admitted) - 5):
        group = admitted[k : k + 6]
        assert max(a for _, a in group) - min(s for s, _ in group) >= 1.99, group
    print(
        f"sliding 5/2s: {len(answers)} sent, {len(admitted)} admitted, "
        f"decided per replica {[replica_events(g) for g in fleet.gateways]}"
    )
    assert len(admitted) >= 10  # the window slid: more than one window's worth got through
    assert replica_events(fleet.skewed) > 0  # the replica an hour behind took its share
