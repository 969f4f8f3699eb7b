"""The discord kind: its shape within Discord's limits whatever the event, no mentions, and its sink's answers.

The stand-in (``tests/support/discord_standin.py``) is the oracle for the limits: it refuses what
Discord refuses, so a shape it takes is one Discord takes.
"""

import re

import aiohttp
import pytest
from discord_standin import DiscordStandin, check_body, pings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.destinations.base import Message, Posted
from notifier.destinations.discord import DiscordSink, inert, shape
from notifier.errors import MessageGone, Permanent, RateLimited, Transient
from notifier.view import Link, View

MENTIONS = re.compile(r"@(everyone|here)|<@[!&]?\d+>|<#\d+>")
HOSTILE = "@everyone @here <@123> <@!45> <@&6> <#7> [x](https://evil) ) ] ` ** 🚨 é 日本 \u200b"


@pytest.fixture
def discord():
    standin = DiscordStandin().start()
    yield standin
    standin.stop()


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


def strings(body: object) -> list[str]:
    """Every string in a JSON body."""
    if isinstance(body, str):
        return [body]
    if isinstance(body, dict):
        return [s for value in body.values() for s in strings(value)]
    if isinstance(body, list):
        return [s for value in body for s in strings(value)]
    return []


def embed_total(body: dict) -> int:
    """Characters Discord counts against the 6,000 of all embeds."""
    total = 0
    for embed in body["embeds"]:
        total += len(embed.get("title", "")) + len(embed.get("description", ""))
        total += len(embed.get("footer", {}).get("text", "")) + len(embed.get("author", {}).get("name", ""))
        total += sum(len(f["name"]) + len(f["value"]) for f in embed.get("fields", []))
    return total


def assert_within_limits(body: dict) -> None:
    check_body(body)  # raises what Discord would answer
    assert len(body["content"]) <= 2000 and 1 <= len(body["embeds"]) <= 10
    assert embed_total(body) <= 6000
    for embed in body["embeds"]:
        assert len(embed.get("title", "")) <= 256 and len(embed.get("description", "")) <= 4096
        assert len(embed.get("fields", [])) <= 25
        assert all(len(f["name"]) <= 256 and len(f["value"]) <= 1024 for f in embed.get("fields", []))
        assert all(f["name"].strip() and f["value"].strip() for f in embed.get("fields", []))
    assert body["allowed_mentions"] == {"parse": []}


views = st.builds(
    View,
    text=st.text(max_size=9000),
    title=st.text(max_size=600),
    severity=st.sampled_from(["", "info", "warning", "error", "critical", "bogus"]),
    category=st.text(max_size=300),
    fields=st.lists(st.tuples(st.text(max_size=400), st.text(max_size=1500)), max_size=40).map(tuple),
    links=st.lists(st.builds(Link, st.text(max_size=150), st.text(max_size=300)), max_size=30).map(tuple),
    head=st.text(max_size=300),
    lines=st.lists(st.text(max_size=800), max_size=4).map(tuple),
    resolved=st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(views)
def test_every_shape_is_within_discords_limits(view):
    assert_within_limits(shape(view))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("@<>#&!everyonhr0123 \n")), max_size=200))
def test_no_text_mentions_anyone(text):
    body = shape(View(text=text, title=text, category=text, fields=((text, text),), lines=(text,), head=text))
    for part in strings(body):
        assert not MENTIONS.search(part), part
    assert pings(body["content"], None) == []  # not even under a webhook's default allowances


def test_huge_and_hostile_events_are_cut_not_refused():
    view = View(
        text=("x" * 99 + "🚨") * 1000,  # 100,000 characters
        title="T" * 1_000_000,
        severity="critical",
        category="db" * 500,
        fields=tuple((f"name {i} " * 40, "v" * 5000) for i in range(10_000)),
        links=tuple(Link("Runbook " * 20, f"https://example.com/{i}") for i in range(100)),
        head="Firing again",
        lines=("Seen 3 times",) * 300,
    )
    body = shape(view)
    assert_within_limits(body)
    embed = body["embeds"][0]
    assert embed["title"].endswith("…") and len(embed["title"]) == 256
    assert embed_total(body) > 5500  # the room is used, not wasted
    assert embed["fields"][-1]["value"].endswith("more fields not shown")
    assert "](https://example.com/0)" in embed["description"]  # links survive a huge text
    assert "…" in embed["description"] and embed["footer"]["text"].endswith("…")


