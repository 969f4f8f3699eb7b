"""The webhook against a real Prometheus Alertmanager: 200 even with drops, retries deduplicated."""

from __future__ import annotations

import re

import pytest
from helpers import Gateway, free_port, http, wait_for
from helpers import alertmanager as start_alertmanager
from slack_standin import TOKEN


@pytest.fixture
def gateway(redis_url, slack, tmp_path):
    gw = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
            "NOTIFIER_CHANNEL_RATE": "50/1s",
            "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
            "NOTIFIER_CATEGORY_LIMIT": "2/1h",
            "NOTIFIER_DIGEST_INTERVAL": "0",
        },
        log_dir=str(tmp_path),
    ).start()
    yield gw
    gw.stop()


@pytest.fixture
def alertmanager(gateway, tmp_path):
    with start_alertmanager(gateway.url, tmp_path) as url:
        yield url


def _metric(url: str, name: str) -> float:
    """Sum of a metric of Alertmanager over its webhook series."""
    text = http("GET", url + "/metrics")[1]["_raw"]
    pattern = re.compile(rf'^{name}{{[^}}]*integration="webhook"[^}}]*}} (\S+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


def test_alerts_through_alertmanager(alertmanager, gateway, slack):
    alerts = [
        {
            "labels": {"alertname": "DiskFull", "instance": f"db-{i}", "severity": "critical"},
            "annotations": {"summary": f"disk of db-{i} is full"},
        }
        for i in range(5)
    ]
    assert http("POST", alertmanager + "/api/v2/alerts", alerts)[0] == 200

    stats = wait_for(
        lambda: (lambda s: s if s["accepted"] + s["dropped"] == 5 else None)(gateway.get("/v1/stats")[1]),
        30,
        interval=0.2,
        what="the webhook to reach the gateway",
    )
    assert stats["by_category"]["DiskFull"] == {"accepted": 2, "dropped": 3}
    wait_for(
        lambda: _metric(alertmanager, "alertmanager_notifications_total") >= 1,
        10,
        what="alertmanager to count its notification",
    )
    # Drops did not make Alertmanager see a failure, so it never retries because of them.
    assert _metric(alertmanager, "alertmanager_notifications_failed_total") == 0
    wait_for(lambda: len([t for t in slack.texts() if "DiskFull" in t]) == 2, 10, what="2 deliveries")
    assert all("is full" in t for t in slack.texts() if "DiskFull" in t)

    # Alertmanager resending the same notification (a retry) is deduplicated.
    current = http("GET", alertmanager + "/api/v2/alerts")[1]
    assert len(current) == 5
    resend = {
        "version": "4",
        "status": "firing",
        "receiver": "notifier",
        "groupLabels": {},
        "alerts": [
            {
                "status": "firing",
                "labels": a["labels"],
                "annotations": a["annotations"],
                "startsAt": a["startsAt"],
                "endsAt": a["endsAt"],
                "fingerprint": a["fingerprint"],
            }
            for a in current
        ],
    }
    status, body, _ = gateway.post(resend, path="/v1/alertmanager")
    assert status == 200
    outcomes = sorted(r["status"] for r in body["results"])
    assert outcomes == ["dropped"] * 3 + ["duplicate"] * 2
    after = gateway.get("/v1/stats")[1]["by_category"]["DiskFull"]
    assert after["accepted"] == 2


def test_generator_runbook_and_dashboard_urls_become_link_buttons(alertmanager, gateway, slack):
    """A real Alertmanager's webhook: the rule's generatorURL is `Source`, the annotations `runbook_url`
    and `dashboard_url` are `Runbook` and `Dashboard`; a value Slack would refuse is left out, not the alert."""
    source = "http://prometheus.example:9090/graph?g0.expr=up%3D%3D0&g0.tab=1"
    alerts = [
        {
            "labels": {"alertname": "NodeDown", "instance": "web-1"},
            "annotations": {"summary": "web-1 is down", "runbook_url": "https://runbooks.example/node-down"},
            "generatorURL": source,
        },
        {
            "labels": {"alertname": "NodeDown", "instance": "web-2"},
            "annotations": {"dashboard_url": "https://grafana.example/d/nodes", "runbook_url": "see the wiki"},
        },
    ]
    assert http("POST", alertmanager + "/api/v2/alerts", alerts)[0] == 200

    def links(instance: str):
        message = next((m for m in slack.received() if f"on {instance}" in m.text), None)
        if message is None:
            return None
        return [(e["text"]["text"], e["url"]) for b in message.blocks if b["type"] == "actions" for e in b["elements"]]

    assert wait_for(lambda: links("web-1"), 30, what="web-1's message") == [
        ("Source", source),
        ("Runbook", "https://runbooks.example/node-down"),
    ]
    assert wait_for(lambda: links("web-2"), 10, what="web-2's message") == [
        ("Dashboard", "https://grafana.example/d/nodes")
    ]
    assert slack.refusals == []


def test_store_unreachable_is_503(tmp_path):
    gw = Gateway({"NOTIFIER_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}, log_dir=str(tmp_path)).start(ready=False)
    try:
        payload = {
            "version": "4",
            "status": "firing",
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": "Down"},
                    "annotations": {},
                    "startsAt": "2026-01-01T00:00:00Z",
                    "fingerprint": "abc",
                }
            ],
        }
        status, _, headers = gw.post(payload, path="/v1/alertmanager")
        assert status == 503 and "Retry-After" in headers
        assert gw.post({"alerts": "nope"}, path="/v1/alertmanager")[0] == 422
    finally:
        gw.stop()
