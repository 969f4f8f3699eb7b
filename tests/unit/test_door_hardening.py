"""The front doors hold a token to its channels and its own messages, show every broadcast
mention as text, read no channel Slack has not, and answer a body they cannot read with a 4xx
that names no token."""

from __future__ import annotations

import asyncio
import logging

import pytest

from notifier.config import parse_config
from notifier.errors import ConfigError
from notifier.http.slack_compat.payload import read_post


@pytest.fixture
async def doors(make_doors):
    return await make_doors()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def post_message(client, token: str, **message) -> dict:
    return await (await client.post("/api/chat.postMessage", json=message, headers=bearer(token))).json()


async def test_a_reply_names_only_a_message_of_its_own_token(doors):
    client, _ = doors
    parent = await post_message(client, "OPSTOKEN", channel="#ops", text="ops parent")
    reply = {"channel": "#payments-a", "thread_ts": parent["ts"], "text": "into #ops?"}
    answer = await post_message(client, "PAYTOKEN", **reply)
    assert answer == {"ok": False, "error": "message_not_found"}
    webhook = await client.post("/services/T0/B0/PAYTOKEN", json=reply)
    assert (webhook.status, await webhook.text()) == (400, "message_not_found")
    stats = await (await client.get("/v1/stats")).json()
    assert stats["accepted"] == 1 and stats["dropped"] == 0  # the parent only


async def test_a_token_updates_only_its_own_messages(doors):
    client, _ = doors
    theirs = await post_message(client, "OPSTOKEN", channel="#ops", text="ops parent")
    edit = {"channel": "#payments-x", "ts": theirs["ts"], "text": "edited by pay"}
    answer = await (await client.post("/api/chat.update", json=edit, headers=bearer("PAYTOKEN"))).json()
    assert answer == {"ok": False, "error": "message_not_found"}
    own = await post_message(client, "PAYTOKEN", channel="#payments-x", text="pay's")
    mine = {"channel": "#payments-x", "ts": own["ts"], "text": "edited by pay"}
    assert (await (await client.post("/api/chat.update", json=mine, headers=bearer("PAYTOKEN"))).json())["ok"]


RICH_BROADCAST = {
    "blocks": [
        {
            "type": "rich_text",
            "elements": [{"type": "rich_text_section", "elements": [{"type": "broadcast", "range": "here"}]}],
        }
    ]
}
PLAIN_TEXT_HOLDING_MRKDWN = {
    "attachments": [
        {
            "type": "plain_text",
            "text": "<!channel> kept as written: plain text",
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "<!everyone> look"}}],
        }
    ]
}


def test_a_rich_text_broadcast_element_is_shown_as_a_word():
    message = read_post(RICH_BROADCAST, "invalid_payload", "invalid_blocks", mentions=False).message
    section = message["blocks"][0]["elements"][0]["elements"]
    assert section == [{"type": "text", "text": "@here"}]
    assert read_post(RICH_BROADCAST, "invalid_payload", "invalid_blocks", mentions=True).message == RICH_BROADCAST


def test_mentions_in_an_attachment_typed_plain_text_are_shown_as_text():
    """An attachment's text is mrkdwn whatever its ``type`` says: Slack broadcast ``<!channel>`` from one."""
    message = read_post(PLAIN_TEXT_HOLDING_MRKDWN, "invalid_payload", "invalid_blocks", mentions=False).message
    (attachment,) = message["attachments"]
    assert attachment["text"] == "&lt;!channel&gt; kept as written: plain text"
    assert attachment["blocks"][0]["text"]["text"] == "&lt;!everyone&gt; look"


