"""Shadow mode: limits decided and counted as usual, but every event is still delivered."""

from __future__ import annotations

import time

import pytest
from helpers import Gateway, wait_for
from slack_standin import TOKEN


@pytest.fixture
def gateway(redis_url, slack, tmp_path):
    gw = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_SHADOW": "true",
            "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
            "NOTIFIER_CHANNEL_RATE": "50/1s",
            "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
            "NOTIFIER_CATEGORY_LIMIT": "2/1h",
            "NOTIFIER_DIGEST_INTERVAL": "1s",
        },
        log_dir=str(tmp_path),
    ).start()
    yield gw
    gw.stop()


def test_saturated_limits_still_deliver_and_count_drops(gateway, slack):
    answers = [gateway.post({"category": "db", "text": f"shadow event {i}"}) for i in range(6)]
    assert [a[0] for a in answers] == [202] * 6
    assert [("shadow" in a[1]) for a in answers] == [False, False, True, True, True, True]
    wait_for(lambda: len(slack.texts()) >= 6, 15, what="all six delivered")
    assert all(any(f"shadow event {i}" in t for t in slack.texts()) for i in range(6))

    stats = gateway.get("/v1/stats")[1]
    assert stats["dropped"] == 4 and stats["dropped_by_limit"]["category"] == 4
    metrics = gateway.get("/metrics")[1]["_raw"]
    assert 'notifier_events_total{category="db",outcome="shadow_dropped_category"} 4.0' in metrics
    # The logs hold only what the limits would have admitted.
    assert gateway.get("/v1/limits")[1]["categories"]["db"][0]["used"] == 2
    # Nothing was really suppressed, so no digest is posted, even once the interval (1 s) and
    # the replicas' check for due digests (every 0.5-1 s) have passed.
    time.sleep(4)
    assert not any(t.startswith("Suppressed") for t in slack.texts())
