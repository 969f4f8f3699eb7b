"""Alerts people act on (contract: "Acknowledge and escalate"), against real gateway processes,
real Redis and the Slack stand-in.

Acknowledgement (a click, over HTTP, from the terminal) and escalation step by step, which an
acknowledgement stops. Reopened alerts and ``GET /v1/alerts`` are in ``test_alerts_open.py``; the
helpers both use in ``alert_posts.py`` (tests/support).

Two replicas wherever the contract speaks of the fleet. Clicks are the requests Slack would send
(form-encoded ``payload``, signed), built from the message as the stand-in shows it.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time

from alert_posts import API_TOKEN, AUTH, SECRET, _alert, _alerts, _env, _post, _steps, _store, _the_post
from helpers import Gateway, http, replicas, wait_for
from slack_standin import SlackStandin, block_actions_payload, signed_action_request

USER = "U0ALICE123"
ACKED = re.compile(r"Acknowledged by <@U0ALICE123> at (\d\d):(\d\d) UTC")
STEP_1, STEP_2 = "<@U0ONCALL1>", "<!subteam^S0LEADS>"
ESCALATION = '{"critical": ["1s <@U0ONCALL1>", "2s <!subteam^S0LEADS>"]}'


def _buttons(message: dict) -> list[dict]:
    found = []
    for block in message.get("blocks") or []:
        if block.get("type") == "actions":
            found += [e for e in block.get("elements") or [] if e.get("type") == "button"]
    return found


def _click(gateway: Gateway, slack: SlackStandin, ts: str, action_id: str, user: str = USER):
    """Click ``action_id`` on message ``ts`` as Slack would: (status, answer, seconds)."""
    message = slack.message_json(ts)
    button = next(b for b in _buttons(message) if b["action_id"] == action_id)
    payload = block_actions_payload(action_id, button["value"], user, slack.channel_id("#alerts"), ts, message)
    body, headers = signed_action_request(SECRET, payload)
    started = time.monotonic()
    status, answer, _ = http("POST", gateway.url + "/v1/slack/actions", body, headers)
    return status, answer, time.monotonic() - started


def _record(redis_url: str, key: str) -> dict[str, str]:
    """The alert's record in the store, found through the dedup_key index."""
    client = _store(redis_url)
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    record = client.hget("notifier:{notifier}:alerts:index", digest)
    return client.hgetall(record) if record else {}


def _store_now(redis_url: str) -> float:
    seconds, micros = _store(redis_url).time()
    return seconds + micros / 1e6


# ---------------------------------------------------------------- acknowledge


def test_click_acknowledges_and_the_message_says_so(redis_url, slack, tmp_path):
    with replicas(_env(redis_url, slack), tmp_path) as [a, b]:
        status, first = _post(a, _alert("disk-db1", "disk of db1 is full"))
        assert status == 202, first
        post = _the_post(slack, "disk of db1 is full")
        message = slack.message_json(post.ts)
        assert _buttons(message)[0]["action_id"] == "ack"  # first of the actions

        status, answer, seconds = _click(b, slack, post.ts, "ack")
        assert status == 200 and seconds < 3, (status, answer, seconds)
        assert (answer["acknowledged_by"], answer["acknowledged_via"]) == (f"<@{USER}>", "slack")

        def shows_ack():
            shown = slack.message_json(post.ts)
            ids = [x["action_id"] for x in _buttons(shown)]
            return ACKED.search(shown["text"]) and ids and ids[0] == "unack" and "ack" not in ids

        wait_for(shows_ack, 20, what="the message to show the acknowledgement")
        hours, minutes = map(int, ACKED.search(slack.message(post.ts).text).groups())
        now = time.gmtime()
        assert abs((now.tm_hour * 60 + now.tm_min) - (hours * 60 + minutes)) % 1440 <= 1
        for gw in (a, b):
            status, listed = _alerts(gw)
            shown = listed["alerts"][0]
            assert status == 200 and (shown["acknowledged_by"], shown["acknowledged_via"]) == (f"<@{USER}>", "slack")

        status, answer, _ = _click(a, slack, post.ts, "unack")
        assert status == 200 and answer["acknowledged_by"] is None, answer
        wait_for(
            lambda: (
                not ACKED.search(slack.message(post.ts).text)
                and _buttons(slack.message_json(post.ts))[0]["action_id"] == "ack"
            ),
            20,
            what="the message without the acknowledgement",
        )
        assert slack.refusals == []


