"""Alert lifecycle in Slack, against real gateway processes, real Redis and the Slack stand-in.

An alert (an event with a ``dedup_key``) is one Slack message for its whole life: repeats
answer ``200 duplicate`` and edit the message in place (``Seen N times``, coalesced, within the
fleet's ``NOTIFIER_UPDATE_RATE``); a resolution answers ``202 resolved``, spends no limit, is a
reply in the message's thread and edits the message to show ``Resolved``. How edits and replies
go out (after the post, Slack's answers to ``chat.update``, through a webhook, on the console,
from a real Prometheus Alertmanager) is in ``test_lifecycle_edits.py``; the helpers both use
are in ``alert_life.py`` (tests/support).
"""

from __future__ import annotations

import time

from alert_life import (
    SEEN,
    _alert,
    _blocks_text,
    _env,
    _fleet,
    _life,
    _metric,
    _one_post,
    _posts,
    _seen,
    _shows,
    _standin,
)
from helpers import wait_for


def _clock(text: str) -> int:
    """Seconds since midnight UTC of the ``last at HH:MM:SS UTC`` in ``text``."""
    match = SEEN.search(text)
    assert match, text
    hours, minutes, seconds = (int(g) for g in match.groups()[1:])
    return hours * 3600 + minutes * 60 + seconds


def _clock_of(unix: float) -> int:
    t = time.gmtime(unix)
    return t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec


def _near(clock: int, unix: float, slack_s: int = 2) -> bool:
    """``clock`` (seconds of the day) within ``slack_s`` of the wall time ``unix``."""
    diff = abs(clock - _clock_of(unix)) % 86400
    return min(diff, 86400 - diff) <= slack_s


# ---------------------------------------------------------------- 1. one alert, one message


def test_repeats_answer_duplicate_and_edit_the_one_message(redis_url, tmp_path):
    with _standin() as slack, _fleet(_env(redis_url, slack), tmp_path) as [gw]:
        status, first, _ = gw.post(_alert("disk-db1", "disk of db1 is full"))
        assert status == 202 and first["status"] == "accepted", first
        post = wait_for(lambda: _one_post(slack, "disk of db1 is full"), 20, what="the alert's post")
        assert post.text.count("Seen") == 0 and not post.edits
        last_sent = 0.0
        for _ in range(4):
            status, body, _ = gw.post(_alert("disk-db1", "disk of db1 is full"))
            last_sent = time.time()
            assert (status, body) == (200, {"status": "duplicate", "id": first["id"]})
        wait_for(lambda: _shows(slack, post.ts, 5), 30, what="the message to read Seen 5 times")
        time.sleep(1.5)  # an edit or post too many would show now

        assert len(_posts(slack, "disk of db1 is full")) == 1, slack.texts()  # no post for the repeats
        assert len(slack.received()) == 1
        message = slack.message(post.ts)
        assert message.channel_id == slack.channel_id("#alerts")
        assert "disk of db1 is full" in message.text and "Seen 5 times, last at " in message.text
        assert "Seen 5 times" in _blocks_text(message.blocks)
        assert _near(_clock(message.text), last_sent), message.text  # with the time of the last one
        # Edited in place: the history only ever counts up, and ends at 5 (coalesced: at most 4 edits).
        counts = [_seen(e.text) for e in message.edits]
        assert 1 <= len(counts) <= 4 and counts == sorted(counts) and counts[-1] == 5, counts
        assert all(u[2] == post.ts for u in slack.updates)
        stats = gw.get("/v1/stats")[1]
        assert stats["accepted"] == 1 and stats["duplicates"] == 4, stats
        assert slack.refusals == [] and slack.throttled == []


# ---------------------------------------------------------------- 2. edits coalesce within the budget


