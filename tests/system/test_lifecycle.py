"""Alert lifecycle in Slack, against real gateway processes, real Redis and the Slack stand-in.

An alert (an event with a ``dedup_key``) is one Slack message for its whole life: repeats
answer ``200 duplicate`` and edit the message in place (``Seen N times``, coalesced, within the
fleet's ``NOTIFIER_UPDATE_RATE``); a resolution answers ``202 resolved``, spends no limit, is a
reply in the message's thread and edits the message to show ``Resolved``. Through a webhook
there are no edits; on the console, edits and replies are lines of their own. Last, the same
life driven by a real Prometheus Alertmanager with ``send_resolved: true``.
"""

from __future__ import annotations

import contextlib
import re
import time
from datetime import datetime, timedelta, timezone

from helpers import Gateway, http, replicas, slack_env, wait_for
from helpers import alertmanager as start_alertmanager
from slack_standin import WEBHOOK_CHANNEL_ID, SlackStandin

SEEN = re.compile(r"Seen (\d+) times, last at (\d\d):(\d\d):(\d\d) UTC")


# ---------------------------------------------------------------- helpers


def _fleet(env: dict[str, str], tmp_path, names=("a",)):
    """One gateway (replica "a") unless more are named."""
    return replicas(env, tmp_path, names)


def _env(redis_url: str, standin: SlackStandin, **extra: str) -> dict[str, str]:
    return slack_env(redis_url, standin, **{"NOTIFIER_CHANNEL_RATE": "20/1s", **extra})


@contextlib.contextmanager
def _standin(**kwargs):
    standin = SlackStandin(**kwargs).start()
    try:
        yield standin
    finally:
        standin.stop()


def _alert(key: str, text: str, category: str = "db", status: str | None = None, **extra) -> dict:
    body = {"category": category, "text": text, "dedup_key": key, **extra}
    if status:
        body["status"] = status
    return body


def _posts(standin: SlackStandin, needle: str) -> list:
    """Top-level messages (not thread replies) whose text holds ``needle``."""
    return [m for m in standin.received() if m.thread_ts is None and needle in m.text]


def _one_post(standin: SlackStandin, needle: str):
    posts = _posts(standin, needle)
    return posts[0] if len(posts) == 1 else None


def _blocks_text(blocks: list) -> str:
    """Every text of a message's blocks, one per line."""
    out = []
    for block in blocks:
        if isinstance(block.get("text"), dict):
            out.append(block["text"]["text"])
        for element in block.get("elements") or []:
            text = element.get("text", "") if isinstance(element, dict) else ""
            out.append(text.get("text", "") if isinstance(text, dict) else text)  # a button's text is an object
        out += [f.get("text", "") for f in block.get("fields") or []]
    return "\n".join(out)


def _seen(text: str) -> int:
    """N of ``Seen N times`` (1 when the message does not say it)."""
    match = SEEN.search(text)
    return int(match.group(1)) if match else 1


def _shows(standin: SlackStandin, ts: str, seen: int, resolved: bool = False) -> bool:
    """The message ``ts`` shows ``Seen seen times`` (and ``Resolved``) in its text and its blocks."""
    message = standin.message(ts)
    blocks = _blocks_text(message.blocks)
    ok = _seen(message.text) == seen and _seen(blocks) == seen
    if resolved:
        ok = ok and message.text.startswith("Resolved: ") and "*Resolved*" in blocks
    return ok


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


def _metric(gateway: Gateway, name: str, labels: str = "") -> float:
    """A sample of the replica's /metrics (0 when absent)."""
    raw = gateway.get("/metrics")[1]["_raw"]
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", raw, re.M)
    return float(match.group(1)) if match else 0.0


def _life(standin: SlackStandin, ts: str) -> str:
    """One message's life as the stand-in recorded it: post, edits, replies, in time order."""
    message = standin.message(ts)

    def stamp(at: float) -> str:
        return f"{time.strftime('%H:%M:%S', time.gmtime(at))}.{int(at % 1 * 1000):03d} UTC (+{at - message.at:.3f}s)"

    events = [
        (message.at, f"post  {stamp(message.at)} ts={ts} channel={message.channel_id}: {message.raw.get('text')!r}")
    ]
    events += [(e.at, f"edit  {stamp(e.at)}: {e.text!r}") for e in message.edits]
    events += [
        (r.at, f"reply {stamp(r.at)} ts={r.ts} thread_ts={r.thread_ts}: {r.text!r}") for r in standin.replies(ts)
    ]
    return "\n".join(line for _, line in sorted(events))


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
