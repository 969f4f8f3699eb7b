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
from helpers import Gateway, RedisServer, http, slack_env, wait_for

TOKEN = "holding-token-7c2d"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANDOVER = 10.0  # the contract: within 10 s after a window ends
HELD = re.compile(r"^Held during (.+?): (\d+)(?: \((.*)\))?\n(\d+) dropped$")
CHANNELS = {"db": "#db", "web": "#web", "batch": "#db"}


def env_for(redis_url: str, slack, **extra: str) -> dict[str, str]:
    mine = {"NOTIFIER_API_TOKENS": TOKEN, "NOTIFIER_CATEGORY_CHANNELS": json.dumps(CHANNELS)}
    return slack_env(redis_url, slack, **{**mine, "NOTIFIER_CHANNEL_RATE": "50/1s", **extra})


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
            counts = {c: int(n) for c, n in per.items()}
            found.append((match.group(1), int(match.group(2)), counts, int(match.group(4))))
    return found


def in_channel(slack, channel: str, needle: str) -> list:
    return [m for m in slack.received() if m.channel == channel and needle in m.text]


def event(gateway: Gateway, category: str, text: str, **more) -> dict:
    status, body, _ = gateway.post({"category": category, "text": text, **more}, headers=AUTH)
    assert status in (200, 202), body
    return body


def open_window(gateway: Gateway, name: str, **body) -> dict:
    body = body if "end" in body or "for" in body else {**body, "for": "1h"}
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
    open_window(second, "db-upgrade", **{"for": "2h", "categories": ["db"], "note": "pg 17"})  # changed, not again
    time.sleep(1.1)  # in force on every replica (the contract: within 1 s)

    for i in range(3):
        event((first, second)[i % 2], "db", f"plain db {i}")
    event(first, "db", "disk full", dedup_key="disk", severity="error")
    assert event(second, "db", "disk full", dedup_key="disk", severity="error")["status"] == "duplicate"
    event(second, "db", "replica lag", dedup_key="lag", severity="warning")
    assert event(first, "db", "replica lag", dedup_key="lag", status="resolved")["status"] == "resolved"
    event(first, "db", "flapping", dedup_key="flap")
    assert event(second, "db", "flapping", dedup_key="flap", status="resolved")["status"] == "resolved"
    assert event(first, "db", "flapping", dedup_key="flap")["status"] == "reopened"  # firing again: one alert
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
    assert held(slack, "#db") == [("db-upgrade", 6, {"db": 6}, 0)]
    assert held(slack, "#web") == []
    posted = in_channel(slack, "#db", "disk full")
    assert len(posted) == 1 and "Seen 2 times" in posted[0].text, [m.text for m in posted]
    assert not in_channel(slack, "#db", "replica lag"), "a resolved held alert is only counted"
    flapping = [m for m in slack.received() if "flapping" in m.text]
    assert len(flapping) == 1 and "Reopened 1 time" in flapping[0].text, [m.text for m in flapping]
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


def wait_posted(gateway: Gateway, body: dict, timeout: float = 10.0) -> dict:
    """Post until the gateway decides (a 503 while the store is away or its clock was just set changes nothing)."""

    def attempt():
        status, answer, _ = gateway.post(body, headers=AUTH)
        return answer if status in (200, 202) else None

    return wait_for(attempt, timeout, interval=0.2, what=f"an answer to {body}")


def test_a_replica_killed_during_the_hand_over_loses_and_duplicates_nothing(redis_url, slack, tmp_path):
    env = env_for(redis_url, slack, NOTIFIER_CLAIM_IDLE="2s", NOTIFIER_CHANNEL_RATE="2/1s")
    first, second = start_fleet(env, str(tmp_path))
    try:
        open_window(first, "failover", channels=["#db"])
        time.sleep(1.1)
        for i in range(8):
            event((first, second)[i % 2], "db", f"still wrong {i}", dedup_key=f"k{i}")
        event(first, "db", "gone again", dedup_key="gone")
        event(second, "db", "gone again", dedup_key="gone", status="resolved")
        end_window(second, "failover")
        wait_for(lambda: held(slack, "#db"), HANDOVER, what="the hand-over's summary")
        first.stop(kill=True)  # in the middle: the held alerts wait for their pace slots
        assert len([m for m in slack.received() if "still wrong" in m.text]) < 8, "killed too late to tell"
        wait_for(
            lambda: len({m.text for m in slack.received() if "still wrong" in m.text}) == 8,
            HANDOVER + 2 + 8,
            what="every still-firing alert posted",
        )
        time.sleep(2.5)  # a claim of the dead replica taken over twice would show by now
        texts = [m.text.split("\n")[0] for m in slack.received() if "still wrong" in m.text]
        assert sorted(texts) == sorted(set(texts)), texts
        assert held(slack, "#db") == [("failover", 9, {"db": 9}, 0)]
        assert not in_channel(slack, "#db", "gone again")
    finally:
        first.stop()
        second.stop()


