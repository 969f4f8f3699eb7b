"""lua/timers.lua and lua/ack.lua decide an escalation step from the alert's record, atomically.

Run on the embedded store (fakeredis with the same Lua), with records written as admit.lua and
settle.lua write them, so each rule of the race is checked without waiting for real due times:
a step is taken only once due, never while (or for a due time within the span) acknowledged,
never for a muted category, never for a resolved alert, and once at most.
"""

from __future__ import annotations

import json
import time

import fakeredis
import pytest

from notifier.delivery.timers import step_args
from notifier.escalation import parse_escalation
from notifier.outbox import EscalationEntry, EventEntry, decode, encode_event
from notifier.store.keys import Keys
from notifier.store.scripts import script_dir

KEYS = Keys("t")
REC = KEYS.record("db", "disk-1")
STEPS = step_args(parse_escalation('{"critical": ["1s <@U0ONCALL1>", "60s <!here>"]}'))


@pytest.fixture
def store():
    client = fakeredis.FakeRedis()
    scripts = {name: client.register_script((script_dir() / f"{name}.lua").read_text()) for name in ("timers", "ack")}
    return client, scripts


def _now_us(client) -> int:
    seconds, micros = client.time()
    return seconds * 1_000_000 + micros


def _alert(client, posted_ago_s: float, severity: str = "critical", **fields: str) -> None:
    """A posted, firing alert whose escalation counts from ``posted_ago_s`` ago, its timer due now."""
    entry = EventEntry("ev1", "db", "#alerts", {"text": "disk full", "severity": severity}, time.time(), REC)
    base = _now_us(client) - int(posted_ago_s * 1e6)
    client.hset(
        REC,
        mapping={
            "id": "ev1",
            "fired": "1",
            "resolved": "0",
            "e": encode_event(entry),
            "eb": base,
            "cid": "C1",
            "ts": "1.000001",
            "ver": 1,
            "shown": 1,
            **fields,
        },
    )
    client.zadd(KEYS.timers, {REC: base + 1_000_000})


def _rebase(client, posted_ago_s: float) -> None:
    """Let time pass: escalation counts from ``posted_ago_s`` ago, and the timer looks then."""
    base = _now_us(client) - int(posted_ago_s * 1e6)
    client.hset(REC, "eb", base)
    client.zadd(KEYS.timers, {REC: base + 1_000_000})


def _step(client, scripts) -> int:
    keys = [KEYS.timers, KEYS.outbox, KEYS.stats, KEYS.overrides, REC]
    return int(scripts["timers"](keys=keys, args=["step", "", *STEPS]))


def _posted(client) -> list[EscalationEntry]:
    entries = [decode(fields) for _, fields in client.xrange(KEYS.outbox)]
    return [e for e in entries if isinstance(e, EscalationEntry)]


def test_a_due_step_is_taken_once_and_the_next_is_scheduled(store):
    client, scripts = store
    _alert(client, posted_ago_s=1.5)
    assert _step(client, scripts) == 1
    assert _step(client, scripts) == 0  # the next step is 60 s away
    [step] = _posted(client)
    assert step.text == "Not acknowledged after 1s: <@U0ONCALL1>" and step.record == REC and step.channel == "#alerts"
    assert client.hget(REC, "esc") == b"1" and client.hget(REC, "escn") == b"1"
    assert int(client.zscore(KEYS.timers, REC)) == int(client.hget(REC, "eb")) + 60_000_000


def test_a_step_not_yet_due_is_not_taken(store):
    client, scripts = store
    _alert(client, posted_ago_s=0.5)
    client.zadd(KEYS.timers, {REC: 0})  # a timer that looks too early: the record decides
    assert _step(client, scripts) == 0 and _posted(client) == []
    assert int(client.zscore(KEYS.timers, REC)) == int(client.hget(REC, "eb")) + 1_000_000


def test_a_step_due_while_acknowledged_is_skipped_for_good(store):
    client, scripts = store
    _alert(client, posted_ago_s=0.5)
    assert scripts["ack"](keys=[REC, KEYS.edits], args=["ack", "<@U1>", "slack"])[0] == 1
    _rebase(client, 1.5)  # time passes: the step is due
    assert _step(client, scripts) == 0 and _posted(client) == []
    assert client.hget(REC, "esc") == b"1"  # skipped; the next step (60 s) goes on
    assert int(client.zscore(KEYS.timers, REC)) == int(client.hget(REC, "eb")) + 60_000_000
    scripts["ack"](keys=[REC, KEYS.edits], args=["unack"])
    assert _step(client, scripts) == 0 and _posted(client) == []  # not posted after the unack either


def test_a_step_due_within_the_last_acknowledged_span_is_skipped(store):
    client, scripts = store
    _alert(client, posted_ago_s=0.0)
    scripts["ack"](keys=[REC, KEYS.edits], args=["ack", "dana", "api"])
    acked_at = int(client.hget(REC, "ack_at"))
    time.sleep(0.2)
    scripts["ack"](keys=[REC, KEYS.edits], args=["unack"])
    client.hset(REC, "eb", acked_at + 100_000 - 1_000_000)  # due 0.1 s into the span
    client.zadd(KEYS.timers, {REC: acked_at + 100_000})
    assert _step(client, scripts) == 0 and _posted(client) == []


def test_after_an_unacknowledgement_a_step_due_later_is_posted(store):
    client, scripts = store
    _alert(client, posted_ago_s=0.2)
    scripts["ack"](keys=[REC, KEYS.edits], args=["ack", "dana", "api"])
    scripts["ack"](keys=[REC, KEYS.edits], args=["unack"])
    _rebase(client, 0.9)  # due 0.1 s after the span ended
    time.sleep(0.15)
    assert _step(client, scripts) == 1


def test_a_resolved_alert_drops_its_timer(store):
    client, scripts = store
    _alert(client, posted_ago_s=1.5, resolved="1")
    assert _step(client, scripts) == 0 and _posted(client) == []
    assert client.zscore(KEYS.timers, REC) is None
    assert scripts["ack"](keys=[REC, KEYS.edits], args=["ack", "dana", "api"]) == [0]  # no open alert


def test_a_muted_category_posts_no_step(store):
    client, scripts = store
    _alert(client, posted_ago_s=1.5)
    until = str(_now_us(client) + 3_600_000_000)
    client.hset(KEYS.overrides, "db", json.dumps({"rules": "0/1h", "until": until, "by": "x", "at": "0"}))
    assert _step(client, scripts) == 0 and _posted(client) == []


def test_a_lapsed_mute_or_an_ordinary_override_does_not_stop_a_step(store):
    client, scripts = store
    _alert(client, posted_ago_s=1.5)
    client.hset(KEYS.overrides, "db", json.dumps({"rules": "0/1h", "until": "1", "by": "x", "at": "0"}))
    client.hset(KEYS.overrides, "db", json.dumps({"rules": "10/1h,100/1d", "until": "", "by": "x", "at": "0"}))
    assert _step(client, scripts) == 1


def test_a_severity_without_steps_drops_its_timer(store):
    client, scripts = store
    _alert(client, posted_ago_s=1.5, severity="warning")
    assert _step(client, scripts) == 0 and client.zscore(KEYS.timers, REC) is None