@pytest.mark.parametrize("value", [1, 300, 1023, 1024, 5000])
def test_fields_beside_a_huge_text_keep_within_the_embed(value):
    body = shape(View(text="x" * 100_000, fields=tuple((f"k{i}", "v" * value) for i in range(50))))
    assert_within_limits(body)
    assert embed_total(body) > 4096  # the description full, the fields in what is left


def test_many_small_fields_take_25_places_the_last_counting_the_rest():
    body = shape(View(text="t", fields=tuple((f"k{i}", f"v{i}") for i in range(40))))
    fields = body["embeds"][0]["fields"]
    assert len(fields) == 25 and fields[23] == {"name": "k23", "value": "v23", "inline": True}
    assert fields[24]["value"] == "16 more fields not shown"
    assert len(shape(View(text="t", fields=tuple((f"k{i}", "v") for i in range(25))))["embeds"][0]["fields"]) == 25


def test_a_huge_text_alone_fills_the_description():
    description = shape(View(text="é" * 50_000))["embeds"][0]["description"]
    assert len(description) == 4096 and description.endswith("…")


def test_shape_shows_what_the_slack_message_shows():
    view = View(
        text="disk full on db1",
        title="Disk full",
        severity="error",
        category="db",
        fields=(("host", "db1"), ("empty", "  ")),
        links=(Link("Runbook [v2] (new)", "https://wiki/run book(1)"),),
        lines=("Seen 3 times, last at 14:05:09 UTC",),
    )
    body = shape(view)
    embed = body["embeds"][0]
    assert embed["title"] == "Disk full" and embed["author"]["name"] == "❌ [error] db"
    assert embed["description"] == "disk full on db1\n\n[Runbook \\[v2\\] \\(new\\)](https://wiki/run%20book%281%29)"
    assert embed["fields"][0] == {"name": "host", "value": "db1", "inline": True}
    assert embed["fields"][1]["value"] == "-"  # Discord refuses an empty (or blank) value
    assert embed["footer"]["text"] == "Seen 3 times, last at 14:05:09 UTC"
    assert embed["color"] == 0xE74C3C and "Disk full" in body["content"]
    resolved = shape(View(text="disk full on db1", title="Disk full", head="Resolved", resolved=True))
    assert resolved["embeds"][0]["description"].startswith("✅ **Resolved**")
    assert resolved["embeds"][0]["color"] == 0x2ECC71 and "Resolved" in resolved["content"]


def test_inert_keeps_the_text_readable():
    assert inert("@everyone <@123> <#9>") == "@\u200beveryone <@\u200b123> <#\u200b9>"
    assert inert(HOSTILE).replace("\u200b", "") == HOSTILE.replace("\u200b", "")


def message(text="disk full", **kwargs):
    return Message("#gaming", text, view=View(text=text, title="Disk", severity="error", category="db", **kwargs))


async def test_post_with_wait_answers_the_id_and_edit_changes_the_message(discord, session):
    sink = DiscordSink(discord.webhook_url, session)
    assert (sink.name, sink.paced, sink.edits) == ("discord", True, True)
    assert [str(rule) for rule in sink.rate] == ["5/2s", "30/1m"]
    posted = await sink.post(message(HOSTILE))
    received = discord.message(posted.ts)
    assert posted.channel_id == "#gaming" and received is not None
    assert received.embeds[0]["title"] == "Disk"
    await sink.update(posted, message("disk full", head="Resolved", resolved=True))
    assert received.embeds[0]["description"].startswith("✅ **Resolved**") and len(received.edits) == 1
    assert received.allowed == [{"parse": []}, {"parse": []}]  # on the post and on the edit
    assert received.pinged == [] and discord.refusals == [] and len(discord.messages) == 1


