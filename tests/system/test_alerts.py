"""Alerts people act on (contract: "Acknowledge and escalate", the reopen rule of "Alert lifecycle
in Slack", ``GET /v1/alerts``), against real gateway processes, real Redis and the Slack stand-in.

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
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from helpers import Gateway, http, replicas, slack_env, wait_for
from slack_standin import SlackStandin, block_actions_payload, signed_action_request

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
API_TOKEN = "api-5c2b0d77e1"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
USER = "U0ALICE123"
ACKED = re.compile(r"Acknowledged by <@U0ALICE123> at (\d\d):(\d\d) UTC")
STEP_1, STEP_2 = "<@U0ONCALL1>", "<!subteam^S0LEADS>"
ESCALATION = '{"critical": ["1s <@U0ONCALL1>", "2s <!subteam^S0LEADS>"]}'


# ---------------------------------------------------------------- helpers


def _env(redis_url: str, slack: SlackStandin, **extra: str) -> dict[str, str]:
    settings = {
        "NOTIFIER_CHANNEL_RATE": "20/1s",
        "NOTIFIER_SLACK_SIGNING_SECRET": SECRET,
        "NOTIFIER_API_TOKENS": API_TOKEN,
        **extra,
    }
    return slack_env(redis_url, slack, **settings)


def _alert(key: str, text: str, status: str = "firing", severity: str = "critical", category: str = "db") -> dict:
    return {"category": category, "text": text, "dedup_key": key, "status": status, "severity": severity}


def _post(gateway: Gateway, body: dict) -> tuple[int, dict]:
    status, answer, _ = gateway.post(body, headers=AUTH)
    return status, answer


def _the_post(slack: SlackStandin, needle: str):
    def found():
        posts = [m for m in slack.received() if m.thread_ts is None and needle in m.text]
        if slack.refusals:
            pytest.fail(f"Slack refused a message: {slack.refusals}")
        return posts[0] if len(posts) == 1 else None

    return wait_for(found, 20, what=f"the post of {needle!r}")


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


def _steps(slack: SlackStandin, ts: str) -> list:
    return [r for r in slack.replies(ts) if "Not acknowledged after" in r.text]


def _alerts(gateway: Gateway, cursor: str | None = None, token: bool = True) -> tuple[int, dict]:
    path = "/v1/alerts" + (f"?cursor={cursor}" if cursor else "")
    status, body, _ = http("GET", gateway.url + path, headers=AUTH if token else {})
    return status, body


def _store(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


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
        holder = next(
            g for g in (a, b) if 'notifier_deliveries_total{outcome="failed"} 1.0' in g.get("/metrics")[1]["_raw"]
        )
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(5)
        other = b if holder is a else a
        step = wait_for(lambda: (_steps(slack, post.ts) or [None])[0], 5 + 2 + 10, what="the step from the other")
        time.sleep(1.5)
        assert len(_steps(slack, post.ts)) == 1
        assert step.at - failed < 5 + 2 + 3, step.at - failed  # 5 s plus claim_idle, and a slot
        assert other.get("/healthz")[0] == 200


# ---------------------------------------------------------------- reopen


def test_firing_resolved_firing_resolved_is_one_message_with_a_thread(redis_url, slack, tmp_path):
    env = _env(redis_url, slack, NOTIFIER_ESCALATION='{"critical": ["1s <@U0ONCALL1>"]}')
    with replicas(env, tmp_path) as [a, b]:
        status, first = _post(a, _alert("flap-1", "link to dc2 is down"))
        assert status == 202, first
        post = _the_post(slack, "link to dc2 is down")
        status, body, _ = http("POST", a.url + "/v1/alerts/flap-1/ack", None, AUTH)
        assert status == 200, body
        assert _post(b, _alert("flap-1", "link to dc2 is up", status="resolved")) == (
            202,
            {"status": "resolved", "id": first["id"]},
        )
        assert _alerts(a)[1]["alerts"] == []  # resolved: no longer open
        # The contract's bound: a replica that knew the alert firing may answer a repeat that comes
        # within 100 ms of a resolution made elsewhere as a duplicate; past it, never.
        time.sleep(0.15)
        assert _post(a, _alert("flap-1", "link to dc2 is down again")) == (
            202,
            {"status": "reopened", "id": first["id"]},
        )
        assert _post(b, _alert("flap-1", "link to dc2 is down again")) == (
            200,
            {"status": "duplicate", "id": first["id"]},
        )
        listed = _alerts(b)[1]["alerts"]
        assert [x["dedup_key"] for x in listed] == ["flap-1"] and listed[0]["acknowledged_by"] is None  # cleared
        # Escalation starts over from the reopening: its step comes in the thread.
        wait_for(lambda: _steps(slack, post.ts), 15, what="the reopened alert's step")
        assert _post(b, _alert("flap-1", "link to dc2 is up", status="resolved")) == (
            202,
            {"status": "resolved", "id": first["id"]},
        )

        def heads() -> list[str]:
            """The thread's replies (the escalation step aside), by their heads."""
            texts = [r.text for r in slack.replies(post.ts) if "Not acknowledged" not in r.text]
            return [t.split(":")[2].strip() for t in texts]

        wait_for(lambda: len(heads()) == 3, 20, what="three replies")
        wait_for(lambda: slack.message(post.ts).text.startswith("Resolved: "), 20, what="the message resolved")
        time.sleep(1.0)
        assert heads() == ["Resolved", "Firing again", "Resolved"], heads()
        assert "Reopened 1 time" in slack.message(post.ts).text
        assert len([m for m in slack.received() if m.thread_ts is None and "link to dc2" in m.text]) == 1
        stats = a.get("/v1/stats")[1]
        assert stats["accepted"] == 2 and stats["reopened"] == 1 and stats["resolved"] == 2, stats
        assert slack.refusals == []
        print("\none alert's life, as the stand-in recorded it:\n" + slack.life(post.ts))