@pytest.mark.parametrize("channel", ["\x00", "a b", "#ops\n", "{}", "#" + "x" * 81])
async def test_a_channel_slack_has_not_is_refused_and_counted_nowhere(doors, channel):
    client, _ = doors
    answer = await post_message(client, "OPSTOKEN", channel=channel, text="x")
    assert answer == {"ok": False, "error": "channel_not_found"}
    assert (await (await client.get("/v1/stats")).json())["dropped"] == 0


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/services/T0/B0/OPSTOKEN", {}, 400),
        ("/api/chat.postMessage", bearer("OPSTOKEN"), 200),  # Slack's Web API: ok false
        ("/v1/events", bearer("OPSTOKEN"), 400),
    ],
)
async def test_a_body_that_cannot_be_decoded_is_a_4xx_naming_no_token(doors, caplog, path, headers, status):
    client, _ = doors
    broken = {"Content-Type": "application/json", "Content-Encoding": "gzip", **headers}
    with caplog.at_level(logging.INFO):
        answer = await client.post(path, data=b"\x1f\x8b\x08\x00garbagegarbage", headers=broken)
    assert answer.status == status
    # (aiohttp's access log, which `notifier serve` turns off, is the test client's; aiohttp's own
    # server log keeps its traceback of draining the broken body, without the path)
    logged = [r for r in caplog.records if r.name != "aiohttp.access"]
    assert not any("OPSTOKEN" in r.getMessage() for r in logged)
    assert not any(r.name.startswith("notifier") and r.levelno >= logging.ERROR for r in logged)
    if path.startswith("/api/"):
        assert (await answer.json()) == {"ok": False, "error": "invalid_payload"}


def test_a_token_pasted_where_its_hash_belongs_is_not_shown():
    with pytest.raises(ConfigError) as caught:
        parse_config({"tokens": {"ci": {"sha256": "a-raw-token-given-by-mistake", "scopes": ["send"]}}})
    assert "a-raw-token" not in str(caught.value) and "tokens.ci.sha256" in str(caught.value)


async def test_a_reply_to_a_refused_reply_is_refused_once_the_limits_have_room_again(make_doors):
    client, _ = await make_doors(category_limit="1/1s")
    first = await post_message(client, "OPSTOKEN", channel="#ops", text="admitted")
    refused = await post_message(client, "OPSTOKEN", channel="#ops", text="refused by the limits")
    reply = await post_message(client, "OPSTOKEN", channel="#ops", text="reply", thread_ts=refused["ts"])
    assert first["ok"] and refused["ok"] and reply["ok"]  # refusals answer as Slack's success
    await asyncio.sleep(1.1)  # the category has room again
    again = await post_message(client, "OPSTOKEN", channel="#ops", text="reply to the reply", thread_ts=reply["ts"])
    edit = {"channel": "#ops", "ts": reply["ts"], "text": "edited"}
    edited = await client.post("/api/chat.update", json=edit, headers=bearer("OPSTOKEN"))
    assert again["ok"] and edited.headers["X-Notifier-Outcome"] == "dropped"
    stats = await (await client.get("/v1/stats")).json()
    # the first only: the refused message, its reply, the reply to that and the edit are all refused
    assert (stats["accepted"], stats["dropped"]) == (1, 4)


@pytest.mark.parametrize("method", ["auth.test", "chat.postMessage", "chat.update"])
@pytest.mark.parametrize("content_type", [None, "application/octet-stream", "text/plain"])
async def test_a_wrong_bearer_token_is_answered_before_the_body_is_read(doors, method, content_type):
    """Slack checks the token first: ``invalid_auth``, whatever the body's type (aiohttp's default for
    an empty body is application/octet-stream, which answered ``invalid_form_data``)."""
    client, _ = doors
    headers = {"Authorization": "Bearer WRONG", **({"Content-Type": content_type} if content_type else {})}
    answer = await (await client.post(f"/api/{method}", data=b"\xff not a form", headers=headers)).json()
    assert answer == {"ok": False, "error": "invalid_auth"}
    missing = {k: v for k, v in headers.items() if k != "Authorization"}
    answer = await (await client.post(f"/api/{method}", data=b"\xff", headers=missing)).json()
    assert answer == {"ok": False, "error": "not_authed"}, answer
