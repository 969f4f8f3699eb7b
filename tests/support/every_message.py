"""One message of each kind the gateway builds, from hostile events: for the tests of each destination kind."""

from __future__ import annotations

from notifier.delivery.folding import folded_message
from notifier.delivery.group import Taken
from notifier.destinations.base import Message
from notifier.outbox import DigestEntry, EventEntry, HeldEntry, Quote, WindowEntry
from notifier.slack.messages import (
    MessageState,
    digest_message,
    edited_message,
    escalation_message,
    event_message,
    held_message,
    reply_message,
    window_message,
)

NASTY = "<users/all> <at>Ann</at> @channel [x](https://e.vil) <!here> & 😀 é\n" * 40
EVENT = {
    "category": "db",
    "title": "Disk full " + NASTY[:100],
    "text": NASTY,
    "severity": "critical",
    "fields": {f"field {n} <users/all>": NASTY[:900] for n in range(20)},
    "links": [{"text": f"Runbook {n} @all", "url": f"https://runbooks.example/{n}?a=1&b=<2>"} for n in range(5)],
    "dedup_key": "db1-disk <users/all>",
}
STATE = MessageState(
    seen=3, last_us=1_700_000_000_000_000, acknowledged="Acknowledged by &lt;users/all&gt; at 14:05 UTC"
)


def every_message(channel: str) -> dict[str, Message]:
    """A message from each builder, by name."""
    quotes = [Quote("db", NASTY, "error")] * 5
    backlog = [Taken(f"{n}000-0", EventEntry(f"i{n}", "db", channel, EVENT, 0.0), {}) for n in range(1, 50)]
    return {
        "event": event_message(channel, EVENT, STATE),
        "resolved": event_message(channel, EVENT, MessageState(resolved=True)),
        "resolution": reply_message(channel, None, EVENT),
        "reopening": reply_message(channel, None, EVENT, reopened=True),
        "escalation": escalation_message(channel, None, "Not acknowledged after 5m: <@U0LEAD>", EVENT),
        "edited": edited_message(channel, [], NASTY, STATE, "db"),
        "digest": digest_message(DigestEntry("d", channel, [("db", 40)] * 30, 300, 900, 2000, 7, 0, 300_000_000)),
        "held": held_message(HeldEntry("h", channel, NASTY, 120, 7, [("db", 100)], 3, 20, 0, quotes, 0, 1)),
        "window": window_message(WindowEntry("w", channel, NASTY, "start", NASTY, 1_700_000_000_000_000)),
        "folded": folded_message(channel, backlog, 3),
        "no view": Message(channel, NASTY),
    }