def test_a_window_over_a_muted_category_counts_its_drops_in_the_hand_over(redis_url, slack, tmp_path):
    env = env_for(redis_url, slack, NOTIFIER_DIGEST_INTERVAL="1s")
    first, second = start_fleet(env, str(tmp_path))
    try:
        status, body, _ = http("PUT", f"{first.url}/v1/limits/db", {"rules": "0/1h"}, AUTH)
        assert status == 200, body
        open_window(second, "quiet-db", channels=["#db"])
        time.sleep(1.1)
        statuses = [g.post({"category": "db", "text": "muted"}, headers=AUTH)[0] for g in (first, second) * 3]
        assert statuses == [429] * 6
        event(first, "batch", "batch ran")  # same channel, not muted: held
        event(second, "batch", "batch ran again")
        time.sleep(2.5)  # a digest would be due by now
        assert not in_channel(slack, "#db", "Suppressed"), "the channel's digest is folded into the hand-over"
        end_window(first, "quiet-db")
        wait_for(lambda: held(slack, "#db"), HANDOVER, what="the hand-over")
        time.sleep(2.5)
        assert held(slack, "#db") == [("quiet-db", 2, {"batch": 2}, 6)]
        assert not in_channel(slack, "#db", "Suppressed")
        assert not in_channel(slack, "#db", "muted")
    finally:
        first.stop()
        second.stop()


def test_an_alert_posted_before_the_window_and_resolved_during_it_gets_its_reply(fleet, slack):
    first, second = fleet
    event(first, "db", "cpu hot", dedup_key="cpu")
    root = wait_for(lambda: in_channel(slack, "#db", "cpu hot"), 5, what="the alert's post")[0]
    open_window(second, "later-db", categories=["db"])
    time.sleep(1.1)
    assert event(second, "db", "cpu hot", dedup_key="cpu", status="resolved")["status"] == "resolved"
    wait_for(lambda: slack.replies(root.ts), 5, what="the resolution in the alert's thread")
    event(first, "db", "held meanwhile")
    end_window(first, "later-db")
    wait_for(lambda: held(slack, "#db"), HANDOVER, what="the hand-over")
    assert held(slack, "#db") == [("later-db", 1, {"db": 1}, 0)]
    assert len([m for m in slack.received() if "cpu hot" in m.text]) == 2  # the post and its reply, nothing more


def test_a_window_that_ends_while_the_store_is_down_hands_over_once_it_is_back(slack, tmp_path):
    store = RedisServer(extra=["--appendonly", "yes", "--appendfsync", "always"]).start()
    first = second = None
    try:
        first, second = start_fleet(env_for(store.url, slack, NOTIFIER_CLAIM_IDLE="2s"), str(tmp_path))
        end = time.time() + 4
        open_window(first, "short", channels=["#db"], end=end)
        time.sleep(1.1)
        event(first, "db", "held 1")
        event(second, "db", "flapping", dedup_key="flap")
        store.stop()
        time.sleep(max(0.0, end - time.time()) + 3)
        assert not held(slack, "#db")
        store.start()
        back = time.time()
        wait_for(lambda: held(slack, "#db"), HANDOVER + 2, what="the hand-over once the store is back")
        wait_for(lambda: in_channel(slack, "#db", "flapping"), 5, what="the held alert")
        print(f"\nhanded over {time.time() - back:.2f} s after the store came back")
        time.sleep(1.5)
        assert held(slack, "#db") == [("short", 2, {"db": 2}, 0)]
        assert len(in_channel(slack, "#db", "flapping")) == 1
    finally:
        for gateway in (first, second):
            if gateway:
                gateway.stop()
        store.stop()


