"""Digests across two replicas: one per channel per interval, exact counts, every drop in one digest."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Gateway, wait_for
from slack_standin import TOKEN

DIGEST = re.compile(r"^Suppressed (\d+) notifications? in the last (\S+): (.*)$")


def _counts(text: str) -> tuple[int, dict[str, int]]:
    """(N, {category: n}) from a digest text."""
    match = DIGEST.match(text)
    assert match, text
    parts = dict(p.rsplit(" ", 1) for p in match.group(3).split(", "))
    return int(match.group(1)), {c: int(n) for c, n in parts.items()}


@pytest.fixture
def replicas(redis_url, slack, tmp_path):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": "#alerts",
        "NOTIFIER_CATEGORY_CHANNELS": json.dumps({"deploy": "#deploys"}),
        "NOTIFIER_CHANNEL_RATE": "20/1s",
        "NOTIFIER_DIGEST_INTERVAL": "2s",
        "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
        "NOTIFIER_CATEGORY_LIMIT": "1/1h",
    }
    gateways = [Gateway({**env, "NOTIFIER_REPLICA_ID": n}, log_dir=str(tmp_path)).start() for n in "ab"]
    yield gateways
    for gateway in gateways:
        gateway.stop()


def _burst(gateways, categories: list[str]) -> list[int]:
    """Post one event per category name, spread over the replicas concurrently; the statuses."""

    def post(i_cat):
        i, cat = i_cat
        return gateways[i % len(gateways)].post({"category": cat, "text": f"{cat} #{i}"})[0]

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(post, enumerate(categories)))


def _digests(slack, channel: str) -> list[str]:
    return [m.text for m in slack.received() if m.channel == channel and m.text.startswith("Suppressed")]


def test_one_digest_per_channel_per_interval_with_exact_counts(replicas, slack):
    statuses = _burst(replicas, ["error"] * 6 + ["db"] * 4 + ["deploy"] * 5)
    assert statuses.count(202) == 3 and statuses.count(429) == 12
    wait_for(lambda: _digests(slack, "#alerts") and _digests(slack, "#deploys"), 15, what="first digests")
    assert [_counts(t) for t in _digests(slack, "#alerts")] == [(8, {"error": 5, "db": 3})]
    assert [_counts(t) for t in _digests(slack, "#deploys")] == [(4, {"deploy": 4})]

    # A second burst after the first digest goes into the next digest, and only there.
    assert _burst(replicas, ["error"] * 3).count(429) == 3
    wait_for(lambda: len(_digests(slack, "#alerts")) == 2, 15, what="second digest")
    assert _counts(_digests(slack, "#alerts")[1]) == (3, {"error": 3})
    time.sleep(3)  # more than one interval: nothing was dropped, so no further digest
    alerts, deploys = _digests(slack, "#alerts"), _digests(slack, "#deploys")
    assert len(alerts) == 2 and len(deploys) == 1

    stats = replicas[1].get("/v1/stats")[1]
    assert sum(_counts(t)[0] for t in alerts + deploys) == stats["dropped"] == 15
    # Digests are not events: limits and accepted counts are untouched by them.
    assert stats["accepted"] == 3
    assert replicas[0].get("/v1/limits")[1]["global"][0]["used"] == 3
    ordinary = [m for m in slack.received() if not m.text.startswith("Suppressed")]
    assert len(ordinary) == 3
