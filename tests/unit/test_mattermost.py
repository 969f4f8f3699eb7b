"""The mattermost kind: one post within 16,383 characters whatever the event, mentioning no one, and its sink.

The stand-in (``tests/support/mattermost_standin.py``) is the oracle: it rewrites a post as Mattermost
does (Slack's ``<!channel>`` and ``<@ID>``, ``<url|text>``) and runs a port of Mattermost's mention
parser over what Mattermost parses, so a shape it finds no mention in notifies no one.
"""

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mattermost_standin import POST, MattermostStandin, mentions, size

from notifier.destinations.base import Message, Posted
from notifier.destinations.mattermost import MattermostSink, inert, shape
from notifier.errors import Permanent, RateLimited, Transient
from notifier.view import Link, View

USERS = {"U123": "bob", "U0ALL": "all"}
HOSTILE = "@channel @ALL @here @bob <!channel> <!here|x> <@U123> <https://evil|@here> x:@here _@all `@channel`"
as_mattermost = MattermostStandin(rate=None, users=USERS)  # its _post is what Mattermost makes of a body


@pytest.fixture
def mattermost():
    standin = MattermostStandin(users=USERS).start()
    yield standin
    standin.stop()


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


def found(body: dict) -> list[str]:
    """Whom Mattermost would mention for ``body`` (the stand-in's port of its parser)."""
    return as_mattermost._post(body).mentions


def every_string_mentions(body: dict) -> list[str]:
    """Mentions in any string of the post, were Mattermost to parse them all (titles and fields too)."""
    post = as_mattermost._post(body)
    attachment = post.attachments[0]
    parts = [post.message, attachment.get("title", ""), attachment.get("fallback", ""), attachment.get("footer", "")]
    parts += [attachment["text"]] + [f["title"] + " " + f["value"] for f in attachment.get("fields", [])]
    return [m for part in parts for m in mentions(part, {"@bob", "@all"})]


views = st.builds(
    View,
    text=st.text(max_size=20_000),
    title=st.text(max_size=600),
    severity=st.sampled_from(["", "info", "warning", "error", "critical", "bogus"]),
    category=st.text(max_size=300),
    fields=st.lists(st.tuples(st.text(max_size=400), st.text(max_size=3000)), max_size=30).map(tuple),
    links=st.lists(st.builds(Link, st.text(max_size=150), st.text(max_size=300)), max_size=30).map(tuple),
    head=st.text(max_size=300),
    lines=st.lists(st.text(max_size=800), max_size=4).map(tuple),
    resolved=st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(views)
def test_every_shape_is_one_post_within_16383_characters(view):
    body = shape(view)
    assert size(body) <= POST and body["text"] and len(body["attachments"]) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("@<>!|:._-`channelhrbo ALU0123\n")), max_size=200))
def test_no_text_mentions_anyone(text):
    view = View(text=text, title=text, category=text, fields=((text, text),), lines=(text,), head=text)
    body = shape(view)
    assert found(body) == [] and every_string_mentions(body) == []


def test_the_oracle_finds_what_mattermost_would_mention():
    raw = {"text": HOSTILE, "attachments": [{"text": "<!all>", "title": "@here"}]}
    assert set(found(raw)) == {"@channel", "@all", "@here", "@bob"}
    assert found({"text": "`@channel` in code, ops@example.com"}) == []
    shaped = shape(View(text=HOSTILE, title=HOSTILE, severity="error", category=HOSTILE))
    assert found(shaped) == [] and every_string_mentions(shaped) == []


def test_inert_keeps_addresses_and_the_text_readable():
    assert inert("@channel mail ops@example.com <!here> <@U1>") == (
        "@\u200bchannel mail ops@example.com <\u200b!here> <\u200b@\u200bU1>"
    )
    assert inert(HOSTILE).replace("\u200b", "") == HOSTILE


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
    attachment = body["attachments"][0]
    assert 16_000 < size(body) <= POST  # the room is used, not wasted
    assert attachment["title"].endswith("…") and attachment["fields"][-1]["value"].endswith("more fields not shown")
    assert "](https://example.com/0)" in attachment["text"] and attachment["footer"].endswith("…")