def test_a_held_alerts_escalation_starts_when_it_is_posted_and_its_acknowledgement_shows(redis_url, slack, tmp_path):
    escalation = json.dumps({"error": ["2s <@U0LEAD>"], "warning": ["2s <@U0LEAD>"]})
    first, second = start_fleet(env_for(redis_url, slack, NOTIFIER_ESCALATION=escalation), str(tmp_path))
    try:
        open_window(first, "night", channels=["#db"])
        time.sleep(1.1)
        event(first, "db", "queue stuck", dedup_key="stuck", severity="error")
        event(second, "db", "queue stuck", dedup_key="stuck", severity="error", status="resolved")
        assert event(first, "db", "queue stuck", dedup_key="stuck", severity="error")["status"] == "reopened"
        event(second, "db", "slow disk", dedup_key="slow", severity="warning")
        status, body, _ = http("POST", f"{second.url}/v1/alerts/slow/ack", {"by": "alice"}, AUTH)
        assert status == 200, body
        time.sleep(3.0)  # a step due 2 s after the event would be out by now
        assert not [m for m in slack.received() if "Not acknowledged" in m.text], "no escalation while held"
        end_window(second, "night")
        stuck = wait_for(lambda: in_channel(slack, "#db", "queue stuck"), HANDOVER, what="the held alert")[0]
        slow = wait_for(lambda: in_channel(slack, "#db", "slow disk"), 5, what="the acknowledged alert")[0]
        assert "Acknowledged by alice" in slow.text, slow.text
        step = wait_for(lambda: slack.replies(stuck.ts), 6, what="the escalation step in its thread")[0]
        assert step.text.startswith("Not acknowledged after 2s"), step.text
        assert step.at - stuck.at >= 1.9, "escalation counts from the post, not from the event"
        time.sleep(1.0)
        assert not slack.replies(slow.ts), "an acknowledged alert does not escalate"
    finally:
        first.stop()
        second.stop()


def test_a_window_opened_again_after_its_end_starts_when_asked_and_is_announced_again(fleet, slack):
    first, second = fleet
    open_window(first, "again", channels=["#db"], note="first time")
    wait_for(lambda: in_channel(slack, "#db", "again started"), HANDOVER, what="the first start")
    end_window(second, "again")
    wait_for(lambda: in_channel(slack, "#db", "again ended"), HANDOVER, what="the first end")
    window = open_window(first, "again", channels=["#db"], start=time.time() + 2, note="second time")
    assert window["in_force"] is False, window  # not the old start: that window had ended
    time.sleep(1.1)
    event(second, "db", "between the windows")
    wait_for(lambda: in_channel(slack, "#db", "between the windows"), 5, what="an event before the new start")
    wait_for(lambda: len(in_channel(slack, "#db", "again started")) == 2, HANDOVER, what="the second start")
    assert "second time" in in_channel(slack, "#db", "again started")[1].text


def test_a_window_over_two_channels_hands_over_once_in_each(fleet, slack):
    first, second = fleet
    open_window(first, "both", categories=["db", "web"], note="network work")
    wait_for(lambda: in_channel(slack, "#web", "both started"), HANDOVER, what="the start in #web")
    time.sleep(1.1)
    for i in range(4):
        event((first, second)[i % 2], "db" if i < 3 else "web", f"two channels {i}")
    event(second, "batch", "batch shares #db")  # not the window's category: its channel is not held
    wait_for(lambda: in_channel(slack, "#db", "batch shares"), 5, what="the other category's event")
    end_window(second, "both")
    wait_for(lambda: held(slack, "#db") and held(slack, "#web"), HANDOVER, what="both hand-overs")
    time.sleep(1.5)
    assert held(slack, "#db") == [("both", 3, {"db": 3}, 0)]
    assert held(slack, "#web") == [("both", 1, {"web": 1}, 0)]
    assert [len(in_channel(slack, c, "both started")) for c in ("#db", "#web")] == [1, 1]
    assert [len(in_channel(slack, c, "both ended")) for c in ("#db", "#web")] == [1, 1]
    assert not [m for m in slack.received() if m.text.startswith(":information_source:") and "two channels" in m.text]
