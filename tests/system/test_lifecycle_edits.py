"""Alert lifecycle in Slack: how edits and replies go out, against real gateway processes and real Redis.

An alert (an event with a ``dedup_key``) is one Slack message for its whole life. Here: changes
made before the post wait for it; Slack's answers to ``chat.update`` (a message it no longer
knows, a rate limit that stops every replica for ``retry_after``); through a webhook there are
no edits, on the console edits and replies are lines of their own; and the same life driven by a
real Prometheus Alertmanager with ``send_resolved: true``. The one message, its repeats and its
resolution are in ``test_lifecycle.py``; the helpers both use in ``alert_life.py`` (tests/support).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from alert_life import _alert, _env, _fleet, _life, _metric, _one_post, _posts, _shows, _standin
from helpers import Gateway, http, wait_for
from helpers import alertmanager as start_alertmanager
from slack_standin import WEBHOOK_CHANNEL_ID


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------- 6. edits and replies wait for the post


def test_changes_before_the_post_wait_for_it(redis_url, tmp_path):
    # A backlog in the channel (paced 1 per 2 s) and two failed posts hold the alert's post back.
    with _standin() as slack, _fleet(_env(redis_url, slack, NOTIFIER_CHANNEL_RATE="1/2s"), tmp_path, ("a", "b")) as gws:
        slack.script((500,), (500,))
        a, b = gws
        for i in range(6):
            assert a.post({"category": "db", "text": f"backlog-{i}"})[0] == 202
        status, first, _ = a.post(_alert("slow-1", "the slow alert"))
        assert status == 202, first
        for gw in (b, a, b):
            assert gw.post(_alert("slow-1", "the slow alert"))[:2] == (200, {"status": "duplicate", "id": first["id"]})
        assert b.post(_alert("slow-1", "the slow alert is gone", status="resolved"))[:2] == (
            202,
            {"status": "resolved", "id": first["id"]},
        )
        # The point of this test: all of it happened while the post was still in the outbox.
        assert _posts(slack, "the slow alert") == [], "the post went out too early for this test"

        post = wait_for(lambda: _one_post(slack, "the slow alert"), 90, what="the alert's post")
        reply = wait_for(lambda: (slack.replies(post.ts) or [None])[0], 60, what="the reply in its thread")
        wait_for(lambda: _shows(slack, post.ts, 4, resolved=True), 60, what="the final state")
        time.sleep(2.5)  # another post, reply or edit would show now

        assert len(_posts(slack, "the slow alert")) == 1
        assert reply.thread_ts == post.ts and "the slow alert is gone" in reply.text
        assert reply.at > post.at
        assert len(slack.replies(post.ts)) == 1
        assert sorted(m.text for m in slack.received() if "backlog-" in m.text) == [
            f":information_source: [info] db: backlog-{i}" for i in range(6)
        ]
        assert [s for _, s in slack.calls].count(500) == 2
        assert slack.max_in_window("post", 1.5, "#alerts") <= 1  # the reply was paced like any message
        assert slack.refusals == []
        print("\na message held back by a backlog and two 500s:\n" + _life(slack, post.ts))


# ---------------------------------------------------------------- 7. and 8. Slack's answers to chat.update


def test_edit_of_a_message_slack_no_longer_knows_is_dropped(redis_url, tmp_path):
    with _standin() as slack, _fleet(_env(redis_url, slack), tmp_path, ("a", "b")) as [a, b]:
        assert a.post(_alert("gone-1", "the vanished alert"))[0] == 202
        post = wait_for(lambda: _one_post(slack, "the vanished alert"), 20, what="the post")
        slack.script_update(("error", "message_not_found"))
        assert b.post(_alert("gone-1", "the vanished alert"))[0] == 200
        wait_for(lambda: slack.update_calls, 20, what="the edit to be tried")
        gone = wait_for(
            lambda: [gw for gw in (a, b) if _metric(gw, "notifier_edits_total", '{outcome="gone"}') == 1],
            10,
            what='notifier_edits_total{outcome="gone"} on the replica that tried',
        )
        time.sleep(6)  # a retry (2 s backoff, or at once) would show by now
        assert [s for _, s in slack.update_calls] == [400], slack.update_calls  # tried once, not again
        assert slack.message(post.ts).edits == []
        assert sum(_metric(gw, "notifier_edits_total", '{outcome="gone"}') for gw in (a, b)) == 1
        assert "Slack no longer knows the message" in gone[0].output()
        # Dropped, not stuck: a later change of the alert edits the message again.
        assert a.post(_alert("gone-1", "the vanished alert"))[0] == 200
        wait_for(lambda: _shows(slack, post.ts, 3), 20, what="the next edit")
        assert slack.refusals == []


def test_rate_limited_edit_stops_every_replica_for_retry_after(redis_url, tmp_path):
    with (
        _standin(update_rate=None) as slack,
        _fleet(_env(redis_url, slack, NOTIFIER_UPDATE_RATE="120/1m"), tmp_path, ("a", "b")) as gws,  # 1 per 0.55 s
    ):
        keys = [f"busy-{i}" for i in range(8)]
        for i, key in enumerate(keys):
            assert gws[i % 2].post(_alert(key, f"busy alert {key}:"))[0] == 202
        wait_for(lambda: len(_posts(slack, "busy alert")) == 8, 20, what="8 posts")
        posts = {key: _one_post(slack, f"busy alert {key}:") for key in keys}
        sent = dict.fromkeys(keys, 1)

        def repeat_all(rounds: int) -> None:
            for r in range(rounds):
                for i, key in enumerate(keys):
                    assert gws[(i + r) % 2].post(_alert(key, f"busy alert {key}:"))[0] == 200
                    sent[key] += 1
                time.sleep(0.4)

        repeat_all(3)  # edits flow from both replicas
        wait_for(lambda: len(slack.update_calls) >= 4, 20, what="edits to flow")
        slack.script_update((429, 3))
        repeat_all(12)  # ~5 s or more of changes: edits are due all along
        limited = wait_for(lambda: [t for t, s in slack.update_calls if s == 429], 20, what="the 429")[0]
        wait_for(lambda: all(_shows(slack, posts[k].ts, sent[k]) for k in keys), 60, what="final counts")

        calls = list(slack.update_calls)
        during = [round(t - limited, 3) for t, s in calls if limited < t < limited + 2.95]
        assert during == [], f"chat.update within Retry-After of the 429: {during}"
        assert [t for t, s in calls if t >= limited + 2.95], "edits never resumed"
        assert sum(_metric(gw, "notifier_edits_total", '{outcome="rate_limited"}') for gw in gws) == 1
        assert all(_metric(gw, "notifier_edits_total", '{outcome="edited"}') > 0 for gw in gws), (
            "both replicas should have been editing"
        )
        assert slack.refusals == []


# ---------------------------------------------------------------- 9. and 10. webhook and console


def test_webhook_shows_no_repeats_and_posts_the_resolution_on_its_own(redis_url, tmp_path):
    with _standin() as slack:
        env = {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_SLACK_WEBHOOK_URL": slack.webhook_url,
            "NOTIFIER_DIGEST_INTERVAL": "0",
            "NOTIFIER_CHANNEL_RATE": "20/1s",
            "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
            "NOTIFIER_CATEGORY_LIMIT": "1/1h",
        }
        with _fleet(env, tmp_path, ("a", "b")) as [a, b]:
            status, first, _ = a.post(_alert("hook-1", "webhook alert fires"))
            assert status == 202, first
            wait_for(lambda: _posts(slack, "webhook alert fires"), 20, what="the post")
            for gw in (a, b, a):
                assert gw.post(_alert("hook-1", "webhook alert fires"))[:2] == (
                    200,
                    {"status": "duplicate", "id": first["id"]},
                )
            assert b.post({"category": "db", "text": "one too many"})[0] == 429  # the category is full
            status, body, _ = b.post(_alert("hook-1", "webhook alert resolves", status="resolved"))
            assert (status, body) == (202, {"status": "resolved", "id": first["id"]})
            assert a.post(_alert("hook-1", "webhook alert resolves", status="resolved"))[:2] == (
                200,
                {"status": "duplicate", "id": first["id"]},
            )
            resolution = wait_for(lambda: _posts(slack, "webhook alert resolves"), 20, what="the resolution")[0]
            time.sleep(2)
            stats = a.get("/v1/stats")[1]

    assert resolution.channel_id == WEBHOOK_CHANNEL_ID and resolution.thread_ts is None
    assert "thread_ts" not in resolution.raw and "Resolved" in resolution.text
    assert len(slack.received()) == 2  # the post and the resolution; the repeats show nowhere
    assert slack.update_calls == [] and slack.updates == []
    assert stats["accepted"] == 1 and stats["dropped"] == 1, stats
    assert slack.refusals == []


def test_console_prints_edits_and_replies_as_lines_of_their_own(tmp_path):
    gw = Gateway({"NOTIFIER_DIGEST_INTERVAL": "0"}, log_dir=str(tmp_path)).start()  # embedded store, console
    try:
        status, first, _ = gw.post(_alert("console-1", "console alert fires"))
        assert status == 202, first
        posted = wait_for(
            lambda: re.search(r"^\[notifier -> (\S+)\] (?!\()(.*console alert fires)$", gw.output(), re.M),
            20,
            what="the post line",
        )
        channel = posted.group(1)
        assert gw.post(_alert("console-1", "console alert fires"))[:2] == (
            200,
            {"status": "duplicate", "id": first["id"]},
        )
        wait_for(lambda: "Seen 2 times" in gw.output(), 20, what="the edit line")
        assert gw.post(_alert("console-1", "console alert ends", status="resolved"))[:2] == (
            202,
            {"status": "resolved", "id": first["id"]},
        )
        wait_for(lambda: re.search(r"\(edit of \S+\) Resolved: ", gw.output()), 20, what="the Resolved edit")
        wait_for(lambda: "console alert ends" in gw.output(), 20, what="the reply line")
    finally:
        gw.stop()
    lines = [line for line in gw.output().splitlines() if line.startswith("[notifier -> ")]
    posts = [line for line in lines if re.match(r"\[notifier -> \S+\] (?!\()", line)]
    edits = [line for line in lines if "(edit of " in line]
    replies = [line for line in lines if "(reply to " in line]
    assert len(posts) == 1 and "console alert fires" in posts[0], lines
    ts = re.search(r"\(reply to (\S+)\)", replies[0]).group(1)
    assert len(replies) == 1 and "console alert ends" in replies[0] and "Resolved" in replies[0], lines
    assert edits and all(f"[notifier -> {channel}] (edit of {ts}) " in line for line in edits), lines
    assert any("console alert fires" in line for line in edits)
    assert edits[-1].split(f"(edit of {ts}) ", 1)[1].startswith("Resolved: ")
    output = gw.output()
    assert "Seen 2 times" in output[output.index(edits[0]) :]  # the count belongs to an edit


def test_console_edits_keep_the_update_budget_and_end_on_the_final_count(tmp_path):
    """In a storm of repeats every flush makes each alert's edit due again; the console shows
    them at ``NOTIFIER_UPDATE_RATE`` as Slack would, coalesced, and the last edit of each has the
    final count (1 + the repeats sent)."""
    env = {"NOTIFIER_DIGEST_INTERVAL": "0", "NOTIFIER_UPDATE_RATE": "2/1s"}  # a slot every 0.55 s
    gw = Gateway(env, log_dir=str(tmp_path)).start()  # embedded store, console
    keys = [f"console-budget-{i}" for i in range(3)]
    try:
        for key in keys:
            assert gw.post(_alert(key, f"{key} fires"))[0] == 202
        wait_for(lambda: all(f"{key} fires" in gw.output() for key in keys), 20, what="the three posts")
        before, started, sent = gw.output().count("(edit of "), time.monotonic(), dict.fromkeys(keys, 0)
        while time.monotonic() - started < 3:
            for key in keys:
                assert gw.post(_alert(key, f"{key} fires"))[0] == 200
                sent[key] += 1
        during = gw.output().count("(edit of ") - before
        elapsed = time.monotonic() - started

        def final_counts() -> bool:  # an edit is its line and the message's next lines ("Seen N times, ...")
            edits = [e for e in re.split(r"^(?=\[notifier -> )", gw.output(), flags=re.M) if "(edit of " in e]
            last = {key: [e for e in edits if f"{key} fires" in e][-1:] for key in keys}
            return all(f"Seen {sent[key] + 1} times" in "".join(last[key]) for key in keys)

        wait_for(final_counts, 30, what="each alert's final count")
    finally:
        gw.stop()
    assert min(sent.values()) > 20, sent  # a storm: many flushes, each making three edits due
    assert during <= elapsed / 0.5 + 1, (during, elapsed)


# ---------------------------------------------------------------- 11. a real Alertmanager


def test_alertmanager_firing_then_resolved_is_one_message_with_a_reply(redis_url, tmp_path):
    with (
        _standin() as slack,
        _fleet(_env(redis_url, slack, NOTIFIER_CATEGORY_LIMIT="5/1h"), tmp_path) as [gw],
        start_alertmanager(gw.url, tmp_path, "'alertname', 'instance'") as am,
    ):
        labels = {"alertname": "QueueStuck", "instance": "mq-1", "severity": "critical"}
        annotations = {"summary": "queue mq-1 is stuck"}
        assert http("POST", am + "/api/v2/alerts", [{"labels": labels, "annotations": annotations}])[0] == 200
        post = wait_for(lambda: _one_post(slack, "queue mq-1 is stuck"), 30, interval=0.2, what="the firing post")
        assert "[FIRING] QueueStuck on mq-1" in post.text

        [current] = http("GET", am + "/api/v2/alerts")[1]
        starts = datetime.fromisoformat(current["startsAt"].replace("Z", "+00:00"))
        wait_for(lambda: datetime.now(timezone.utc) > starts + timedelta(seconds=1.5), 10, what="time to pass")
        ends = datetime.now(timezone.utc) - timedelta(seconds=0.5)
        resolve = [{"labels": labels, "annotations": annotations, "startsAt": current["startsAt"]}]
        resolve[0]["endsAt"] = _utc(ends)  # in the past: resolved
        assert http("POST", am + "/api/v2/alerts", resolve)[0] == 200

        reply = wait_for(lambda: (slack.replies(post.ts) or [None])[0], 30, interval=0.2, what="the resolution reply")
        wait_for(lambda: _shows(slack, post.ts, 1, resolved=True), 30, what="the message to show Resolved")
        time.sleep(2)
        stats = gw.get("/v1/stats")[1]
        resolved = _metric(gw, "notifier_resolved_total", '{category="QueueStuck"}')
        print("\nAlertmanager firing -> resolved, as the stand-in recorded it:\n" + _life(slack, post.ts))

    assert reply.thread_ts == post.ts and "[RESOLVED] QueueStuck on mq-1" in reply.text
    assert len(_posts(slack, "QueueStuck")) == 1 and len(slack.replies(post.ts)) == 1
    assert len(slack.received()) == 2
    assert stats["accepted"] == 1 and stats["dropped"] == 0, stats
    assert resolved == 1
    assert slack.refusals == []