def test_repeats_of_many_alerts_coalesce_within_the_update_budget(redis_url, tmp_path):
    budget, alerts = 40, 30  # NOTIFIER_UPDATE_RATE=40/1m; the stand-in's own limit is above it
    reps = {i: 4 + i % 7 for i in range(alerts)}  # 4..10 repeats each
    with (
        _standin(update_rate=(50, 60)) as slack,
        _fleet(_env(redis_url, slack, NOTIFIER_UPDATE_RATE=f"{budget}/1m"), tmp_path, ("a", "b")) as gws,
    ):
        for i in range(alerts):
            status, body, _ = gws[i % 2].post(_alert(f"storm-{i}", f"alert storm-{i}:"))
            assert status == 202, body
        wait_for(lambda: len(_posts(slack, "alert storm-")) == alerts, 30, what="30 posts")
        posts = {i: _one_post(slack, f"alert storm-{i}:") for i in range(alerts)}
        assert all(posts.values())

        started, repeats_from = time.monotonic(), time.time()
        rounds = max(reps.values())
        for r in range(rounds):  # ~20 s of repeats, from both replicas
            for i in range(alerts):
                if r < reps[i]:
                    status, body, _ = gws[(i + r) % 2].post(_alert(f"storm-{i}", f"alert storm-{i}:"))
                    assert status == 200 and body["status"] == "duplicate", body
            time.sleep(max(0.0, started + 2.0 * (r + 1) - time.monotonic()))
        stopped = time.time()

        def final() -> bool:
            return all(_shows(slack, posts[i].ts, reps[i] + 1) for i in range(alerts))

        wait_for(final, 150, interval=0.5, what="every message to show its final count")
        settled = time.time()
        time.sleep(2)

    updates = [u[0] for u in slack.updates]
    sent_repeats = sum(reps.values())
    per_minute = (len(updates) - 1) / (updates[-1] - updates[0]) * 60 if len(updates) > 1 else 0.0
    print(
        f"\nedit budget {budget}/1m, 2 replicas, {alerts} alerts, {sent_repeats} repeats over "
        f"{stopped - repeats_from:.0f}s: {len(updates)} chat.update calls "
        f"from {updates[0] - slack.received()[0].at:.1f}s to {updates[-1] - slack.received()[0].at:.1f}s "
        f"after the first post; measured {per_minute:.1f} edits/min; most in any 60 s: "
        f"{slack.max_in_window('update', 60)}, any 30 s: {slack.max_in_window('update', 30)}, any 10 s: "
        f"{slack.max_in_window('update', 10)}; final counts shown {settled - stopped:.1f}s after the repeats stopped"
    )
    assert slack.max_in_window("update", 60) <= budget  # the contract: never over NOTIFIER_UPDATE_RATE
    assert slack.max_in_window("update", 30) <= budget // 2  # and no burst in a shorter window either
    assert not slack.throttled, f"the stand-in throttled {len(slack.throttled)} calls: {slack.throttled[:3]}"
    assert slack.refusals == []
    assert len(_posts(slack, "alert storm-")) == alerts and len(slack.received()) == alerts  # repeats never post
    assert len(updates) < sent_repeats  # coalesced
    for i in range(alerts):
        counts = [_seen(e.text) for e in slack.message(posts[i].ts).edits]
        assert counts == sorted(counts) and counts[-1] == reps[i] + 1, (i, counts)


# ---------------------------------------------------------------- 3. resolution: a reply and Resolved


