"""Quiet hours by the store's clock (contract: "Quiet hours and maintenance windows"): Redis runs on a
wall clock the test sets (an LD_PRELOAD library built with cc; the gateways read the store's clock
with TIME, so only Redis is shifted). The clock is moved across a window's start and end, and across
daylight saving changes in the window's zone, both directions; two replicas, the Slack stand-in."""

from __future__ import annotations

import json
import time
from calendar import timegm
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Gateway, RedisServer, ShiftedClock, slack_env, wait_for

TOKEN = "quiet-token-41aa"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANDOVER = 10.0


def utc(text: str) -> float:
    """Unix seconds of ``YYYY-MM-DD HH:MM:SS`` UTC."""
    return float(timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


@pytest.fixture
def clock(tmp_path):
    return ShiftedClock(tmp_path)


@pytest.fixture
def store(clock):
    server = RedisServer(extra=["--jemalloc-bg-thread", "no"], env=clock.env)
    yield server
    server.stop()


def fleet(store: RedisServer, slack, quiet: str, log_dir: str) -> list[Gateway]:
    env = slack_env(
        store.url,
        slack,
        NOTIFIER_API_TOKENS=TOKEN,
        NOTIFIER_CATEGORY_CHANNELS=json.dumps({"db": "#db"}),
        NOTIFIER_QUIET_HOURS=json.dumps({"#db": quiet}),
        NOTIFIER_CHANNEL_RATE="50/1s",
    )
    gateways = [Gateway({**env, "NOTIFIER_REPLICA_ID": f"q{i}"}, log_dir=log_dir) for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda g: g.start(), gateways))
    return gateways


def post(gateway: Gateway, text: str, **more) -> dict:
    """One event, decided at once: a replica notices that the store's clock was set and samples it again."""
    status, answer, _ = gateway.post({"category": "db", "text": text, **more}, headers=AUTH)
    assert status == 202, (status, answer)
    return answer


def posted(slack, needle: str) -> list:
    return [m for m in slack.received() if needle in m.text]


def assert_held(slack, *needles: str) -> None:
    time.sleep(1.0)  # a message not held would be in Slack well within this
    for needle in needles:
        assert not posted(slack, needle), f"{needle!r} was posted during quiet hours"


def run_through(clock, store, slack, tmp_path, quiet: str, steps: list[tuple[str, str]]) -> tuple[list, str]:
    """Set the store's clock to each (UTC time, expectation) in turn and post one event there.

    Expectations: "posted", "held", or "handover" (the window ended: its hand-over comes, then the
    event is posted). Returns the hand-overs posted, and the window's name they must show.
    """
    clock.set(utc(steps[0][0]))
    store.start()
    gateways = fleet(store, slack, quiet, str(tmp_path))
    try:
        for i, (at, expect) in enumerate(steps):
            clock.set(utc(at))
            text = f"event {i} at {at}"
            post(gateways[i % 2], text, **({"dedup_key": f"alert-{i}"} if i % 2 else {}))
            if expect == "held":
                assert_held(slack, text)
            else:
                wait_for(lambda t=text: posted(slack, t), HANDOVER, what=f"{text!r} posted")
        time.sleep(1.0)
        return [m for m in slack.received() if m.text.startswith("Held during")], quiet
    finally:
        for gateway in gateways:
            gateway.stop()


def test_quiet_hours_hold_from_their_start_and_hand_over_at_their_end(clock, store, slack, tmp_path):
    quiet = "22:00-06:00 Europe/Berlin"  # winter: UTC+1
    steps = [
        ("2026-01-14 20:59:50", "posted"),
        ("2026-01-14 21:00:02", "held"),
        ("2026-01-15 04:59:50", "held"),
        ("2026-01-15 05:00:03", "posted"),
    ]
    handovers, name = run_through(clock, store, slack, tmp_path, quiet, steps)
    assert [m.text for m in handovers] == [f"Held during {name}: 2 (db 2)\n0 dropped"]
    alert = posted(slack, "event 1 at")
    assert len(alert) == 1, "the held alert is posted once, after the summary"
    assert slack.received().index(handovers[0]) < slack.received().index(alert[0])


def test_quiet_hours_across_the_spring_change_end_an_hour_early_in_real_time(clock, store, slack, tmp_path):
    # 2026-03-29 in Berlin: 02:00 CET becomes 03:00 CEST. 01:30 CET is 00:30 UTC, 03:30 CEST is 01:30 UTC.
    quiet = "01:30-03:30 Europe/Berlin"
    steps = [
        ("2026-03-29 00:29:55", "posted"),
        ("2026-03-29 00:30:02", "held"),
        ("2026-03-29 01:29:50", "held"),
        ("2026-03-29 01:30:03", "posted"),  # two wall-clock hours, one real hour: it ended
    ]
    handovers, name = run_through(clock, store, slack, tmp_path, quiet, steps)
    assert [m.text for m in handovers] == [f"Held during {name}: 2 (db 2)\n0 dropped"]


def test_quiet_hours_across_the_autumn_change_last_an_hour_longer(clock, store, slack, tmp_path):
    # 2026-10-25 in Berlin: 03:00 CEST becomes 02:00 CET. 00:30 CEST is 22:30 UTC the day before,
    # 04:00 CET is 03:00 UTC: four and a half real hours.
    quiet = "00:30-04:00 Europe/Berlin"
    steps = [
        ("2026-10-24 22:29:55", "posted"),
        ("2026-10-24 22:30:02", "held"),
        ("2026-10-25 02:30:00", "held"),  # 3.5 wall-clock hours have passed, not 3.5 real ones
        ("2026-10-25 03:00:03", "posted"),
    ]
    handovers, name = run_through(clock, store, slack, tmp_path, quiet, steps)
    assert [m.text for m in handovers] == [f"Held during {name}: 2 (db 2)\n0 dropped"]
