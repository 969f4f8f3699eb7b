"""The Slack stand-in, checked with the real slack-sdk clients: what it answers and what it refuses."""

from __future__ import annotations

import asyncio
import json
import re
import time
import warnings
from urllib.parse import parse_qs

import pytest
import slack_standin as standin_module
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook import WebhookClient

SlackStandin, TOKEN = standin_module.SlackStandin, standin_module.TOKEN

CHANNEL_ID = re.compile(r"C[A-Z0-9]{10}")
TS = re.compile(r"\d+\.\d{6}")


@pytest.fixture
def slack():
    standin = SlackStandin().start()
    yield standin
    standin.stop()


def client(standin) -> WebClient:
    return WebClient(token=TOKEN, base_url=standin.api_url, timeout=5)


def section(text: str, **extra) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def refused_with(call) -> str:
    with pytest.raises(SlackApiError) as info:
        call()
    assert info.value.response.status_code == 200 and info.value.response["ok"] is False
    return info.value.response["error"]


# ---------------------------------------------------------------- posting


def test_a_post_answers_a_channel_id_and_increasing_ts(slack):
    web = client(slack)
    first = web.chat_postMessage(channel="#alerts", text="one", blocks=[section("one")])
    second = web.chat_postMessage(channel="alerts", text="two")
    third = web.chat_postMessage(channel="C0123ABCDEF", text="three")
    assert CHANNEL_ID.fullmatch(first["channel"]) and first["channel"] == second["channel"]
    assert first["channel"] == slack.channel_id("#alerts") != slack.channel_id("#other")
    assert third["channel"] == "C0123ABCDEF"
    assert TS.fullmatch(first["ts"]) and float(first["ts"]) < float(second["ts"]) < float(third["ts"])
    assert first["message"]["text"] == "one" and first["message"]["blocks"][0]["block_id"]
    assert slack.texts() == ["one", "two", "three"]
    received = slack.received()[0]
    assert (received.channel, received.channel_id, received.ts) == ("#alerts", first["channel"], first["ts"])
    assert [status for _, status in slack.calls] == [200, 200, 200] and slack.refusals == []


def test_an_over_long_section_is_refused_and_recorded(slack):
    web = client(slack)
    web.chat_postMessage(channel="#alerts", text="fits", blocks=[section("x" * 3000)])
    with pytest.raises(SlackApiError) as info:
        web.chat_postMessage(channel="#alerts", text="too long", blocks=[section("x" * 3001)])
    answer = info.value.response
    assert answer["error"] == "invalid_blocks"
    assert answer["errors"] == ["must be less than 3001 characters [json-pointer:/blocks/0/text/text]"]
    (refusal,) = slack.refusals
    assert (refusal.method, refusal.error) == ("chat.postMessage", "invalid_blocks")
    assert "/blocks/0/text/text" in refusal.reason
    assert slack.texts() == ["fits"] and slack.calls[-1][1] == 400


def test_51_blocks_are_refused_50_are_not(slack):
    web = client(slack)
    web.chat_postMessage(channel="#alerts", text="50", blocks=[section(str(i)) for i in range(50)])
    assert (
        refused_with(
            lambda: web.chat_postMessage(channel="#alerts", text="51", blocks=[section(str(i)) for i in range(51)])
        )
        == "invalid_blocks"
    )
    assert "no more than 50 items allowed [json-pointer:/blocks]" in slack.refusals[0].reason


def button(text="Mute 1h", action_id="mute", value="db", **extra) -> dict:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
        **extra,
    }


def fields(n: int, length: int = 10) -> dict:
    return {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * length} for _ in range(n)]}


