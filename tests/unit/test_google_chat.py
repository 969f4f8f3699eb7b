"""The ``google-chat`` kind: its message within 32,000 bytes (text within 4,096 characters), a card Google takes,
whatever the event; no mention; its sink against the space's stand-in (threads by key, 429, 404, 5xx, the pace)."""

from __future__ import annotations

import json

import aiohttp
import pytest
from every_message import every_message
from google_chat_standin import GoogleChatStandin, check_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.destinations import google_chat
from notifier.destinations.base import Message
from notifier.errors import Permanent, RateLimited, Transient
from notifier.rules import parse_rules
from notifier.slack.messages import MessageState, event_message, reply_message
from notifier.view import Link, View

VIEW = View(
    text="db1 at 97%\nand rising",
    title="Disk full",
    severity="critical",
    category="db",
    fields=(("host", "db1"), ("mount", "/var")),
    links=(Link("Runbook", "https://runbooks.example/db"),),
    lines=("Seen 3 times, last at 14:05:09 UTC",),
    thread_key="db1-disk",
)
GOOGLE_LIMIT, GOOGLE_TEXT = 32_000, 4_096  # Google's limits, not the module's constants
HOSTILE = st.text(alphabet=st.characters(codec="utf-8"), max_size=3000)
EVENT = {"category": "db", "title": "Disk full", "text": "db1 <b>97%</b>", "severity": "error", "dedup_key": "db1-disk"}


def widgets(body: dict) -> list[dict]:
    (entry,) = body["cardsV2"]
    return [widget for section in entry["card"]["sections"] for widget in section["widgets"]]


def assert_taken(body: dict) -> None:
    """Within 32,000 bytes as sent, its text within 4,096 characters, and a message Google takes."""
    raw = json.dumps(body).encode()
    assert len(raw) <= GOOGLE_LIMIT and len(body["text"].encode("utf-16-le")) // 2 <= GOOGLE_TEXT
    check_message(raw)


@pytest.fixture
def standin():
    server = GoogleChatStandin().start()
    yield server
    server.stop()
    assert server.refusals == [], server.refusals


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as client:
        yield client


def test_the_message_shows_severity_category_title_text_fields_links_and_state():
    body = google_chat.shape(VIEW)
    assert body["text"] == "[critical] db: Disk full" and body["thread"] == {"threadKey": "db1-disk"}
    assert body["cardsV2"][0]["card"]["header"] == {"title": "Disk full", "subtitle": "[critical] db"}
    assert widgets(body) == [
        {"textParagraph": {"text": "db1 at 97%<br>and rising"}},
        {"decoratedText": {"topLabel": "host", "text": "db1", "wrapText": True}},
        {"decoratedText": {"topLabel": "mount", "text": "/var", "wrapText": True}},
        {"textParagraph": {"text": "Seen 3 times, last at 14:05:09 UTC"}},
        {
            "buttonList": {
                "buttons": [{"text": "Runbook", "onClick": {"openLink": {"url": "https://runbooks.example/db"}}}]
            }
        },
    ]
    assert_taken(body)


def test_a_note_without_a_title_or_key_has_no_header_nor_thread():
    body = google_chat.shape(View(text="db 40, web 2", head="Suppressed 42 notifications in the last 5m"))
    assert "thread" not in body and "header" not in body["cardsV2"][0]["card"]
    assert body["text"] == "Suppressed 42 notifications in the last 5m: db 40, web 2"
    assert widgets(body)[0] == {"textParagraph": {"text": "<b>Suppressed 42 notifications in the last 5m</b>"}}
    assert_taken(body)


def test_the_biggest_event_is_cut_to_32_000_bytes_and_google_takes_it():
    huge = View(
        text="😀" * 1_000_000,
        title="é" * 1_000_000,
        severity="critical",
        category="db",
        fields=tuple((f"name {i} " * 20, "v" * 1000) for i in range(10_000)),
        links=tuple(Link("l" * 1000, "https://x.example/" + "a" * 2900) for _ in range(5)),
        lines=tuple("L" * 5000 for _ in range(20)),
        head="H" * 1000,
        thread_key="k" * 5000,
    )
    body = google_chat.shape(huge)
    assert GOOGLE_LIMIT - 1000 < len(json.dumps(body).encode()) <= GOOGLE_LIMIT  # cut, not emptied
    shown = widgets(body)
    head, text = (widget["textParagraph"]["text"] for widget in shown[:2])  # every part shown: cut, never dropped
    assert head.startswith("<b>HHH") and text.startswith("😀" * 500)
    assert body["cardsV2"][0]["card"]["header"]["title"].startswith("éé")
    fields = [w["decoratedText"] for w in shown if "decoratedText" in w]
    assert fields[-1]["text"] == f"… {10_000 - len(fields) + 1:,} more fields not shown"
    assert body["text"].endswith("…") and len(body["thread"]["threadKey"]) == 4_000
    assert_taken(body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=HOSTILE,
    title=HOSTILE,
    fields=st.lists(st.tuples(HOSTILE, HOSTILE), max_size=150),
    lines=st.lists(HOSTILE, max_size=5),
    repeat=st.integers(1, 400),
    key=HOSTILE,
)
def test_any_event_fits_and_google_takes_it(text, title, fields, lines, repeat, key):
    view = View(text * repeat, title, "error", "c", tuple(fields), (), "", tuple(lines), False, key)
    assert_taken(google_chat.shape(view))