@pytest.mark.parametrize("value", [1, 700, 2047, 2048, 5000])
def test_fields_beside_a_huge_text_keep_within_the_post(value):
    body = shape(View(text="x" * 100_000, fields=tuple((f"k{i}", "v" * value) for i in range(50))))
    assert POST - 100 < size(body) <= POST


def test_shape_shows_what_the_slack_message_shows():
    view = View(
        text="disk full on db1",
        title="Disk full",
        severity="error",
        category="db",
        fields=(("host", "db1"),),
        links=(Link("Runbook [v2]", "https://wiki/run(1)"),),
        lines=("Seen 3 times, last at 14:05:09 UTC",),
    )
    body = shape(view)
    attachment = body["attachments"][0]
    assert body["text"] == ":x: [error] db" and attachment["title"] == "Disk full"
    assert attachment["text"] == "disk full on db1\n\n[Runbook \\[v2\\]](https://wiki/run%281%29)"
    assert attachment["fields"] == [{"title": "host", "value": "db1", "short": True}]
    assert attachment["color"] == "#E74C3C" and attachment["footer"] == "Seen 3 times, last at 14:05:09 UTC"
    assert attachment["fallback"] == "[error] db: Disk full"
    resolved = shape(View(text="disk full on db1", title="Disk full", severity="error", head="Resolved", resolved=True))
    assert resolved["text"].startswith(":white_check_mark: **Resolved**")  # a new post, naming the alert
    assert resolved["attachments"][0]["title"] == "Disk full" and resolved["attachments"][0]["color"] == "#2ECC71"


def message(text=HOSTILE):
    return Message("chat", text, view=View(text=text, title="Disk full", severity="error", category="db"))


async def test_post_and_no_edits(mattermost, session):
    sink = MattermostSink(mattermost.webhook_url, session)
    assert (sink.name, sink.paced, sink.edits, [str(r) for r in sink.rate]) == ("mattermost", True, False, ["10/1s"])
    assert await sink.post(message()) == Posted("chat", "")
    (post,) = mattermost.received()
    assert post.attachments[0]["title"] == "Disk full" and post.mentions == [] and mattermost.refusals == []
    with pytest.raises(Permanent):
        await sink.update(Posted("chat", ""), message())


async def test_a_429_pauses_for_its_retry_after(mattermost, session):
    mattermost.script((429, 3))
    with pytest.raises(RateLimited) as caught:
        await MattermostSink(mattermost.webhook_url, session).post(message())
    assert caught.value.retry_after == 3


async def test_the_standin_throttles_past_its_burst(session):
    standin = MattermostStandin(rate=(10, 2)).start()  # a burst of 2 beyond the rate: 3 at once, then 10 a second
    try:
        sink = MattermostSink(standin.webhook_url, session)
        for _ in range(3):
            await sink.post(message("fine"))
        with pytest.raises(RateLimited) as caught:
            await sink.post(message("one too many"))
        assert caught.value.retry_after == 1 and len(standin.throttled) == 1 and len(standin.messages) == 3
    finally:
        standin.stop()


async def test_a_deleted_hook_or_channel_is_permanent_and_a_5xx_transient(mattermost, session):
    sink = MattermostSink(mattermost.webhook_url, session)
    mattermost.script((404,), (503,))
    with pytest.raises(Permanent, match="HTTP 404"):
        await sink.post(message())
    with pytest.raises(Transient):
        await sink.post(message())
    mattermost.delete_webhook()
    with pytest.raises(Permanent, match="Invalid webhook"):
        await sink.post(message())


def test_the_standin_refuses_what_would_be_split_or_empty():
    assert size({"text": "x" * POST}) == POST
    assert size({"text": "x", "attachments": [{"text": "y" * POST, "color": "#FFFFFF"}]}) == POST + 1


async def test_the_standins_429_is_mattermosts(session):
    standin = MattermostStandin(rate=(10, 0)).start()  # no burst: one call each 0.1 s
    try:
        await MattermostSink(standin.webhook_url, session).post(message("first"))
        async with session.post(standin.webhook_url, json={"text": "second"}) as answer:
            text, headers = await answer.text(), answer.headers
        assert (answer.status, text) == (429, "limit exceeded\n")
        assert headers["Retry-After"] == "1" and headers["X-RateLimit-Limit"] == "1"
        assert headers["X-RateLimit-Remaining"] == "0" and "X-RateLimit-Reset" in headers
    finally:
        standin.stop()
