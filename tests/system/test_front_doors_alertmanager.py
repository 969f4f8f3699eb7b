"""Debian's Alertmanager with ``slack_configs`` pointing at the front doors, as its users set it:
``api_url`` at the incoming-webhook door, and ``api_url`` at ``chat.postMessage`` with the token in
``http_config.authorization`` (what newer Alertmanagers call ``app_url`` and ``app_token``)."""

from __future__ import annotations

import re
import time

from front_doors import start, stats, token
from helpers import alertmanager, http, wait_for

CONFIG = """\
route:
  receiver: hook
  group_by: ['alertname']
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['door="api"']
      receiver: api
receivers:
- name: hook
  slack_configs:
  - api_url: {url}/services/T0000/B0000/{hook_token}
    channel: '#am-hook'
    username: alertmanager-hook
- name: api
  slack_configs:
  - api_url: {url}/api/chat.postMessage
    channel: '#am-api'
    http_config:
      authorization:
        credentials: {api_token}
"""


def _metric(url: str, name: str) -> float:
    """Sum of a metric of Alertmanager over its slack series."""
    text = http("GET", url + "/metrics")[1]["_raw"]
    pattern = re.compile(rf'^{name}{{[^}}]*integration="slack"[^}}]*}} (\S+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


def _alert(name: str, door: str) -> dict:
    return {"labels": {"alertname": name, "door": door}, "annotations": {"summary": f"{name} is on fire"}}


def test_alertmanager_slack_configs_through_both_doors(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path, NOTIFIER_CATEGORY_LIMIT="2/1h", NOTIFIER_DIGEST_INTERVAL="1s")
    config = CONFIG.format(url=gateway.url, hook_token=token("ci"), api_token=token("loud"))
    try:
        with alertmanager(gateway.url, tmp_path, config=config) as url:
            alerts = [_alert(name, "hook") for name in ("DiskFull", "CpuHot", "MemoryLow")]
            assert http("POST", url + "/api/v2/alerts", [*alerts, _alert("QueueStuck", "api")])[0] == 200
            # Four groups, four notifications: the third of the hook's token is refused by its limit (2/1h).
            wait_for(lambda: _metric(url, "alertmanager_notifications_total") >= 4, 30, what="4 notifications")
            counts = wait_for(lambda: (s := stats(gateway))["accepted"] + s["dropped"] == 4 and s, 10)
            assert counts["by_category"]["ci"] == {"accepted": 2, "dropped": 1}
            assert counts["by_category"]["loud"] == {"accepted": 1, "dropped": 0}
            hook = wait_for(lambda: len(posted(slack, "#am-hook")) == 2 and posted(slack, "#am-hook"), 15)
            api = wait_for(lambda: posted(slack, "#am-api"), 15)
            # As Alertmanager sent them: its attachment (title, text, color ...) and username.
            assert all(m.username == "alertmanager-hook" and "[FIRING:1]" in m.attachments[0]["title"] for m in hook)
            assert len(api) == 1 and "QueueStuck" in api[0].attachments[0]["title"]
            assert "QueueStuck is on fire" not in api[0].text  # text stays as sent: the attachment holds it
            wait_for(lambda: any(m.text.startswith("Suppressed 1") for m in slack.received()), 10, what="a digest")
            time.sleep(1)  # a retry would show by now
            assert _metric(url, "alertmanager_notifications_failed_total") == 0
            assert len(posted(slack, "#am-hook")) == 2 and len(posted(slack, "#am-api")) == 1
        log = (tmp_path / "alertmanager.log").read_text()
        assert "level=error" not in log and "Notify" not in log, log
        assert slack.refusals == []
    finally:
        gateway.stop()


def posted(slack, channel: str) -> list:
    """The alerts' messages posted in ``channel`` (digests aside)."""
    return [m for m in slack.received() if m.channel == channel and not m.text.startswith("Suppressed")]