# (what, blocks that just fit, blocks just over the limit)
LIMITS = [
    ("section fields", [fields(10)], [fields(11)]),
    ("field text", [fields(1, 2000)], [fields(1, 2001)]),
    (
        "header",
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}],
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
    ),
    (
        "header is plain_text",
        [{"type": "header", "text": {"type": "plain_text", "text": "h"}}],
        [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}],
    ),
    (
        "context elements",
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10}],
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
    ),
    (
        "actions elements",
        [{"type": "actions", "elements": [button(action_id=f"a{i}") for i in range(25)]}],
        [{"type": "actions", "elements": [button(action_id=f"a{i}") for i in range(26)]}],
    ),
    (
        "button text",
        [{"type": "actions", "elements": [button(text="b" * 75)]}],
        [{"type": "actions", "elements": [button(text="b" * 76)]}],
    ),
    (
        "action_id",
        [{"type": "actions", "elements": [button(action_id="a" * 255)]}],
        [{"type": "actions", "elements": [button(action_id="a" * 256)]}],
    ),
    (
        "button value",
        [{"type": "actions", "elements": [button(value="v" * 2000)]}],
        [{"type": "actions", "elements": [button(value="v" * 2001)]}],
    ),
    ("accessory button", [section("s", accessory=button())], [section("s", accessory=button(text="b" * 76))]),
    ("block_id", [section("s", block_id="i" * 255)], [section("s", block_id="i" * 256)]),
    (
        "duplicate block_id",
        [section("s", block_id="a"), section("t", block_id="b")],
        [section("s", block_id="a"), section("t", block_id="a")],
    ),
    ("empty mrkdwn", [section("s")], [section("")]),
    ("section needs text or fields", [section("s")], [{"type": "section"}]),
    ("unknown block type", [{"type": "divider"}], [{"type": "blink"}]),
    (  # left to slack-sdk's own models: the stand-in's checks do not look into image blocks
        "image alt_text (slack-sdk)",
        [{"type": "image", "image_url": "https://x.example/a.png", "alt_text": "a" * 2000}],
        [{"type": "image", "image_url": "https://x.example/a.png", "alt_text": "a" * 2001}],
    ),
]


@pytest.mark.parametrize(("what", "fits", "over"), LIMITS, ids=[limit[0] for limit in LIMITS])
def test_block_kit_limits(slack, what, fits, over):
    async def post_both():
        web = AsyncWebClient(token=TOKEN, base_url=slack.api_url, timeout=5)
        await web.chat_postMessage(channel="#alerts", text="fits", blocks=fits)
        with pytest.raises(SlackApiError) as info:
            await web.chat_postMessage(channel="#alerts", text="over", blocks=over)
        return info.value.response["error"]

    assert asyncio.run(post_both()) == "invalid_blocks", what
    assert slack.texts() == ["fits"] and [r.error for r in slack.refusals] == ["invalid_blocks"]


def test_text_limits_and_no_text(slack):
    web = client(slack)
    web.chat_postMessage(channel="#alerts", text="t" * 40_000)
    assert refused_with(lambda: web.chat_postMessage(channel="#alerts", text="t" * 40_001)) == "msg_too_long"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # slack-sdk warns about the missing text, then sends
        assert refused_with(lambda: web.chat_postMessage(channel="#alerts")) == "no_text"
    assert refused_with(lambda: web.chat_postMessage(channel="#not a channel", text="x")) == "channel_not_found"
    assert [r.error for r in slack.refusals] == ["msg_too_long", "no_text", "channel_not_found"]


def test_form_encoded_blocks_and_token_are_read(slack):
    web = WebClient(base_url=slack.api_url, timeout=5)  # no token header: the token goes in the form

    def post(token=TOKEN, **form):
        return web.api_call("chat.postMessage", data={"token": token, "channel": "#alerts", **form})

    assert post(text="ok", blocks=json.dumps([section("fits")]))["ok"]
    assert refused_with(lambda: post(text="form", blocks=json.dumps([section("x" * 3001)]))) == "invalid_blocks"
    assert refused_with(lambda: post(text="form", blocks="[not json")) == "invalid_blocks_format"
    assert refused_with(lambda: post(token="xoxb-wrong", text="x")) == "invalid_auth"
    assert slack.received()[0].blocks == [section("fits")]


