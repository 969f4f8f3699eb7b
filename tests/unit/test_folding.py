"""Folding a stale backlog (delivery/folding.py): what is posted, what is folded, and a message that fits."""

from __future__ import annotations

from slack_standin import check_message

from notifier.delivery.folding import folded_message, is_stale, sort_backlog
from notifier.delivery.group import Taken
from notifier.outbox import DigestEntry, EventEntry


def entry(n: int, record: str = "", reply: bool = False, at: float = 1000.0, **event: object) -> Taken:
    body = {"text": f"event {n}", "severity": "warning", **event}
    return Taken(f"{n}-0", EventEntry(f"id{n}", "db", "#alerts", body, at + n, record=record, reply=reply), {})


def test_each_alert_is_posted_once_its_post_before_its_replies():
    backlog = [entry(1), entry(2, "alert:a", reply=True), entry(3, "alert:a"), entry(4, "alert:b", reply=True)]
    backlog += [entry(5), entry(6, "alert:b", reply=True)]
    posted, folded = sort_backlog(backlog)
    assert [t.stream_id for t in posted] == ["3-0", "4-0"]  # a's post; b's first reply (its post went before)
    assert sorted(t.stream_id for t in folded) == ["1-0", "2-0", "5-0", "6-0"]


def test_only_events_that_waited_too_long_by_the_store_s_clock_are_stale():
    """The stream id is the store's time of admission (ms); the entry's own received_at is not read."""
    assert is_stale(entry(1, at=10**10), 600, now_ms=700_000) and not is_stale(entry(1, at=0), 600, now_ms=500_000)
    assert not is_stale(entry(1), 0, now_ms=10**12)  # 0: never
    digest = Taken("9-0", DigestEntry("d", "#alerts", [("db", 3)], 0, 0, 3, 0, 0, 300_000_000), {})
    assert not is_stale(digest, 1, now_ms=10**12)


def test_a_folded_message_of_any_backlog_fits_and_mentions_no_one():
    nasty = "<!channel> " + "&<>" * 2000
    backlog = [entry(n, category=f"c{n % 300}", text=nasty, severity="critical") for n in range(10_000)]
    message = folded_message("#alerts", backlog, 3)
    check_message({"channel": message.channel, "text": message.text, "blocks": message.blocks})
    assert "Folded 10000 messages" in message.text and "<!channel>" not in str(message.blocks)
    assert "3 alerts are shown on their own" in message.blocks[0]["text"]["text"]