def test_firing_resolved_firing_resolved_through_alertmanager(redis_url, slack, tmp_path):
    with replicas(_env(redis_url, slack), tmp_path, ("a",)) as [a]:

        def payload(status: str) -> dict:
            alert = {
                "status": status,
                "labels": {"alertname": "LinkDown", "instance": "dc2"},
                "annotations": {"summary": "link to dc2"},
                "startsAt": "2026-11-24T12:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-24T12:05:00Z",
                "generatorURL": "http://prometheus/graph",
                "fingerprint": "3f2a9c0d1e4b5a6c",
            }
            return {
                "version": "4",
                "groupKey": "{}:{}",
                "status": status,
                "receiver": "notifier",
                "groupLabels": {},
                "commonLabels": {},
                "commonAnnotations": {},
                "externalURL": "http://alertmanager",
                "alerts": [alert],
            }

        outcomes = []
        for status in ("firing", "resolved", "firing", "resolved"):
            code, body, _ = a.post(payload(status), path="/v1/alertmanager", headers=AUTH)
            assert code == 200, body
            outcomes.append(body["results"][0]["status"])
            if status == "firing" and not outcomes[:-1]:
                post = _the_post(slack, "LinkDown")
        assert outcomes == ["accepted", "resolved", "reopened", "resolved"]
        wait_for(lambda: len(slack.replies(post.ts)) == 3, 20, what="three replies")
        heads = [r.text.split(":")[2].strip() for r in slack.replies(post.ts)]
        assert heads == ["Resolved", "Firing again", "Resolved"], heads
        assert len([m for m in slack.received() if m.thread_ts is None]) == 1


def test_a_reopen_refused_by_a_full_category_is_a_429_and_digested(redis_url, slack, tmp_path):
    env = _env(redis_url, slack, NOTIFIER_CATEGORY_LIMIT="1/1h", NOTIFIER_DIGEST_INTERVAL="1s")
    with replicas(env, tmp_path, ("a",)) as [a]:
        assert _post(a, _alert("full-1", "disk of web3 is full"))[0] == 202
        post = _the_post(slack, "disk of web3 is full")
        assert _post(a, _alert("full-1", "disk of web3 is fine", status="resolved"))[0] == 202
        status, body = _post(a, _alert("full-1", "disk of web3 is full again"))
        assert status == 429 and body["limit"] == "category" and body["rule"] == "1/1h", body
        wait_for(lambda: any("Suppressed 1" in m.text for m in slack.received()), 20, what="the digest")
        stats = a.get("/v1/stats")[1]
        assert stats["accepted"] == 1 and stats["dropped"] == 1 and stats.get("reopened", 0) == 0, stats
        wait_for(lambda: len(slack.replies(post.ts)) == 1, 20, what="the resolution")
        time.sleep(1.0)
        assert len(slack.replies(post.ts)) == 1  # no Firing again


# ---------------------------------------------------------------- the list