def test_webhook_refuses_like_slack(slack):
    hook = WebhookClient(slack.webhook_url, timeout=5)
    assert hook.send(text="fine", blocks=[section("ok")]).status_code == 200
    over = hook.send(text="over", blocks=[section("x" * 3001)])
    assert (over.status_code, over.body) == (400, "invalid_blocks")
    assert [(r.method, r.error) for r in slack.refusals] == [("webhook", "invalid_blocks")]
    assert slack.texts() == ["fine"] and [status for _, status in slack.calls] == [200, 400]


def test_scripted_answers_still_come_first(slack):
    web = client(slack)
    slack.script((429, 7), ("error", "channel_not_found"), (503,))
    with pytest.raises(SlackApiError) as info:
        web.chat_postMessage(channel="#alerts", text="a")
    assert info.value.response.status_code == 429 and info.value.response.headers["Retry-After"] == "7"
    assert refused_with(lambda: web.chat_postMessage(channel="#alerts", text="b")) == "channel_not_found"
    with pytest.raises(SlackApiError):
        web.chat_postMessage(channel="#alerts", text="c")
    web.chat_postMessage(channel="#alerts", text="d")
    assert [status for _, status in slack.calls] == [429, 400, 503, 200] and slack.refusals == []


# ---------------------------------------------------------------- editing and threads


def test_update_edits_the_message_and_keeps_its_history(slack):
    web = client(slack)
    posted = web.chat_postMessage(channel="#alerts", text="firing", blocks=[section("firing")])
    edited = web.chat_update(
        channel=posted["channel"], ts=posted["ts"], text="Seen 2 times", blocks=[section("Seen 2 times")]
    )
    assert (edited["channel"], edited["ts"], edited["text"]) == (posted["channel"], posted["ts"], "Seen 2 times")
    web.chat_update(channel=posted["channel"], ts=posted["ts"], text="Resolved")  # text alone drops the blocks
    message = slack.message(posted["ts"], "#alerts")
    assert (message.text, message.blocks) == ("Resolved", [])
    assert [e.text for e in message.edits] == ["Seen 2 times", "Resolved"]
    assert [(u[1], u[2], u[3]) for u in slack.updates] == [
        (posted["channel"], posted["ts"], "Seen 2 times"),
        (posted["channel"], posted["ts"], "Resolved"),
    ]
    assert slack.texts() == ["Resolved"] and [s for _, s in slack.update_calls] == [200, 200]


def test_update_refusals(slack):
    web = client(slack)
    posted = web.chat_postMessage(channel="#alerts", text="firing")
    assert (
        refused_with(lambda: web.chat_update(channel=posted["channel"], ts="1.000001", text="x")) == "message_not_found"
    )
    assert refused_with(lambda: web.chat_update(channel="#alerts", ts=posted["ts"], text="x")) == "channel_not_found"
    assert (
        refused_with(
            lambda: web.chat_update(channel=posted["channel"], ts=posted["ts"], text="x", blocks=[section("x" * 3001)])
        )
        == "invalid_blocks"
    )
    slack.script_update(("error", "cant_update_message"))
    assert (
        refused_with(lambda: web.chat_update(channel=posted["channel"], ts=posted["ts"], text="x"))
        == "cant_update_message"
    )
    assert [(r.method, r.error) for r in slack.refusals] == [
        ("chat.update", "message_not_found"),
        ("chat.update", "channel_not_found"),
        ("chat.update", "invalid_blocks"),
    ]
    assert slack.message(posted["ts"]).edits == []


def test_thread_replies(slack):
    web = client(slack)
    root = web.chat_postMessage(channel="#alerts", text="firing")
    reply = web.chat_postMessage(channel="#alerts", text="resolved", thread_ts=root["ts"])
    assert reply["message"]["thread_ts"] == root["ts"]
    assert [m.text for m in slack.replies(root["ts"])] == ["resolved"]
    assert slack.message(reply["ts"]).thread_ts == root["ts"]
    assert (
        refused_with(lambda: web.chat_postMessage(channel="#alerts", text="x", thread_ts="1.000001"))
        == "thread_not_found"
    )
    assert (
        refused_with(lambda: web.chat_postMessage(channel="#other", text="x", thread_ts=root["ts"]))
        == "thread_not_found"
    )
    assert [r.error for r in slack.refusals] == ["thread_not_found", "thread_not_found"]


