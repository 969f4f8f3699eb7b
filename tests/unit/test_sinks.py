"""Sinks against the Slack stand-in, through the real slack-sdk."""

import aiohttp
import pytest
from slack_standin import TOKEN

from notifier.destinations.registry import build
from notifier.destinations.spec import from_settings
from notifier.errors import Permanent, RateLimited, Transient
from notifier.settings import Settings, load_settings
from notifier.slack.messages import event_message
from notifier.slack.sinks import ConsoleSink, SlackApiSink, WebhookSink


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


def make_sink(settings: Settings, session: aiohttp.ClientSession):
    """The sink the gateway builds for ``settings`` (one destination: the bot token, the webhook or the console)."""
    return build([from_settings(settings)], session, settings.channel_rate).default.inner


def api_sink(slack, session, token=TOKEN):
    return make_sink(load_settings(slack_bot_token=token, slack_api_url=slack.api_url), session)


def webhook_sink(slack, session):
    return make_sink(load_settings(slack_webhook_url=slack.webhook_url), session)


MESSAGE = event_message("#alerts", {"category": "db", "text": "disk full", "severity": "error"})


@pytest.mark.parametrize("make", [api_sink, webhook_sink])
async def test_delivers(slack, session, make):
    await make(slack, session).post(MESSAGE)
    (received,) = slack.received()
    assert "disk full" in received.text and received.blocks
    if make is api_sink:
        assert received.channel == "#alerts" and received.raw.get("link_names") in (False, 0, "0", None)


@pytest.mark.parametrize("make", [api_sink, webhook_sink])
async def test_429_is_rate_limited_with_retry_after(slack, session, make):
    slack.script((429, 7))
    with pytest.raises(RateLimited) as info:
        await make(slack, session).post(MESSAGE)
    assert info.value.retry_after == 7
    assert len(slack.calls) == 1  # slack-sdk did not retry on its own


@pytest.mark.parametrize("make", [api_sink, webhook_sink])
async def test_5xx_is_transient_and_not_retried_inside_the_sdk(slack, session, make):
    slack.script((503,))
    with pytest.raises(Transient):
        await make(slack, session).post(MESSAGE)
    assert len(slack.calls) == 1


async def test_slack_errors_are_permanent(slack, session):
    slack.script(("error", "channel_not_found"))
    with pytest.raises(Permanent, match="channel_not_found"):
        await api_sink(slack, session).post(MESSAGE)
    with pytest.raises(Permanent, match="invalid_auth"):
        await api_sink(slack, session, token="xoxb-wrong").post(MESSAGE)


async def test_unreachable_slack_is_transient(session):
    from helpers import free_port

    settings = load_settings(slack_bot_token=TOKEN, slack_api_url=f"http://127.0.0.1:{free_port()}/api/")
    with pytest.raises(Transient):
        await make_sink(settings, session).post(MESSAGE)


async def test_sink_choice(session, capsys):
    assert isinstance(make_sink(load_settings(slack_bot_token="t"), session), SlackApiSink)
    assert isinstance(make_sink(load_settings(slack_webhook_url="http://x/"), session), WebhookSink)
    console = make_sink(load_settings(), session)
    assert isinstance(console, ConsoleSink)
    await console.post(MESSAGE)
    assert "disk full" in capsys.readouterr().out
