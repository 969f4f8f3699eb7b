"""Windows that hold, not drop (contract: "Quiet hours and maintenance windows"): two replicas, real
Redis, the Slack stand-in. A maintenance window holds its category's events (a critical one passes),
announces its start and end once, and at its end one hand-over per channel carries the right counts,
followed by each still-firing alert once; resolved alerts and plain events are only counted."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from helpers import Gateway, http, slack_env, wait_for

TOKEN = "holding-token-7c2d"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANDOVER = 10.0  # the contract: within 10 s after a window ends
HELD = re.compile(r"^Held during (.+?): (\d+)(?: \((.*)\))?\n(\d+) dropped$")
CHANNELS = {"db": "#db", "web": "#web", "batch": "#db"}


def env_for(redis_url: str, slack, **extra: str) -> dict[str, str]:
    return slack_env(
        redis_url,
        slack,
        NOTIFIER_API_TOKENS=TOKEN,
        NOTIFIER_CATEGORY_CHANNELS=json.dumps(CHANNELS),
        NOTIFIER_CHANNEL_RATE="50/1s",
        **extra,
    )


def start_fleet(env: dict[str, str], log_dir: str, n: int = 2) -> list[Gateway]:
    gateways = [Gateway({**env, "NOTIFIER_REPLICA_ID": f"r{i}"}, log_dir=log_dir) for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda g: g.start(), gateways))
    return gateways


@pytest.fixture
def fleet(redis_url, slack, tmp_path):
    gateways = start_fleet(env_for(redis_url, slack), str(tmp_path))
    yield gateways
    for gateway in gateways:
        gateway.stop()


def held(slack, channel: str) -> list[tuple[str, int, dict[str, int], int]]:
    """The hand-overs posted in ``channel``: (window, N, per category, D)."""
    found = []
    for message in slack.received():
        match = HELD.match(message.text)
        if message.channel == channel and match:
            per = dict(p.rsplit(" ", 1) for p in match.group(3).split(", ")) if match.group(3) else {}
            found.append((match.group(1), int(match.group(2)), {c: int(n) for c, n in per.items()}, int(match.group(4))))
    return found


def in_channel(slack, channel: str, needle: str) -> list:
    return [m for m in slack.received() if m.channel == channel and needle in m.text]


def event(gateway: Gateway, category: str, text: str, **more) -> dict:
    status, body, _ = gateway.post({"category": category, "text": text, **more}, headers=AUTH)
    assert status in (200, 202), body
    return body


def open_window(gateway: Gateway, name: str, **body) -> dict:
    status, window, _ = http("PUT", f"{gateway.url}/v1/windows/{name}", body, AUTH)
    assert status == 200, window
    return window


def end_window(gateway: Gateway, name: str) -> None:
    status, body, _ = http("DELETE", f"{gateway.url}/v1/windows/{name}", None, AUTH)
    assert status == 200, body


def alerts(gateway: Gateway) -> dict[str, dict]:
    status, body, _ = gateway.get("/v1/alerts", AUTH)
    assert status == 200, body
    return {a["dedup_key"]: a for a in body["alerts"]}


def test_a_maintenance_window_holds_and_hands_over_once(fleet, slack):
    first, second = fleet
    open_window(first, "db-upgrade", **{"for": "1h", "categories": ["db"], "note": "pg 17"})
    wait_for(lambda: in_channel(slack, "#db", "db-upgrade started"), HANDOVER, what="the start announcement")
    time.sleep(1.1)  # in force on every replica (the contract: within 1 s)

    for i in range(3):
        event((first, second)[i % 2], "db", f"plain db {i}")
    event(first, "db", "disk full", dedup_key="disk", severity="error")
    assert event(second, "db", "disk full", dedup_key="disk", severity="error")["status"] == "duplicate"
    event(second, "db", "replica lag", dedup_key="lag", severity="warning")
    assert event(first, "db", "replica lag", dedup_key="lag", status="resolved")["status"] == "resolved"
    event(first, "db", "primary down", severity="critical")  # bypasses the window
    event(second, "web", "web is fine")  # another channel: no window
    wait_for(lambda: in_channel(slack, "#db", "primary down"), 5, what="the critical event posted at once")
    wait_for(lambda: in_channel(slack, "#web", "web is fine"), 5, what="the other channel's event")
    time.sleep(1.0)
    assert not [m for m in slack.received() if m.channel == "#db" and ("plain db" in m.text or "disk" in m.text)]
    assert alerts(first)["disk"]["held"] is True and alerts(first)["disk"]["seen"] == 2

    end_window(second, "db-upgrade")
    ended = time.time()
    wait_for(lambda: in_channel(slack, "#db", "disk full"), HANDOVER + 1, what="the held alert posted")
    print(f"\nhand-over {time.time() - ended:.2f} s after the end")
    wait_for(lambda: in_channel(slack, "#db", "db-upgrade ended"), HANDOVER, what="the end announcement")
    time.sleep(1.5)  # anything posted twice would be here by now
    assert held(slack, "#db") == [("db-upgrade", 5, {"db": 5}, 0)]
    assert held(slack, "#web") == []
    posted = in_channel(slack, "#db", "disk full")
    assert len(posted) == 1 and "Seen 2 times" in posted[0].text, [m.text for m in posted]
    assert not in_channel(slack, "#db", "replica lag"), "a resolved held alert is only counted"
    assert len(in_channel(slack, "#db", "db-upgrade started")) == 1
    assert len(in_channel(slack, "#db", "db-upgrade ended")) == 1
    assert "pg 17" in in_channel(slack, "#db", "db-upgrade ended")[0].text
    summary = next(m for m in slack.received() if m.text.startswith("Held during"))
    assert "plain db 2" in json.dumps(summary.blocks), "the latest plain events are quoted"
    assert slack.received().index(summary) < slack.received().index(posted[0]), "the summary comes first"
    assert alerts(second)["disk"]["held"] is False and alerts(second)["disk"]["ts"]
    # After the hand-over, events go on as usual.
    event(first, "db", "after the window")
    wait_for(lambda: in_channel(slack, "#db", "after the window"), 5, what="an event after the window")
    print(slack.life(posted[0].ts))
    print(summary.text)