def test_open_alerts_page_newest_first_and_need_the_token(redis_url, slack, tmp_path):
    with replicas(_env(redis_url, slack, NOTIFIER_CHANNEL_RATE="1000/1s"), tmp_path) as [a, b]:
        for i in range(12):
            assert _post((a, b)[i % 2], _alert(f"list-{i:02d}", f"host {i} is down", severity="warning"))[0] == 202
        assert _post(a, _alert("list-03", "host 3 is up", status="resolved"))[0] == 202
        assert _alerts(a, token=False)[0] == 401

        # Pages of at most 500 come from the gateway; here its order and cursor, on a small index.
        status, page = _alerts(b)
        assert status == 200 and page["cursor"] is None, page
        keys = [x["dedup_key"] for x in page["alerts"]]
        assert keys == [f"list-{i:02d}" for i in range(11, -1, -1) if i != 3], keys
        first = page["alerts"][0]
        assert {
            "category",
            "severity",
            "text",
            "first_seen",
            "last_seen",
            "seen",
            "acknowledged_by",
            "acknowledged_at",
            "acknowledged_via",
            "escalations",
            "held",
            "channel",
            "ts",
        } <= set(first)
        assert first["held"] is False and first["seen"] == 1 and first["text"] == "host 11 is down"
        assert http("GET", a.url + "/v1/alerts?cursor=nonsense", headers=AUTH)[0] == 400


def test_open_alerts_come_500_a_page_with_an_opaque_cursor(redis_url, tmp_path):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,  # the console sink: 1,100 alerts need no Slack here
        "NOTIFIER_API_TOKENS": API_TOKEN,
        "NOTIFIER_GLOBAL_LIMIT": "100000/1h",
        "NOTIFIER_CATEGORY_LIMIT": "100000/1h",
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }
    with replicas(env, tmp_path) as [a, b]:

        def send(i: int) -> int:
            return _post((a, b)[i % 2], _alert(f"page-{i:04d}", f"host {i} is down", severity="info"))[0]

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(send, range(1100))) == {202}
        for i in range(0, 1100, 100):  # resolved: no longer open
            assert _post(a, _alert(f"page-{i:04d}", "fine", status="resolved"))[0] == 202
        pages, cursor = [], None
        while True:
            status, page = _alerts((a, b)[len(pages) % 2], cursor)
            assert status == 200 and len(page["alerts"]) <= 500, (status, len(page.get("alerts", [])))
            pages.append(page["alerts"])
            cursor = page["cursor"]
            if cursor is None:
                break
        keys = [x["dedup_key"] for page in pages for x in page]
        assert len(pages) >= 3 and len(pages[0]) == 500
        assert sorted(keys) == sorted(f"page-{i:04d}" for i in range(1100) if i % 100), len(keys)
        firsts = [x["first_seen"] for page in pages for x in page]
        assert firsts == sorted(firsts, reverse=True)
        assert http("GET", a.url + "/v1/alerts?cursor=" + "A" * 5000, headers=AUTH)[0] == 400


def test_through_a_webhook_a_step_is_a_message_of_its_own(redis_url, slack, tmp_path):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_SLACK_WEBHOOK_URL": slack.webhook_url,
        "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
        "NOTIFIER_CATEGORY_LIMIT": "1000/1h",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_ESCALATION": '{"critical": ["1s <@U0ONCALL1>"]}',
    }
    with replicas(env, tmp_path) as [a, _b]:
        assert a.post(_alert("hook-1", "the vpn is down"))[0] == 202
        step = wait_for(
            lambda: next((m for m in slack.received() if m.text.startswith("Not acknowledged after 1s:")), None),
            15,
            what="the step as a message",
        )
        time.sleep(1.5)
        assert "<@U0ONCALL1>" in step.raw["text"] and "the vpn is down" in step.text
        assert len([m for m in slack.received() if "Not acknowledged" in m.text]) == 1
        assert slack.refusals == []


def test_the_open_alert_index_shrinks_as_windows_end(redis_url, tmp_path):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
        "NOTIFIER_CATEGORY_LIMIT": "1000/2s",  # an alert's record lasts 2 s
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }
    client = _store(redis_url)
    index = ["notifier:{notifier}:alerts:open", "notifier:{notifier}:alerts:ends"]
    with replicas(env, tmp_path, ("a",)) as [a]:
        for i in range(20):
            assert a.post(_alert(f"short-{i}", f"blip {i}"))[0] == 202
        assert client.zcard(index[0]) == 20 and client.hlen("notifier:{notifier}:alerts:index") == 20
        wait_for(
            lambda: sum(client.zcard(k) for k in index) + client.hlen("notifier:{notifier}:alerts:index") == 0,
            10,
            what="the index to empty once the windows ended",
        )
        assert a.get("/v1/alerts")[1] == {"alerts": [], "cursor": None}