def test_resolution_is_a_reply_in_the_thread_and_edits_the_message(redis_url, tmp_path):
    with _standin() as slack, _fleet(_env(redis_url, slack), tmp_path, ("a", "b")) as [a, b]:
        status, first, _ = a.post(_alert("cpu-web1", "cpu of web1 is hot", severity="warning"))
        assert status == 202, first
        post = wait_for(lambda: _one_post(slack, "cpu of web1 is hot"), 20, what="the alert's post")
        for gw in (a, b):
            assert gw.post(_alert("cpu-web1", "cpu of web1 is hot", severity="warning"))[:2] == (
                200,
                {"status": "duplicate", "id": first["id"]},
            )
        wait_for(lambda: _shows(slack, post.ts, 3), 20, what="Seen 3 times")

        status, body, _ = b.post(_alert("cpu-web1", "cpu of web1 is back to normal", status="resolved"))
        assert (status, body) == (202, {"status": "resolved", "id": first["id"]})
        for gw in (b, a):  # repeats of the resolution
            status, body, _ = gw.post(_alert("cpu-web1", "cpu of web1 is back to normal", status="resolved"))
            assert (status, body) == (200, {"status": "duplicate", "id": first["id"]})

        reply = wait_for(lambda: (slack.replies(post.ts) or [None])[0], 20, what="the reply in the thread")
        wait_for(lambda: _shows(slack, post.ts, 3, resolved=True), 20, what="the message to show Resolved")
        time.sleep(1.5)  # a second reply, or another post, would show now

        assert reply.thread_ts == post.ts and reply.channel_id == post.channel_id
        assert reply.raw.get("thread_ts") == post.ts
        assert "cpu of web1 is back to normal" in reply.text
        assert len(slack.replies(post.ts)) == 1
        assert len(_posts(slack, "cpu of web1")) == 1 and len(slack.received()) == 2
        message = slack.message(post.ts)
        assert "cpu of web1 is hot" in message.text and "Resolved" in message.text
        # Counted in no limit and not in accepted, on either replica.
        for gw in (a, b):
            stats = gw.get("/v1/stats")[1]
            assert stats["accepted"] == 1 and stats["dropped"] == 0 and stats["resolved"] == 1, stats
            limits = gw.get("/v1/limits")[1]
            assert limits["global"][0]["used"] == 1 and limits["categories"]["db"][0]["used"] == 1, limits
        assert _metric(b, "notifier_resolved_total", '{category="db"}') == 1
        assert _metric(a, "notifier_events_total", '{category="db",outcome="accepted"}') == 1
        assert _metric(b, "notifier_events_total", '{category="db",outcome="accepted"}') == 0
        assert slack.refusals == []
        print("\none message's life, as the stand-in recorded it:\n" + _life(slack, post.ts))


def test_resolution_keeps_the_time_of_the_last_repeat(redis_url, tmp_path):
    """``Seen N times`` carries "the time of the last one": a resolution is not one of the N."""
    with _standin() as slack, _fleet(_env(redis_url, slack), tmp_path) as [gw]:
        assert gw.post(_alert("mem-db2", "memory of db2 is low"))[0] == 202
        post = wait_for(lambda: _one_post(slack, "memory of db2 is low"), 20, what="the alert's post")
        assert gw.post(_alert("mem-db2", "memory of db2 is low"))[0] == 200
        repeated = time.time()
        wait_for(lambda: _shows(slack, post.ts, 2), 20, what="Seen 2 times")
        shown = _clock(slack.message(post.ts).text)
        assert _near(shown, repeated), slack.message(post.ts).text
        time.sleep(3.2)  # the resolution comes in another second of the clock
        assert gw.post(_alert("mem-db2", "memory of db2 is fine", status="resolved"))[0] == 202
        resolved = time.time()
        wait_for(lambda: _shows(slack, post.ts, 2, resolved=True), 20, what="Resolved")
        final = slack.message(post.ts).text
        assert _clock(final) == shown, (
            f"the message says the alert was last seen when it was resolved: {final!r} "
            f"(repeat at {time.strftime('%H:%M:%S', time.gmtime(repeated))}, "
            f"resolution at {time.strftime('%H:%M:%S', time.gmtime(resolved))})"
        )


def test_largest_alert_stays_within_block_kit_limits_through_its_life(redis_url, tmp_path):
    # Everything at its maximum, escaped characters everywhere, and the mute button on the message.
    event = {
        "title": "<" * 150,
        "text": "&<>" * 1000,
        "fields": {f"{i:02d}" + "<" * 98: ">" * 1000 for i in range(20)},
        "severity": "critical",
    }
    with (
        _standin() as slack,
        _fleet(_env(redis_url, slack, NOTIFIER_SLACK_SIGNING_SECRET="lifecycle-secret"), tmp_path, ("a", "b")) as gws,
    ):
        status, first, _ = gws[0].post(_alert("big-1", **event))
        assert status == 202, first
        post = wait_for(lambda: _posts(slack, "&amp;&lt;&gt;"), 20, what="the post")[0]
        assert gws[1].post(_alert("big-1", **event))[0] == 200
        wait_for(lambda: _shows(slack, post.ts, 2), 20, what="Seen 2 times")
        assert gws[0].post(_alert("big-1", **event, status="resolved"))[0] == 202
        wait_for(lambda: slack.replies(post.ts), 20, what="the reply")
        wait_for(lambda: _shows(slack, post.ts, 2, resolved=True), 20, what="Resolved")
        assert slack.refusals == [], slack.refusals[0].reason
        assert any(b.get("type") == "actions" for b in slack.message(post.ts).blocks)