async def test_the_webhooks_query_is_kept(discord, session):
    sink = DiscordSink(discord.webhook_url + "?thread_id=777", session)
    posted = await sink.post(message())
    await sink.update(posted, message("again"))
    assert discord.message(posted.ts).thread_id == "777"
    assert [thread for _, _, thread in discord.message(posted.ts).edits] == ["777"]


async def test_a_429_pauses_for_discords_retry_after(discord, session):
    discord.script((429, 1.234))
    with pytest.raises(RateLimited) as caught:
        await DiscordSink(discord.webhook_url, session).post(message())
    assert caught.value.retry_after == 1.234  # the body's seconds, not the header's rounded-up 2


async def test_the_standin_throttles_a_sixth_post_within_two_seconds(discord, session):
    sink = DiscordSink(discord.webhook_url, session)
    for _ in range(5):
        await sink.post(message())
    with pytest.raises(RateLimited) as caught:
        await sink.post(message())
    assert 0 < caught.value.retry_after <= 2 and len(discord.throttled) == 1 and len(discord.messages) == 5


async def test_an_unknown_webhook_is_permanent(discord, session):
    discord.delete_webhook()
    sink = DiscordSink(discord.webhook_url, session)
    with pytest.raises(Permanent, match="Unknown Webhook") as caught:
        await sink.post(message())
    assert not isinstance(caught.value, MessageGone)
    with pytest.raises(Permanent, match="Unknown Webhook") as caught:
        await sink.update(Posted("#gaming", "1"), message())
    assert not isinstance(caught.value, MessageGone)  # the hook is gone, not the message


async def test_an_edit_of_an_unknown_message_is_gone(discord, session):
    sink = DiscordSink(discord.webhook_url, session)
    with pytest.raises(MessageGone, match="Unknown Message"):
        await sink.update(Posted("#gaming", "1234"), message())
    with pytest.raises(MessageGone):
        await sink.update(Posted("#gaming", ""), message())  # a post Discord gave no id for


async def test_a_5xx_is_transient(discord, session):
    discord.script((500,))
    discord.script_edit((502,))
    sink = DiscordSink(discord.webhook_url, session)
    with pytest.raises(Transient):
        await sink.post(message())
    posted = await sink.post(message())
    with pytest.raises(Transient):
        await sink.update(posted, message())


def test_the_standin_refuses_what_discord_refuses():
    with pytest.raises(Exception, match="50035"):
        check_body({"content": "x" * 2001})
    with pytest.raises(Exception, match="50035"):
        check_body({"embeds": [{"description": "x" * 3000}, {"description": "y" * 3001}]})
    with pytest.raises(Exception, match="50035"):
        check_body({"embeds": [{"fields": [{"name": "n", "value": "v"}] * 26}]})
    with pytest.raises(Exception, match="50006"):
        check_body({"content": "   "})
    assert pings("@everyone <@1>", None) == ["<users:1>"] and pings("<@1>", {"parse": []}) == []


async def test_the_standins_429_is_discords(session):
    standin = DiscordStandin(webhook_rate=None, channel_rate=(30, 60.0)).start()  # the channel's 30 a minute
    try:
        for _ in range(30):
            await DiscordSink(standin.webhook_url, session).post(message())
        async with session.post(standin.webhook_url, json={"content": "31st"}) as answer:
            body, headers = await answer.json(), answer.headers
        assert answer.status == 429 and body["global"] is False and 59 < body["retry_after"] <= 60
        assert body["message"] == "The resource is being rate limited." and headers["X-RateLimit-Scope"] == "shared"
        assert headers["Retry-After"] == "60" and headers["X-RateLimit-Limit"] == "30"
        assert {"X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After"} <= set(headers)
    finally:
        standin.stop()
