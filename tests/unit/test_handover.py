"""lua/handover.lua and the hand-over message: whatever a window held, one message Slack accepts.

Run on the embedded store (fakeredis with the same Lua), with the held store written as admit.lua
writes it: 30,000 random categories, the longest texts full of characters that escaping lengthens,
and a window name far over any limit still give one summary within Block Kit's limits, whose N and
per-category counts add up exactly; then each still-firing held alert follows, and only that.
"""

from __future__ import annotations

import random
import re
import string
import time

import fakeredis
import pytest
from slack_standin import check_message

from notifier.outbox import EventEntry, HeldEntry, decode, encode_event
from notifier.slack.messages import held_message
from notifier.store.keys import Keys
from notifier.store.scripts import script_dir

KEYS = Keys("t")
PAIR = "0123abcd"
NAME_CHARS = string.ascii_letters + string.digits + "_.:-"
SUMMARY = re.compile(r"^Held during (.+?): (\d+) \((.*)\)\n(\d+) dropped$", re.S)


@pytest.fixture
def store():
    client = fakeredis.FakeRedis()
    return client, client.register_script((script_dir() / "handover.lua").read_text())


def _record(client, key: str, text: str, resolved: bool) -> None:
    entry = EventEntry(key, "db", "#db", {"text": text, "severity": "error"}, time.time(), key)
    fields = {"id": key, "fired": "1", "resolved": "1" if resolved else "0", "n": 3, "e": encode_event(entry)}
    client.hset(key, mapping={**fields, "held": PAIR, "ttl": 60_000_000})
    client.sadd(KEYS.held(PAIR)[3], key)


def _held_store(client, categories: int) -> int:
    """A held store as admit.lua leaves it; the number of events it held."""
    summary, cats, latest, _ = KEYS.held(PAIR)
    rng = random.Random(24)
    counts = {"".join(rng.choices(NAME_CHARS, k=rng.randint(1, 64))): rng.randint(1, 9) for _ in range(categories)}
    client.hset(cats, mapping=counts)
    for i in range(5):
        entry = EventEntry(f"e{i}", "db", "#db", {"text": "<@U1>&" * 500, "severity": "info"}, time.time())
        client.lpush(latest, encode_event(entry))
    total = sum(counts.values()) + 2  # the two alerts
    window = "mon-fri 19:00-08:00 Europe/Berlin; <!channel> " * 20
    client.hset(summary, mapping={"window": window, "channel": "#db", "start": 1, "since": 1, "n": total, "dropped": 7})
    client.sadd(KEYS.held_pairs, PAIR)
    _record(client, KEYS.record("db", "firing"), "still firing", resolved=False)
    _record(client, KEYS.record("db", "gone"), "resolved meanwhile", resolved=True)
    return total


def _hand_over(client, script, end_us: int = 0) -> int:
    keys = [KEYS.held_pairs, KEYS.outbox, *KEYS.alert_keys, *KEYS.held(PAIR)]
    return int(script(keys=keys, args=[PAIR, end_us, "held-1", 100], client=client))


def test_thirty_thousand_random_categories_give_one_message_slack_accepts(store):
    client, script = store
    total = _held_store(client, 30_000)
    assert _hand_over(client, script) == 1
    entries = [decode(fields) for _, fields in client.xrange(KEYS.outbox)]
    assert isinstance(entries[0], HeldEntry) and entries[0].total == total and entries[0].dropped == 7
    message = held_message(entries[0])
    check_message({"text": message.text, "blocks": message.blocks})  # raises what Slack would answer
    match = SUMMARY.match(message.blocks[0]["text"]["text"])
    assert match and int(match.group(2)) == total and match.group(4) == "7", message.blocks[0]
    named = [part.rsplit(" ", 1) for part in match.group(3).split(", ")]
    *named, (rest, more) = named
    assert rest.startswith("and ") and rest.endswith(" more categories:"), rest
    assert sum(int(n) for _, n in named) + int(more) == total - 2, "every held event is counted once"
    assert len(message.blocks) == 2 and message.blocks[1]["text"]["text"].count("\n> ") == 5
    print(f"\n{len(named)} categories named, {len(message.text)} characters:\n{message.text[:300]}…")

    # Then the one held alert still firing, as its own message; the resolved one is only counted.
    assert [e.event["text"] for e in entries[1:] if isinstance(e, EventEntry)] == ["still firing"]
    assert client.hget(KEYS.record("db", "firing"), "held") is None
    assert client.zscore(KEYS.alerts_open, KEYS.record("db", "firing")) is not None, "open again in the index"
    assert client.ttl(KEYS.record("db", "firing")) > 0, "its record lives its window from now, no longer"
    assert not client.exists(*KEYS.held(PAIR)) and not client.sismember(KEYS.held_pairs, PAIR)
    assert _hand_over(client, script) == -1 and client.xlen(KEYS.outbox) == 2, "a second caller finds nothing"


def test_nothing_is_handed_over_while_the_window_is_in_force_by_the_store_clock(store):
    client, script = store
    _held_store(client, 3)
    seconds, micros = client.time()
    assert _hand_over(client, script, end_us=(seconds + 60) * 1_000_000 + micros) == -2
    assert client.xlen(KEYS.outbox) == 0 and client.sismember(KEYS.held_pairs, PAIR)