@pytest.mark.parametrize(
    "mention", ["<users/all>", "<users/123456789>", "<https://evil.example|click>", "@all", "[x](https://e.vil)"]
)
def test_no_event_can_mention_anyone(mention):
    view = View(text=f"hi {mention}!", title=mention, category="db", fields=((mention, mention),), lines=(mention,))
    body = google_chat.shape(view)
    assert mention not in body["text"] and "<users/" not in body["text"]  # the text is where Chat reads mentions
    assert all("<users/" not in json.dumps(widget, ensure_ascii=False) for widget in widgets(body))
    if mention.startswith("<"):  # in the card, escaped: shown as written
        assert "&lt;" + mention[1:-1] + "&gt;" in widgets(body)[0]["textParagraph"]["text"]


def test_card_text_is_never_cut_inside_an_entity_or_a_tag():
    for room in range(1, 40):
        text = google_chat.card_text("a&b\n<c>" * 10, room)
        kept = text.removesuffix("…")
        assert kept.count("&") == kept.count(";") and kept.count("<") == kept.count(">"), (room, text)


def test_the_sink_is_paced_as_documented_and_cannot_edit():
    sink = google_chat.GoogleChatSink("https://chat.googleapis.com/v1/spaces/A/messages", None)  # type: ignore[arg-type]
    assert (sink.name, sink.paced, sink.edits, sink.threads) == ("google-chat", True, False, False)
    assert sink.rate == parse_rules("1/1s,60/1m")


async def test_an_alert_and_its_resolution_share_a_thread(standin, session):
    sink = google_chat.GoogleChatSink(standin.url, session, rate=())
    posted = await sink.post(event_message("space", EVENT, MessageState()))
    assert posted.channel_id == "space" and posted.ts.startswith("spaces/AAAA1234/messages/")
    standin.rates = ()  # not paced here: the pace has a test of its own
    other = await sink.post(event_message("space", {**EVENT, "dedup_key": "web-5xx"}))
    resolved = await sink.post(reply_message("space", None, EVENT))
    thread = standin.thread_of(posted.ts)
    assert standin.thread_of(resolved.ts) == thread != standin.thread_of(other.ts)
    assert [r.body["text"] for r in standin.in_thread(thread)] == [
        "[error] db: Disk full",
        "Resolved: [error] db: Disk full",
    ]
    first = standin.received[0]
    assert first.query == {"key": "standin-key", "token": "standin-token", **google_chat.REPLY}  # the URL's own kept
    with pytest.raises(Permanent):
        await sink.update(posted, Message("space", "x"))


async def test_a_message_without_a_key_starts_a_thread_of_its_own(standin, session):
    sink = google_chat.GoogleChatSink(standin.url, session)
    standin.rates = ()
    one = await sink.post(Message("space", "plain & simple"))
    two = await sink.post(Message("space", "plain & simple"))
    assert standin.thread_of(one.ts) != standin.thread_of(two.ts)
    assert "messageReplyOption" not in standin.received[0].query and "thread" not in standin.received[0].body


async def test_answers_are_read_as_the_contract_says(standin, session):
    sink, message = google_chat.GoogleChatSink(standin.url, session), Message("space", "x")
    standin.script((429, None), (429, 4), (404,), (500,), (503,))
    with pytest.raises(RateLimited) as limited:
        await sink.post(message)
    assert limited.value.retry_after == 30.0  # Google says nothing of how long: the contract's 30 s
    with pytest.raises(RateLimited) as limited:
        await sink.post(message)
    assert limited.value.retry_after == 4.0
    with pytest.raises(Permanent, match=r"HTTP 404.*NOT_FOUND"):
        await sink.post(message)
    for _ in range(2):
        with pytest.raises(Transient, match="HTTP 50"):
            await sink.post(message)
    assert standin.received == []


async def test_the_standin_throttles_past_one_a_second_as_google_does(standin, session):
    sink = google_chat.GoogleChatSink(standin.url, session)
    await sink.post(Message("space", "one"))
    with pytest.raises(RateLimited) as limited:
        await sink.post(Message("space", "two"))
    assert limited.value.retry_after == 30.0 and len(standin.throttled) == 1 and standin.max_in_window(1.0) == 1


async def test_the_standin_refuses_what_google_would(session):
    server = GoogleChatStandin().start()
    bad = [
        ({"text": "x" * 4097}, 400),
        ({"text": "x", "blocks": []}, 400),
        ({}, 400),
        ({"cardsV2": [{"cardId": "c", "card": {"sections": [{"widgets": [{"image": {}}]}]}}]}, 400),
        (
            {
                "text": "y" * 4000,
                "cardsV2": [
                    {"cardId": "c", "card": {"sections": [{"widgets": [{"textParagraph": {"text": "z" * 30_000}}]}]}}
                ],
            },
            400,
        ),
    ]
    try:
        for body, status in bad:
            async with session.post(server.url, json=body) as response:
                assert response.status == status and (await response.json())["error"]["status"] == "INVALID_ARGUMENT"
        async with session.post(server.url.partition("?")[0], json={"text": "x"}) as response:
            assert response.status == 403
    finally:
        server.stop()
    assert len(server.refusals) == len(bad) + 1


async def test_every_message_the_gateway_builds_is_one_google_takes(standin, session):
    standin.rates = ()  # not paced here: the pace has a test of its own
    sink = google_chat.GoogleChatSink(standin.url, session)
    messages = every_message("space")
    posted = {name: await sink.post(message) for name, message in messages.items()}
    assert len(standin.received) == len(messages)  # and the fixture: no refusal
    assert all("<users/" not in body["text"] for body in standin.bodies())
    alert = standin.thread_of(posted["event"].ts)  # the alert's messages share its thread; notes have their own
    assert {name for name, p in posted.items() if standin.thread_of(p.ts) == alert} == {
        "event", "resolved", "resolution", "reopening", "escalation",
    }  # fmt: skip