# ---------------------------------------------------------------- 4. and 5. resolutions and the limits


def test_resolution_is_admitted_while_both_levels_are_full(redis_url, tmp_path):
    limits = {"NOTIFIER_GLOBAL_LIMIT": "2/1h", "NOTIFIER_CATEGORY_LIMIT": "2/1h"}
    with _standin() as slack, _fleet(_env(redis_url, slack, **limits), tmp_path) as [gw]:
        ids = []
        for n in (1, 2):
            status, body, _ = gw.post(_alert(f"full-{n}", f"replica db{n} lags"))
            assert status == 202, body
            ids.append(body["id"])
        post = wait_for(lambda: _one_post(slack, "replica db1 lags"), 20, what="the first alert's post")
        # Both levels full: new events are refused, with or without a dedup_key, in this category or another
        # (both levels stay full as long: the refusal names the global one, as on any tie).
        for event in (
            {"category": "db", "text": "new one"},
            _alert("full-3", "replica db3 lags"),
            {"category": "web", "text": "elsewhere"},
        ):
            status, body, _ = gw.post(event)
            assert status == 429 and body["limit"] == "global", (event, body)
        status, body, _ = gw.post(_alert("full-1", "replica db1 caught up", status="resolved"))
        assert (status, body) == (202, {"status": "resolved", "id": ids[0]})
        assert gw.post({"category": "db", "text": "still full"})[0] == 429  # it freed nothing either

        reply = wait_for(lambda: (slack.replies(post.ts) or [None])[0], 20, what="the reply")
        assert "replica db1 caught up" in reply.text
        wait_for(lambda: _shows(slack, post.ts, 1, resolved=True), 20, what="Resolved")
        stats = gw.get("/v1/stats")[1]
        assert stats["accepted"] == 2 and stats["dropped"] == 4, stats
        limits = gw.get("/v1/limits")[1]
        assert limits["global"][0]["used"] == 2 and limits["categories"]["db"][0]["used"] == 2, limits
        assert slack.refusals == []


def test_resolution_without_admitted_firing_is_an_ordinary_event(redis_url, tmp_path):
    with _standin() as slack, _fleet(_env(redis_url, slack, NOTIFIER_CATEGORY_LIMIT="1/1h"), tmp_path) as [gw]:
        status, first, _ = gw.post(_alert("never-fired", "queue drained", status="resolved"))
        assert status == 202 and first["status"] == "accepted", first
        post = wait_for(lambda: _one_post(slack, "queue drained"), 20, what="its own message")
        assert post.thread_ts is None and "thread_ts" not in post.raw
        # The limits decide it: a second one in the full category is refused, like any event.
        status, body, _ = gw.post(_alert("never-fired-2", "queue 2 drained", status="resolved"))
        assert status == 429 and body["limit"] == "category", body
        # A firing event whose first try was dropped: its resolution is ordinary too (and refused here).
        assert gw.post(_alert("dropped-firing", "queue 3 stuck"))[0] == 429
        status, body, _ = gw.post(_alert("dropped-firing", "queue 3 drained", status="resolved"))
        assert status == 429 and body["limit"] == "category", body
        time.sleep(1)
        stats = gw.get("/v1/stats")[1]
        assert stats["accepted"] == 1 and stats["dropped"] == 3, stats
        assert len(slack.received()) == 1 and slack.replies(post.ts) == []
        assert slack.refusals == []
