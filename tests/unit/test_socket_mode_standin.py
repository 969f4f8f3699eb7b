"""The Socket Mode stand-in, checked with slack-sdk's own aiohttp ``SocketModeClient``."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
import slack_standin
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from socket_mode_standin import APP_TOKEN, SocketModeStandin


@pytest.fixture
def standin():
    slack = slack_standin.SlackStandin(socket_mode=SocketModeStandin()).start()
    yield slack
    slack.stop()


class Heard:
    """What slack-sdk's client passed to its listeners; it acks every ``interactive`` request."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self.requests: list = []

    async def on_message(self, client, message: dict, raw: str | None) -> None:
        self.messages.append(message)

    async def on_request(self, client, request) -> None:
        self.requests.append(request)
        if request.type == "interactive":
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))

    def of_type(self, kind: str) -> list[dict]:
        return [m for m in self.messages if m.get("type") == kind]


@pytest.fixture
async def sdk(standin):
    heard = Heard()
    client = SocketModeClient(
        app_token=APP_TOKEN, web_client=AsyncWebClient(base_url=standin.api_url, timeout=5), ping_interval=1
    )
    client.message_listeners.append(heard.on_message)
    client.socket_mode_request_listeners.append(heard.on_request)
    yield client, heard
    await client.close()


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def click() -> dict:
    message = {
        "ts": "1700000000.000100",
        "blocks": [
            {
                "type": "actions",
                "block_id": "controls",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "mute",
                        "value": "db",
                        "text": {"type": "plain_text", "text": "Mute"},
                    }
                ],
            }
        ],
    }
    return slack_standin.block_actions_payload("mute", "db", "U0CLICKER1", "C0ALERTS001", message["ts"], message)


async def test_a_client_connects_and_is_greeted(standin, sdk):
    client, heard = sdk
    await client.connect()
    await eventually(lambda: heard.of_type("hello"))
    (hello,) = heard.of_type("hello")
    assert hello["num_connections"] == 1
    assert hello["connection_info"] == {"app_id": slack_standin.APP_ID}
    assert hello["debug_info"]["host"]
    (connection,) = standin.socket_mode.open_connections(APP_TOKEN)
    assert connection.greeted and connection.app_id == slack_standin.APP_ID
    assert [call.outcome for call in standin.socket_mode.calls(APP_TOKEN)] == ["ok"]


async def test_a_click_reaches_the_client_and_its_ack_is_recorded(standin, sdk):
    client, heard = sdk
    await client.connect()
    connection = await standin.socket_mode.wait_connection()
    payload = click()
    envelope_id = await standin.socket_mode.push(payload, connection=connection.id)
    ack = await standin.socket_mode.wait_ack(envelope_id)
    (request,) = heard.requests
    assert (request.type, request.envelope_id, request.payload) == ("interactive", envelope_id, payload)
    assert request.accepts_response_payload is False
    assert ack.connection == connection.id and ack.payload is None
    assert ack.at - standin.socket_mode.pushed_envelope(envelope_id).at < 3  # Slack's 3 seconds
    assert standin.socket_mode.stray_acks == [] and standin.socket_mode.garbage == []


@pytest.mark.parametrize("reason", ["refresh_requested", "warning"])
async def test_after_disconnect_the_client_opens_a_new_connection(standin, sdk, reason):
    client, _ = sdk
    await client.connect()
    first = await standin.socket_mode.wait_connection()
    asked = time.time()
    await standin.socket_mode.disconnect(reason)
    second = await standin.socket_mode.wait_connection(after=asked, timeout=10)
    assert second.id != first.id
    await eventually(lambda: not first.open)
    assert first.how_closed == "client"  # slack-sdk closes the old connection itself
    assert [c.id for c in standin.socket_mode.open_connections()] == [second.id]
    assert len(standin.socket_mode.calls(APP_TOKEN)) == 2  # a new URL for the new connection
    envelope_id = await standin.socket_mode.push(click())
    assert (await standin.socket_mode.wait_ack(envelope_id)).connection == second.id