def test_click_on_a_message_whose_alert_is_gone_says_so_and_changes_nothing(redis_url, slack, tmp_path):
    with replicas(_env(redis_url, slack), tmp_path, ("a",)) as [a]:
        assert _post(a, _alert("gone-1", "fan of rack 4 is loud"))[0] == 202
        post = _the_post(slack, "fan of rack 4 is loud")
        wait_for(lambda: _record(redis_url, "gone-1").get("ts"), 10, what="the message identity in the store")
        client = _store(redis_url)
        for key in client.scan_iter("notifier:{notifier}:alert:*"):  # past its window
            client.delete(key)
        stats_before = a.get("/v1/stats")[1]
        status, answer, seconds = _click(a, slack, post.ts, "ack")
        assert status == 200 and seconds < 3 and answer["status"] == "gone", answer
        wait_for(lambda: "no longer open" in slack.message(post.ts).text, 20, what="the message to say so")
        assert a.get("/v1/stats")[1] == stats_before
        assert http("POST", a.url + "/v1/alerts/gone-1/ack", {}, AUTH)[0] == 404


def test_ack_over_http_and_from_the_terminal(redis_url, slack, tmp_path):
    with replicas(_env(redis_url, slack), tmp_path) as [a, b]:
        assert _post(a, _alert("api/ack 1", "queue of jobs is long", severity="error"))[0] == 202
        post = _the_post(slack, "queue of jobs is long")

        assert http("POST", b.url + "/v1/alerts/api%2Fack%201/ack", {"by": "bob"})[0] == 401  # no token
        status, body, _ = http("POST", b.url + "/v1/alerts/api%2Fack%201/ack", {"by": "x" * 65}, AUTH)
        assert status == 422, body
        status, body, _ = http("POST", b.url + "/v1/alerts/api%2Fack%201/ack", {"by": "<!channel> bob"}, AUTH)
        assert status == 200 and body["dedup_key"] == "api/ack 1", body
        assert body["acknowledged_by"] == "<!channel> bob" and abs(body["acknowledged_at"] - time.time()) < 5
        assert body["acknowledged_via"] == "api", body  # not a click: the name is only what the caller wrote
        # Shown on the message, the name escaped: no mention from an API client.
        wait_for(lambda: "Acknowledged by &lt;!channel&gt; bob at" in slack.message(post.ts).text, 20, what="ack")

        status, body, _ = http("DELETE", a.url + "/v1/alerts/api%2Fack%201/ack", None, AUTH)
        assert (status, body["acknowledged_by"], body["acknowledged_at"]) == (200, None, None), body
        status, body, _ = http("POST", a.url + "/v1/alerts/api%2Fack%201/ack", None, AUTH)
        assert status == 200 and body["acknowledged_by"] == "env-1", body  # the author: the token's name
        assert http("POST", a.url + "/v1/alerts/no-such-key/ack", None, AUTH)[0] == 404

        cli = [sys.executable, "-m", "notifier"]
        env = {**os.environ, "NOTIFIER_API_TOKENS": API_TOKEN}
        run = subprocess.run(
            [*cli, "unack", "api/ack 1", "--url", a.url], env=env, capture_output=True, text=True, timeout=30
        )
        assert run.returncode == 0 and "not acknowledged" in run.stdout, run
        run = subprocess.run(
            [*cli, "ack", "api/ack 1", "--by", "carol", "--url", b.url, "--token", API_TOKEN],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert run.returncode == 0 and "acknowledged by carol" in run.stdout and "(via cli)" in run.stdout, run
        wait_for(lambda: "Acknowledged by carol at" in slack.message(post.ts).text, 20, what="the CLI's ack")
        run = subprocess.run(
            [*cli, "ack", "nothing-open", "--url", b.url, "--token", API_TOKEN], capture_output=True, text=True
        )
        assert run.returncode == 1 and "404" in run.stderr, run
        assert slack.refusals == []


# ---------------------------------------------------------------- escalation


def test_unacknowledged_alert_escalates_step_by_step_and_an_acknowledged_one_stops(redis_url, slack, tmp_path):
    env = _env(redis_url, slack, NOTIFIER_ESCALATION=ESCALATION)
    with replicas(env, tmp_path) as [a, b]:
        assert _post(a, _alert("esc-1", "primary db is down"))[0] == 202
        assert _post(b, _alert("esc-2", "replica db is down"))[0] == 202
        assert _post(b, _alert("esc-3", "cache is cold", severity="warning"))[0] == 202  # no steps for warning
        assert _post(a, _alert("esc-4", "search is slow", category="search"))[0] == 202
        loud, quiet = _the_post(slack, "primary db is down"), _the_post(slack, "replica db is down")
        status, body, _ = http("POST", a.url + "/v1/alerts/esc-2/ack", {"by": "dana"}, AUTH)
        assert status == 200, body
        acked_at = time.time()
        status, body, _ = http("PUT", b.url + "/v1/limits/search", {"rules": "0/1h", "for": "1h"}, AUTH)
        assert status == 200, body
        muted_at = time.time()
        hushed = _the_post(slack, "search is slow")

        wait_for(lambda: len(_steps(slack, loud.ts)) == 2, 15, what="two steps in the thread")
        time.sleep(1.5)  # a third, or a repeat, would show now
        steps = _steps(slack, loud.ts)
        assert len(steps) == 2, [s.text for s in steps]
        assert steps[0].text.startswith("Not acknowledged after 1s:") and STEP_1 in steps[0].raw["text"]
        assert steps[1].text.startswith("Not acknowledged after 2s:") and STEP_2 in steps[1].raw["text"]
        # At their times: after the duration since the post, and within the contract's 5 s.
        assert 1.0 <= steps[0].at - loud.at < 5, steps[0].at - loud.at
        assert 2.0 <= steps[1].at - loud.at < 6, steps[1].at - loud.at
        assert all(s.thread_ts == loud.ts for s in steps)
        # The acknowledged one: nothing once the ack was answered (its first step was due 1 s after its post).
        assert acked_at < quiet.at + 1.0, "the ack came after the first step was due: the test proves nothing"
        assert _steps(slack, quiet.ts) == []
        assert muted_at < hushed.at + 1.0, "muted after the step was due: the test proves nothing"
        assert _steps(slack, hushed.ts) == []  # a muted category posts no step
        assert [m for m in slack.received() if "cache is cold" in m.text and m.thread_ts] == []
        listed = {x["dedup_key"]: x for x in _alerts(a)[1]["alerts"]}
        assert listed["esc-1"]["escalations"] == 2 and listed["esc-2"]["escalations"] == 0
        assert slack.refusals == []


def test_ack_50ms_before_a_step_is_due_always_stops_it(redis_url, slack, tmp_path):
    env = _env(redis_url, slack, NOTIFIER_ESCALATION='{"critical": ["2s <@U0ONCALL1>"]}')
    conclusive = 0
    with replicas(env, tmp_path) as [a, b]:
        for attempt in range(6):
            key = f"race-{attempt}"
            assert _post(a, _alert(key, f"race number {attempt} is on"))[0] == 202
            post = _the_post(slack, f"race number {attempt} is on")
            base = wait_for(lambda k=key: _record(redis_url, k).get("eb"), 10, what="the escalation base")
            due = int(base) / 1e6 + 2.0
            # Sleep (by the store's clock) until 50 ms before the due time, then acknowledge.
            time.sleep(max(0.0, due - 0.05 - _store_now(redis_url)))
            gateway = (a, b)[attempt % 2]
            status, body, _ = http("POST", gateway.url + f"/v1/alerts/{key}/ack", None, AUTH)
            assert status == 200, body
            time.sleep(2.0)  # the step would be posted within this
            if body["acknowledged_at"] < due:  # the ack landed before the due time (a loaded machine may miss)
                conclusive += 1
                assert _steps(slack, post.ts) == [], f"attempt {attempt}: a step after an ack before its due time"
    assert conclusive >= 3, f"only {conclusive} acks landed before the due time"


def test_a_replica_killed_with_a_step_in_hand_loses_nothing(redis_url, slack, tmp_path):
    env = _env(redis_url, slack, NOTIFIER_ESCALATION='{"critical": ["1s <@U0ONCALL1>"]}', NOTIFIER_CLAIM_IDLE="2s")
    with replicas(env, tmp_path) as [a, b]:
        assert _post(a, _alert("kill-1", "the whole rack is down"))[0] == 202
        post = _the_post(slack, "the whole rack is down")
        slack.script((500,))  # the step's post fails once: the replica that took it holds it, backing off
        failed = wait_for(
            lambda: next((t for t, s in slack.calls if s == 500), None), 15, what="the step's first, failed post"
        )
        holder = wait_for(  # the failure is counted after Slack's answer is read
            lambda: next(
                (
                    g
                    for g in (a, b)
                    if 'notifier_deliveries_total{outcome="failed"} 1.0' in g.get("/metrics")[1]["_raw"]
                ),
                None,
            ),
            10,
            what="the replica that holds the failed step",
        )
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(5)
        other = b if holder is a else a
        step = wait_for(lambda: (_steps(slack, post.ts) or [None])[0], 5 + 2 + 10, what="the step from the other")
        time.sleep(1.5)
        assert len(_steps(slack, post.ts)) == 1
        assert step.at - failed < 5 + 2 + 3, step.at - failed  # 5 s plus claim_idle, and a slot
        assert other.get("/healthz")[0] == 200
