"""The ``teams`` kind: its Adaptive Card within 28 KB and valid for the Adaptive Cards library, whatever the
event; no mention; its sink against the Teams Workflows stand-in (202, 429, 404, 5xx, the pace)."""

from __future__ import annotations

import json

import aiohttp
import pytest
from adaptive_cards import validator
from aiohttp import web
from every_message import every_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from teams_standin import TeamsStandin

from notifier.destinations import teams
from notifier.destinations.base import Message, Posted
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
)
TEAMS_LIMIT = 28_000  # "The message size limit is 28 KB": not the module's constant, which a test must not trust
HOSTILE = st.text(alphabet=st.characters(codec="utf-8"), max_size=3000)


def card_of(body: dict) -> dict:
    (attachment,) = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive" and attachment["contentUrl"] is None
    return attachment["content"]


def texts(card: dict) -> list[str]:
    return [block["text"] for block in card["body"] if block["type"] == "TextBlock"]


def assert_valid(body: dict) -> None:
    """Within 28 KB as sent, and no error from the Adaptive Cards library."""
    assert len(json.dumps(body).encode()) <= TEAMS_LIMIT
    report = validator().check(card_of(body))
    assert report.errors == [], report.errors


@pytest.fixture
def standin():
    server = TeamsStandin().start()
    yield server
    server.stop()
    assert server.refusals == [], server.refusals  # every card the tests sent was taken: valid and within limits
    assert all(not report.errors for _, report in server.reports)


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as client:
        yield client


def test_the_card_shows_severity_category_title_text_fields_links_and_state():
    body = teams.shape(VIEW)
    card = card_of(body)
    assert body["type"] == "message" and card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    assert texts(card) == [
        "[critical] db",
        "Disk full",
        "db1 at 97%\n\nand rising",
        "Seen 3 times, last at 14:05:09 UTC",
    ]
    (facts,) = [block for block in card["body"] if block["type"] == "FactSet"]
    assert facts["facts"] == [{"title": "host", "value": "db1"}, {"title": "mount", "value": "/var"}]
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Runbook", "url": "https://runbooks.example/db"}]
    assert_valid(body)


def test_a_resolution_is_headed_resolved():
    card = card_of(teams.shape(View(text="ok", category="db", head="Resolved", resolved=True)))
    assert card["body"][0] == {
        "type": "TextBlock", "text": "Resolved", "wrap": True, "weight": "Bolder", "color": "Good", "size": "Medium",
    }  # fmt: skip
    assert_valid(teams.shape(View(text="", head="Suppressed 4 notifications in the last 5m")))


def test_the_biggest_event_is_cut_to_28_kb_and_stays_valid():
    huge = View(
        text="😀" * 1_000_000,
        title="é" * 1_000_000,
        severity="critical",
        category="db",
        fields=tuple((f"name {i} " * 20, "v" * 1000) for i in range(10_000)),
        links=tuple(Link("l" * 1000, "https://x.example/" + "a" * 2900) for _ in range(5)),
        lines=tuple("L" * 5000 for _ in range(20)),
        head="H" * 1000,
    )
    body = teams.shape(huge)
    size = len(json.dumps(body).encode())
    assert TEAMS_LIMIT - 500 < size <= TEAMS_LIMIT  # cut, not emptied
    card = card_of(body)
    assert all(text.endswith("…") for text in texts(card) if text != "[critical] db")
    head, _meta, title, text, *lines = texts(card)  # every part shown, however big: cut, never dropped
    assert head.startswith("HHH") and title.startswith("éé") and text.startswith("😀" * 500) and len(lines) == 5
    (facts,) = [block["facts"] for block in card["body"] if block["type"] == "FactSet"]
    assert facts[-1] == {"title": "…", "value": f"{10_001 - len(facts):,} more fields not shown"}
    assert_valid(body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=HOSTILE,
    title=HOSTILE,
    fields=st.lists(st.tuples(HOSTILE, HOSTILE), max_size=40),
    lines=st.lists(HOSTILE, max_size=5),
    repeat=st.integers(1, 400),
)
def test_any_event_fits_and_validates(text, title, fields, lines, repeat):
    view = View(
        text=text * repeat, title=title, severity="warning", category="c", fields=tuple(fields), lines=tuple(lines)
    )
    assert_valid(teams.shape(view))


@pytest.mark.parametrize(
    "mention", ["<at>Ann</at>", "<AT >x< /at>", "@channel", "@here", "@all", "@everyone", "@team", "[x](https://e.vil)"]
)
def test_no_event_can_mention_anyone(mention):
    view = View(text=f"hi {mention}!", title=mention, category="db", fields=((mention, mention),))
    dumped = json.dumps(teams.shape(view), ensure_ascii=False).lower()
    assert "msteams" not in dumped.replace('"msteams": {"width": "full"}', "")  # no entities: nobody is mentioned
    for tag in ("<at", "< /at", "@channel", "@here", "@all", "@everyone", "@team", "]("):
        assert tag not in dumped