@pytest.mark.parametrize("trouble", ["drop", "close"])
async def test_after_the_socket_is_cut_or_closed_the_client_reconnects(standin, sdk, trouble):
    client, _ = sdk
    await client.connect()
    first = await standin.socket_mode.wait_connection()
    cut = time.time()
    assert await getattr(standin.socket_mode, trouble)() == first.id
    assert first.how_closed == {"drop": "dropped", "close": "closed"}[trouble]
    second = await standin.socket_mode.wait_connection(after=cut, timeout=10)
    assert second.id != first.id


async def test_a_stalled_link_is_noticed_by_the_clients_heartbeat(standin, sdk):
    client, _ = sdk
    await client.connect()
    first = await standin.socket_mode.wait_connection()
    stalled = time.time()
    await standin.socket_mode.stall()
    second = await standin.socket_mode.wait_connection(after=stalled, timeout=10)
    assert second.id != first.id and first.how_closed == "stalled"


async def test_tokens_it_does_not_know_are_refused_like_slack(standin):
    async def error_for(token: str) -> str:
        with pytest.raises(SlackApiError) as info:
            await AsyncWebClient(base_url=standin.api_url).apps_connections_open(app_token=token)
        return info.value.response["error"]

    assert await error_for("xapp-1-A0OTHER-1-unknown") == "invalid_auth"
    assert await error_for(slack_standin.TOKEN) == "not_allowed_token_type"  # a bot token
    async with aiohttp.ClientSession() as session:  # the token as a POST parameter, not in the header
        answer = await session.post(standin.api_url + "apps.connections.open", data={"token": APP_TOKEN})
        assert (answer.status, await answer.json()) == (200, {"ok": False, "error": "not_authed"})
    outcomes = [call.outcome for call in standin.socket_mode.calls()]
    assert outcomes == ["invalid_auth", "not_allowed_token_type", "not_authed"]
    assert standin.socket_mode.connections == []


async def test_a_url_opens_one_connection_and_refusing_answers_503(standin):
    web = AsyncWebClient(base_url=standin.api_url)
    url = (await web.apps_connections_open(app_token=APP_TOKEN))["url"]
    assert url.startswith("ws://127.0.0.1:") and "/link/?ticket=" in url
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            assert (await ws.receive_json())["type"] == "hello"
            with pytest.raises(aiohttp.WSServerHandshakeError) as used:
                await session.ws_connect(url)
            assert used.value.status == 401
        await standin.socket_mode.refuse(0.5)
        fresh = (await web.apps_connections_open(app_token=APP_TOKEN))["url"]
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(fresh)
        assert refused.value.status == 503
        await asyncio.sleep(0.6)
        async with session.ws_connect(fresh) as ws:  # a refused handshake did not use the URL up
            assert (await ws.receive_json())["type"] == "hello"
    await standin.socket_mode.refuse(5, error="internal_error")
    with pytest.raises(SlackApiError) as info:
        await web.apps_connections_open(app_token=APP_TOKEN)
    assert info.value.response["error"] == "internal_error"


async def test_close_drop_and_stall_look_to_a_client_as_they_would_from_slack(standin):
    web = AsyncWebClient(base_url=standin.api_url)
    async with aiohttp.ClientSession() as session:
        for trouble in ("close", "drop", "stall"):
            url = (await web.apps_connections_open(app_token=APP_TOKEN))["url"]
            async with session.ws_connect(url, autoping=False) as ws:
                assert (await ws.receive_json())["type"] == "hello"
                await getattr(standin.socket_mode, trouble)()
                if trouble == "stall":  # nothing comes, not even a pong, and the link stays up
                    await ws.ping(b"anyone?")
                    with pytest.raises(asyncio.TimeoutError):
                        await ws.receive(timeout=0.5)
                    assert not ws.closed
                    continue
                message = await ws.receive(timeout=2)
                if trouble == "close":  # a close frame, as a server going away politely sends
                    assert (message.type, message.data) == (aiohttp.WSMsgType.CLOSE, 1000)
                else:  # the connection just ends: no close frame
                    assert message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)
                    assert ws.closed
    assert [c.how_closed for c in standin.socket_mode.connections] == ["closed", "dropped", "stalled"]
