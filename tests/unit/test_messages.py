"""Every message the gateway builds fits Slack's Block Kit limits, whatever the input.

The limits are checked by the Slack stand-in's own checker (``slack_standin.check_message``),
the same code that refuses a message the way Slack does in the system tests.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from slack_standin import Rejection, check_message

from notifier.outbox import DigestEntry
from notifier.slack.messages import (
    MUTE,
    UNMUTE,
    Message,
    MessageState,
    digest_message,
    edited_message,
    escalation_message,
    event_message,
    is_state_block,
    reply_message,
)

# Characters Slack escaping grows fivefold, and plain ones.
NASTY = st.text(alphabet=st.sampled_from("<>&@!|*_~`\n " + string.ascii_letters + "é🚨"), min_size=1)
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
    },
    optional={"title": NASTY.map(lambda t: t[:150])},
)
states = st.builds(
    MessageState,
    seen=st.integers(1, 10**9),
    last_us=st.integers(0, 4 * 10**15),
    resolved=st.booleans(),
    banner=st.text(max_size=300),
    button=st.sampled_from(["", MUTE, UNMUTE]),
    record=st.text(alphabet=string.printable, max_size=200),
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


def test_the_largest_event_fits():
    """Every field at its maximum, of the characters escaping makes five times longer."""
    event = {
        "category": "c" * 64,
        "text": "&" * 3000,
        "title": "<" * 150,
        "severity": "critical",
        "fields": {f"{i:03d}" + ">" * 97: "&" * 1000 for i in range(20)},
    }
    message = event_message(
        "#alerts", event, MessageState(seen=12, last_us=1, resolved=True, banner="b", button=MUTE, record="r")
    )
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
    posted = event_message("#alerts", event, MessageState(button=MUTE))
    own = [b for b in posted.blocks if not is_state_block(b)]
    assert own and len(own) == len(posted.blocks) - 1  # only the button was the gateway's state
    muted = edited_message(
        "C0123456789", own, "disk full", MessageState(banner="Muted db until 14:05 UTC by <@U1>", button=UNMUTE), "db"
    )
    fits(muted)
    assert "Muted db until 14:05 UTC by <@U1>" in muted.text
    [button] = next(b for b in muted.blocks if b["type"] == "actions")["elements"]
    assert button["action_id"] == UNMUTE and '"category": "db"' in button["value"]


def test_an_alert_s_state_with_every_line_and_both_buttons_fits_even_on_a_full_message():
    state = MessageState(
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