def test_the_sink_is_paced_as_documented_and_cannot_edit():
    sink = teams.TeamsSink("https://example.invalid/hook", session=None)  # type: ignore[arg-type]
    assert (sink.name, sink.paced, sink.edits, sink.threads) == ("teams", True, False, False)
    assert sink.rate == parse_rules("4/1s,30/30s")
    assert teams.TeamsSink("https://x", None, parse_rules("1/1s")).rate == parse_rules("1/1s")  # type: ignore[arg-type]


async def test_a_message_is_posted_as_its_card(standin, session):
    sink = teams.TeamsSink(standin.url, session)
    message = event_message(
        "it-teams", {"category": "db", "text": "disk <full>", "severity": "error", "dedup_key": "k"}
    )
    assert await sink.post(message) == Posted("it-teams", "")
    (card,) = standin.cards()
    assert texts(card) == ["[error] db", "disk <full>"]
    with pytest.raises(Permanent):
        await sink.update(Posted("it-teams", ""), message)


async def test_a_resolution_is_a_new_card_naming_the_alert(standin, session):
    sink = teams.TeamsSink(standin.url, session)
    event = {"category": "db", "title": "Disk full", "text": "db1", "severity": "error", "dedup_key": "k"}
    await sink.post(event_message("it-teams", event, MessageState(seen=2, last_us=1)))
    await sink.post(reply_message("it-teams", None, event))
    first, resolution = standin.cards()
    assert texts(first)[-1].startswith("Seen 2 times") and texts(resolution)[:3] == [
        "Resolved",
        "[error] db",
        "Disk full",
    ]


async def test_a_message_without_a_view_shows_its_text(standin, session):
    await teams.TeamsSink(standin.url, session).post(Message("it-teams", "plain & simple"))
    assert texts(standin.cards()[0]) == ["plain & simple"]


async def test_answers_are_read_as_the_contract_says(standin, session):
    sink, message = teams.TeamsSink(standin.url, session), Message("it-teams", "x")
    standin.script((429, 7), (429, None), (404,), (500,), (502,))
    with pytest.raises(RateLimited) as limited:
        await sink.post(message)
    assert limited.value.retry_after == 7.0
    with pytest.raises(RateLimited) as limited:
        await sink.post(message)
    assert limited.value.retry_after == 30.0  # no Retry-After: the contract's 30 s
    with pytest.raises(Permanent, match=r"HTTP 404.*WorkflowNotFound"):
        await sink.post(message)
    for _ in range(2):
        with pytest.raises(Transient, match="HTTP 50"):
            await sink.post(message)
    assert standin.received == []


async def test_the_standin_throttles_past_four_a_second(standin, session):
    sink = teams.TeamsSink(standin.url, session)
    for n in range(4):
        await sink.post(Message("it-teams", f"m{n}"))
    with pytest.raises(RateLimited) as limited:
        await sink.post(Message("it-teams", "one too many"))
    assert limited.value.retry_after >= 1 and len(standin.throttled) == 1 and standin.max_in_window(1.0) == 4


async def test_the_standin_refuses_what_teams_would(session):
    server = TeamsStandin().start()
    try:
        bad_card = teams.envelope({"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "Bogus"}]})
        too_big = teams.envelope(
            {"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "TextBlock", "text": "x" * 30_000}]}
        )
        mention = teams.envelope({"type": "AdaptiveCard", "version": "1.5", "body": [], "msteams": {"entities": [{}]}})
        for body, status in ((bad_card, 400), (too_big, 413), (mention, 400), ({"text": "legacy"}, 400)):
            async with session.post(server.url, json=body) as response:
                assert response.status == status
    finally:
        server.stop()
    reasons = [refusal.reason for refusal in server.refusals]
    assert "Unknown element type" in reasons[0] and "over 28,000" in reasons[1] and "mentions" in reasons[2]


async def test_an_answer_that_is_not_utf8_is_still_classified(aiohttp_server, session):
    async def garbled(request: web.Request) -> web.Response:
        return web.Response(status=502, body=b"\xff\xfe proxy error", content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_post("/", garbled)
    server = await aiohttp_server(app)
    with pytest.raises(Transient, match="HTTP 502"):  # not a UnicodeDecodeError escaping the sink
        await teams.TeamsSink(str(server.make_url("/")), session).post(Message("it-teams", "x"))


async def test_every_message_the_gateway_builds_is_a_card_teams_takes(standin, session):
    standin.rates = ()  # not paced here: the pace has a test of its own
    sink = teams.TeamsSink(standin.url, session)
    messages = every_message("it-teams")
    for message in messages.values():
        await sink.post(message)
    assert len(standin.cards()) == len(messages)  # and the fixture: no refusal, no error from the library
    assert "@channel" not in json.dumps(standin.bodies(), ensure_ascii=False)
