"""Alerts reopened and listed (the reopen rule of "Alert lifecycle in Slack", ``GET /v1/alerts``),
against real gateway processes, real Redis and the Slack stand-in.

Firing, resolved, firing, resolved is one message with a thread (directly and through a real
Alertmanager); a reopen refused by a full category is a ``429`` and digested. The list of open
alerts: newest first, behind the token, 500 a page with an opaque cursor; through a webhook an
escalation step is a message of its own; the index of open alerts shrinks as windows end.
Acknowledgement and escalation are in ``test_alerts.py``; the helpers both use in
``alert_posts.py`` (tests/support).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from alert_posts import API_TOKEN, AUTH, _alert, _alerts, _env, _post, _steps, _store, _the_post
from helpers import http, replicas, wait_for

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
