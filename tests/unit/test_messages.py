"""Every message the gateway builds fits Slack's Block Kit limits, whatever the input.

The limits are checked by the Slack stand-in's own checker (``slack_standin.check_message``),
the same code that refuses a message the way Slack does in the system tests.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from slack_standin import Rejection, check_message

from notifier.outbox import DigestEntry
from notifier.slack.controls import MUTE, UNMUTE, controls_id, sealed_choice
from notifier.slack.messages import (
    Message,
    MessageState,
    digest_message,
    edited_message,
    escalation_message,
    event_message,
    is_state_block,
    reply_message,
)

KEY = b"k" * 32  # the fleet's control key in these tests

# Characters Slack escaping grows fivefold, and plain ones.
NASTY = st.text(alphabet=st.sampled_from("<>&@!|*_~`\n " + string.ascii_letters + "é🚨"), min_size=1)
URL = "https://runbooks.example/"
CHOICES = st.lists(st.sampled_from(["1h", "4h", "24h", "30m", "7d", "90s"]), min_size=1, max_size=5, unique=True)
CATEGORY = st.text(alphabet=string.ascii_letters + string.digits + "_.:-", min_size=1, max_size=64)


def body(message: Message) -> dict:
    return {"channel": message.channel, "text": message.text, "blocks": message.blocks}


def fits(message: Message) -> None:
    try:
        check_message(body(message))
    except Rejection as exc:
        pytest.fail(f"Slack would refuse it: {exc.error} {exc.problems}")


events = st.fixed_dictionaries(
    {
        "category": CATEGORY,
        "text": NASTY.map(lambda t: t[:3000]),
        "severity": st.sampled_from(["info", "warning", "error", "critical"]),
        "fields": st.dictionaries(NASTY.map(lambda t: t[:100]), NASTY.map(lambda t: t[:1000]), max_size=20),
        "links": st.lists(
            st.fixed_dictionaries(
                {
                    "text": NASTY.map(lambda t: t[:75]),
                    "url": st.text(string.ascii_letters, max_size=2980).map(URL.__add__),
                }
            ),
            max_size=5,
        ),
    },
    optional={"title": NASTY.map(lambda t: t[:150])},
)
states = st.builds(
    MessageState,
    key=st.just(KEY),
    seen=st.integers(1, 10**9),
    last_us=st.integers(0, 4 * 10**15),
    resolved=st.booleans(),
    banner=st.text(max_size=300),
    button=st.sampled_from(["", MUTE, UNMUTE]),
    record=st.text(alphabet=string.printable, max_size=200),
    choices=CHOICES.map(tuple),
    reopened=st.integers(0, 10**6),
    acknowledged=st.sampled_from(["", "Acknowledged by <@U0ALICE123> at 14:05 UTC"]),
    ack=st.sampled_from(["", "ack", "unack"]),
)


@settings(max_examples=150, suppress_health_check=list(HealthCheck))
@given(events, states)
def test_event_messages_fit(event, state):
    message = event_message("#alerts", event, state)
    fits(message)
    own = message.text.replace(state.acknowledged, "").replace(state.banner, "")
    assert "<!channel>" not in message.text and "<@" not in own


LARGEST = {
    "category": "c" * 64,
    "text": "&" * 3000,
    "title": "<" * 150,
    "severity": "critical",
    "fields": {f"{i:03d}" + ">" * 97: "&" * 1000 for i in range(20)},
    "links": [{"text": "<" * 75, "url": URL + "x" * (3000 - len(URL))}] * 5,
}


def test_the_largest_event_fits():
    """Every field at its maximum, of the characters escaping makes five times longer."""
    event = LARGEST
    record = "notifier:{notifier}:alert:" + "c" * 64 + ":" + "f" * 32
    state = MessageState(
        key=KEY, seen=12, last_us=1, resolved=True, banner="b", button=MUTE, record=record, choices=("1h", "4h", "24h")
    )
    message = event_message("#alerts", event, state)
    fits(message)
    assert len(message.blocks) <= 50 and "&amp;" * 3000 in "".join(
        b["text"]["text"] for b in message.blocks if b["type"] == "section" and "text" in b
    )
    fits(reply_message("C0123456789", "1.000001", event))


@settings(max_examples=60, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(CATEGORY, st.integers(1, 10**6)), max_size=300), st.integers(0, 10**4), st.integers(0, 10**6))
def test_digests_fit_and_keep_the_exact_total(counts, more_categories, unnamed):
    counts = sorted(counts, key=lambda c: -c[1])
    assume(counts or more_categories or unnamed)  # a digest has at least one drop
    more = more_categories * 3
    total = sum(n for _, n in counts) + more + unnamed
    entry = DigestEntry("d", "#alerts", counts, more_categories, more, total, unnamed, 0, 300_000_000)
    message = digest_message(entry)
    fits(message)
    assert message.text.startswith(f"Suppressed {total} notification")
    named = [part for part in message.text.split(": ", 1)[1].split(", ") if part and not part.startswith("and ")]
    rest = message.text.rsplit(": ", 1)[1] if "more" in message.text or "other" in message.text else "0"
    assert sum(int(p.rsplit(" ", 1)[1]) for p in named) + int(rest) == total


def test_a_digest_of_30000_categories_names_the_largest_and_sums_the_rest():
    counts = [(f"category-{i:05d}-{'x' * 48}", 30_000 - i) for i in range(100)]  # 100 names of 64 characters
    entry = DigestEntry("d", "#alerts", counts, 29_900, 29_900, sum(n for _, n in counts) + 29_900, 0, 0, 60_000_000)
    message = digest_message(entry)
    fits(message)
    assert f"category-00000-{'x' * 48} 30000" in message.text
    *named, rest = message.text.split(": ", 1)[1].split(", ")
    shown = sum(int(part.rsplit(" ", 1)[1]) for part in named)
    assert rest == f"and {29_900 + 100 - len(named)} more categories: {entry.total - shown}"


def test_a_clicked_message_keeps_its_own_blocks_and_gets_a_new_state():
    event = {"category": "db", "text": "disk full"}
    posted = event_message("#alerts", event, MessageState(key=KEY, button=MUTE))
    own = [b for b in posted.blocks if not is_state_block(b)]
    assert own and len(own) == len(posted.blocks) - 1  # only the button was the gateway's state
    muted = edited_message(
        "C0123456789",
        own,
        "disk full",
        MessageState(key=KEY, banner="Muted db until 14:05 UTC by <@U1>", button=UNMUTE),
        "db",
    )
    fits(muted)
    assert "Muted db until 14:05 UTC by <@U1>" in muted.text
    [button] = next(b for b in muted.blocks if b["type"] == "actions")["elements"]
    assert button["action_id"] == UNMUTE and '"category": "db"' in button["value"]


def elements(message: Message) -> list[dict]:
    return [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


def test_links_are_link_buttons_on_every_rendering():
    links = [{"text": "Runbook", "url": URL + "db"}, {"text": "<b>Dash</b>", "url": "http://grafana.example/d/1"}]
    event = {"category": "db", "text": "disk full", "links": links}
    for message in (
        event_message("#alerts", event),
        event_message(
            "#alerts", event, MessageState(key=KEY, seen=3, resolved=True, button=MUTE, choices=("1h", "4h"))
        ),
        reply_message("C0123456789", "1.000001", event),
    ):
        fits(message)
        link_buttons = [e for e in elements(message) if e.get("url")]
        assert [(b["text"]["text"], b["url"]) for b in link_buttons] == [(k["text"], k["url"]) for k in links]
        assert len({b["action_id"] for b in link_buttons}) == 2 and not any("value" in b for b in link_buttons)


def test_one_mute_choice_is_a_button_several_are_a_menu():
    event = {"category": "db", "text": "disk full"}
    record = "notifier:{notifier}:alert:db:" + "a" * 32
    (one,) = elements(event_message("#a", event, MessageState(key=KEY, button=MUTE, record=record, choices=("30m",))))
    assert (one["type"], one["text"]["text"]) == ("button", "Mute db for 30m")
    assert json.loads(one["value"]) == {
        "category": "db",
        "record": record,
        "for": sealed_choice(KEY, "db", "a" * 32, "30m"),
    }
    message = event_message("#a", event, MessageState(key=KEY, button=MUTE, record=record, choices=("1h", "4h", "24h")))
    (menu,) = elements(message)
    assert menu["type"] == "static_select" and menu["action_id"] == MUTE
    assert [(o["text"]["text"], o["value"]) for o in menu["options"]] == [
        (f"Mute for {d}", sealed_choice(KEY, "db", "a" * 32, d)) for d in ("1h", "4h", "24h")
    ]
    # The option has room for the (sealed) duration only: the block names the category and the record.
    assert message.blocks[-1]["block_id"] == controls_id(KEY, "db", "a" * 32)
    (lift,) = elements(
        event_message("#a", event, MessageState(key=KEY, button=UNMUTE, record=record, choices=("1h", "4h")))
    )
    assert (lift["type"], lift["action_id"], lift["text"]["text"]) == ("button", UNMUTE, "Unmute db")


def test_an_alert_s_state_with_every_line_and_both_buttons_fits_even_on_a_full_message():
    state = MessageState(
        key=KEY,
        seen=3,
        last_us=1,
        banner="Muted db until 14:05 UTC by <@U1>",
        button=MUTE,
        record="notifier:{notifier}:alert:db:" + "0" * 32,
        reopened=2,
        acknowledged="Acknowledged by <@U1> at 14:05 UTC",
        ack="unack",
    )
    message = event_message("#alerts", {"category": "db", "text": "disk full"}, state)
    fits(message)
    assert "Reopened 2 times" in message.text and "Acknowledged by <@U1> at 14:05 UTC" in message.text
    actions = next(b for b in message.blocks if b["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == ["unack", MUTE]  # acknowledgement first
    base = [{"type": "section", "text": {"type": "mrkdwn", "text": f"part {i}"}} for i in range(50)]
    fits(edited_message("C0123456789", base, "disk full", state, "db"))
    assert len(edited_message("C0123456789", base, "disk full", state, "db").blocks) == 50
    fits(
        escalation_message(
            "C0123456789", None, "Not acknowledged after 5m: <@U1>", {"category": "db", "text": "<" * 3000}
        )
    )
    fits(reply_message("C0123456789", "1.000001", {"category": "db", "text": "&" * 3000}, reopened=True))