# ---------------------------------------------------------------- rate limits


def test_update_budget_answers_429_with_retry_after():
    standin = SlackStandin(update_rate=(3, 60)).start()
    try:
        web = client(standin)
        posted = web.chat_postMessage(channel="#alerts", text="firing")
        for n in range(3):
            web.chat_update(channel=posted["channel"], ts=posted["ts"], text=f"Seen {n + 2} times")
        with pytest.raises(SlackApiError) as info:
            web.chat_update(channel=posted["channel"], ts=posted["ts"], text="Seen 5 times")
        answer = info.value.response
        assert (answer.status_code, answer["error"]) == (429, "ratelimited")
        assert 1 <= int(answer.headers["Retry-After"]) <= 60
        assert standin.max_in_window("update", 60) == 3 and standin.message(posted["ts"]).text == "Seen 4 times"
        assert [(t[1], t[2]) for t in standin.throttled] == [("chat.update", posted["channel"])]
        assert standin.refusals == [] and [s for _, s in standin.update_calls] == [200, 200, 200, 429]
    finally:
        standin.stop()


def test_default_update_budget_is_tier_3(slack):
    assert slack.update_rate == (50, 60) and slack.post_rate is None


def test_post_rate_per_channel_when_asked():
    standin = SlackStandin(post_rate=(2, 1)).start()
    try:
        web = client(standin)
        web.chat_postMessage(channel="#alerts", text="1")
        web.chat_postMessage(channel="#alerts", text="2")
        web.chat_postMessage(channel="#other", text="other channel")
        with pytest.raises(SlackApiError) as info:
            web.chat_postMessage(channel="#alerts", text="3")
        assert info.value.response.status_code == 429 and info.value.response.headers["Retry-After"] == "1"
        assert standin.max_in_window("post", 1, channel="#alerts") == 2
        assert standin.max_in_window("post", 1) == 3
        assert [s for _, s in standin.calls] == [200, 200, 200, 429]
        assert [(t[1], t[2], t[3]) for t in standin.throttled] == [
            ("chat.postMessage", standin.channel_id("#alerts"), 1)
        ]
    finally:
        standin.stop()


def test_posts_are_not_throttled_by_default(slack):
    web = client(slack)
    for i in range(30):
        web.chat_postMessage(channel="#alerts", text=str(i))
    assert len(slack.texts()) == 30 and slack.throttled == []
    assert slack.max_in_window("post", 0.000001) == 1 and slack.max_in_window("post", 60, channel="#alerts") == 30


# ---------------------------------------------------------------- interactivity


def test_signed_action_request_verifies_with_slack_sdk(slack):
    web = client(slack)
    posted = web.chat_postMessage(
        channel="#alerts",
        text="disk full",
        blocks=[section("disk full"), {"type": "actions", "elements": [button(action_id="mute", value="db")]}],
    )
    message = slack.message_json(posted["ts"])
    payload = standin_module.block_actions_payload("mute", "db", "U123", posted["channel"], posted["ts"], message)
    body, headers = standin_module.signed_action_request("s3cret", payload)
    verifier = SignatureVerifier("s3cret")
    assert verifier.is_valid(body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])
    assert verifier.is_valid_request(body, headers)
    assert not verifier.is_valid(body + b"x", headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    sent = json.loads(parse_qs(body.decode())["payload"][0])
    assert sent["type"] == "block_actions" and sent["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": posted["channel"],
        "is_ephemeral": False,
    }
    (action,) = sent["actions"]
    assert (action["action_id"], action["value"], action["type"]) == ("mute", "db", "button")
    assert action["block_id"] == message["blocks"][1]["block_id"]
    old_body, old_headers = standin_module.signed_action_request("s3cret", payload, timestamp=time.time() - 600)
    assert not verifier.is_valid_request(old_body, old_headers)  # more than 5 minutes away
