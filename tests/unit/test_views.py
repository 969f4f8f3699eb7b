"""Every message the gateway builds carries its neutral view: what it shows, raw, for the kinds that are not Slack."""

from __future__ import annotations

from notifier.delivery.folding import folded_message
from notifier.delivery.group import Taken
from notifier.outbox import DigestEntry, EventEntry, HeldEntry, Quote, WindowEntry
from notifier.slack.messages import (
    MessageState,
    digest_message,
    edited_message,
    escalation_message,
    event_message,
    held_message,
    reply_message,
    shaped_message,
    window_message,
)
from notifier.view import Link

EVENT = {
    "category": "db",
    "title": "Disk <full> & hot",
    "text": "db1 at 97% <!channel> & rising",
    "severity": "critical",
    "fields": {"host": "db1 <primary>", "mount": "/var"},
    "links": [{"text": "Runbook & more", "url": "https://runbooks.example/db?a=1&b=2"}],
    "dedup_key": "db1-disk",
}
STATE = MessageState(seen=3, last_us=1_700_000_000_000_000, acknowledged="Acknowledged by Ann &lt;ops&gt; at 14:05 UTC")


def assert_shows_event(view) -> None:
    assert view.title == "Disk <full> & hot" and view.text == "db1 at 97% <!channel> & rising"
    assert (view.severity, view.category, view.thread_key) == ("critical", "db", "db1-disk")
    assert view.fields == (("host", "db1 <primary>"), ("mount", "/var"))
    assert view.links == (Link("Runbook & more", "https://runbooks.example/db?a=1&b=2"),)


def test_an_events_message_shows_the_event_raw_and_its_state_unescaped():
    view = event_message("#alerts", EVENT, STATE).view
    assert_shows_event(view)
    assert view.head == "" and not view.resolved
    assert view.lines[0].startswith("Seen 3 times, last at ")
    assert view.lines[1] == "Acknowledged by Ann <ops> at 14:05 UTC"  # Slack's escaping undone


def test_a_resolved_alerts_message_is_headed_resolved():
    view = event_message("#alerts", EVENT, MessageState(resolved=True)).view
    assert (view.head, view.resolved) == ("Resolved", True)


def test_a_templates_message_keeps_the_events_view():
    message = shaped_message("#alerts", [{"type": "divider"}], "own text", EVENT, STATE)
    assert_shows_event(message.view)
    assert message.view.lines[1] == "Acknowledged by Ann <ops> at 14:05 UTC"


def test_replies_are_headed_resolved_or_firing_again():
    resolved = reply_message("#alerts", "1.0", EVENT).view
    again = reply_message("#alerts", None, EVENT, reopened=True).view
    assert_shows_event(resolved)
    assert (resolved.head, resolved.resolved, again.head, again.resolved) == ("Resolved", True, "Firing again", False)


def test_an_escalation_shows_its_text_and_quotes_the_alert_in_its_thread():
    view = escalation_message("#alerts", None, "Not acknowledged after 5m: <@U0LEAD>", EVENT).view
    assert view.text == "Not acknowledged after 5m: <@U0LEAD>"
    assert view.lines == ("db: db1 at 97% <!channel> & rising",) and view.thread_key == "db1-disk"
    assert escalation_message("#alerts", "1.0", "Not acknowledged", None).view.text == "Not acknowledged"


def test_an_edited_message_shows_its_text_and_new_state():
    view = edited_message("C1", [], "db1 &lt;primary&gt;", MessageState(resolved=True), "db").view
    assert (view.text, view.category, view.head, view.resolved) == ("db1 <primary>", "db", "Resolved", True)


def test_a_digest_says_how_many_and_of_what():
    view = digest_message(DigestEntry("d", "#alerts", [("db", 40), ("a<b", 2)], 0, 0, 42, 0, 0, 300_000_000)).view
    assert view.head == "Suppressed 42 notifications in the last 5m"
    assert view.text == "db 40, a<b 2" and view.severity == ""


def test_a_hand_over_quotes_the_latest_held():
    quotes = [Quote("db", "x <y>", "error")]
    entry = HeldEntry("h", "#alerts", "db-upgrade", 3, 1, [("db", 3)], 0, 0, 0, quotes, 0, 1)
    view = held_message(entry).view
    assert view.head == "Held during db-upgrade: 3" and view.text == "(db 3)\n1 dropped"
    assert view.lines == ("[error] db: x <y>",)


def test_a_windows_messages_say_it_started_or_ended_and_its_note():
    start = window_message(WindowEntry("w", "#alerts", "db<up>", "start", "a & b", 1_700_000_000_000_000)).view
    end = window_message(WindowEntry("w", "#alerts", "db<up>", "end", "", 0)).view
    assert start.head.startswith("Maintenance window db<up> started (until ") and start.text == "a & b"
    assert (end.head, end.text) == ("Maintenance window db<up> ended", "")


def test_a_folded_backlog_says_how_many_and_the_latest():
    folded = [
        Taken(f"{n}000-0", EventEntry(f"i{n}", "db", "#alerts", {"text": f"<e{n}>"}, 0.0), {}) for n in range(1, 8)
    ]
    view = folded_message("#alerts", folded, 2).view
    assert view.head.startswith("Folded 7 messages that waited from ") and "2 alerts are shown" in view.head
    assert view.text.startswith("By category: db 7.") and len(view.lines) == 5
    assert view.lines[-1].endswith("db: <e7>")
