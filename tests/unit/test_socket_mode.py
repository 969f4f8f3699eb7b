"""The gateway's Socket Mode connection against the Socket Mode stand-in, with a fake ``handle``."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time

import pytest
import slack_standin
from socket_mode_standin import APP_TOKEN, SocketModeStandin

from notifier.slack.socket_mode import SocketMode

LOGGER = "notifier.slack.socket_mode"


@pytest.fixture
def standin():
    slack = slack_standin.SlackStandin(socket_mode=SocketModeStandin()).start()
    yield slack
    slack.stop()


@pytest.fixture
def sm(standin) -> SocketModeStandin:
    return standin.socket_mode


class Handle:
    """A fake ``handle``: records each payload and answers ``answer`` (or raises it) after ``delay``."""

    def __init__(self, answer: bool | Exception = True, delay: float = 0.0) -> None:
        self.answer, self.delay = answer, delay
        self.payloads: list[dict] = []
        self.release = asyncio.Event()
        self.hold = False  # wait for release before answering

    async def __call__(self, payload: dict) -> bool:
        self.payloads.append(payload)
        if self.hold:
            await self.release.wait()
        await asyncio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
async def gateway(standin):
    """Make and start a SocketMode against the stand-in; every one made is stopped afterwards."""
    made: list[SocketMode] = []

    async def make(handle=None, token: str = APP_TOKEN, **options) -> SocketMode:
        socket_mode = SocketMode(token, standin.api_url, handle or Handle(), **options)
        made.append(socket_mode)
        await socket_mode.start()
        return socket_mode

    yield make
    for socket_mode in made:
        await socket_mode.stop()


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def connected(socket_mode: SocketMode, timeout: float = 5.0) -> None:
    await eventually(lambda: socket_mode.status == "connected", timeout)
    assert socket_mode.connected


def click(value: str = "db") -> dict:
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
                        "value": value,
                        "text": {"type": "plain_text", "text": "Mute"},
                    }
                ],
            }
        ],
    }
    return slack_standin.block_actions_payload("mute", value, "U0CLICKER1", "C0ALERTS001", message["ts"], message)


def lines(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and text in r.getMessage()]


async def test_start_returns_at_once_and_the_connection_opens(gateway, sm):
    began = time.monotonic()
    socket_mode = await gateway()
    assert time.monotonic() - began < 0.1
    assert socket_mode.status == "connecting" and not socket_mode.connected
    await connected(socket_mode)
    (connection,) = sm.open_connections(APP_TOKEN)
    assert connection.greeted


async def test_a_click_is_handed_over_and_acked_within_3_seconds(gateway, sm):
    handle = Handle()
    await connected(await gateway(handle))
    payload = click()
    envelope_id = await sm.push(payload)
    ack = await sm.wait_ack(envelope_id, timeout=3)
    assert handle.payloads == [payload]
    assert ack.at - sm.pushed_envelope(envelope_id).at < 3
    assert sm.garbage == [] and sm.stray_acks == []


@pytest.mark.parametrize("answer", [False, RuntimeError("the store is down")], ids=["false", "raises"])
async def test_a_click_not_recorded_is_not_acked(gateway, sm, caplog, answer):
    handle = Handle(answer)
    await connected(await gateway(handle))
    envelope_ids = [await sm.push(click()) for _ in range(3)]
    await eventually(lambda: len(handle.payloads) == 3)
    await asyncio.sleep(0.5)
    assert [sm.acked(envelope_id) for envelope_id in envelope_ids] == [None] * 3
    failures = lines(caplog, "was not recorded")
    assert len(failures) == (1 if isinstance(answer, Exception) else 0)  # three failures, one line


async def test_a_slow_click_does_not_hold_up_the_next(gateway, sm):
    handle = Handle()
    socket_mode = await gateway(handle)
    await connected(socket_mode)
    handle.hold = True
    slow = await sm.push(click("slow"))
    await eventually(lambda: len(handle.payloads) == 1)
    handle.hold = False
    quick = await sm.push(click("quick"))
    await sm.wait_ack(quick, timeout=3)
    assert sm.acked(slow) is None
    handle.release.set()
    await sm.wait_ack(slow, timeout=3)


async def test_beyond_the_bound_clicks_are_left_for_slack_to_send_again(gateway, sm, caplog):
    handle = Handle()
    handle.hold = True
    await connected(await gateway(handle, max_in_flight=2))
    envelope_ids = [await sm.push(click(str(n))) for n in range(4)]
    await eventually(lambda: len(handle.payloads) == 2)
    await asyncio.sleep(0.3)
    assert len(handle.payloads) == 2  # the third and fourth were not taken
    handle.release.set()
    await sm.wait_ack(envelope_ids[0]), await sm.wait_ack(envelope_ids[1])
    await asyncio.sleep(0.3)
    assert sm.acked(envelope_ids[2]) is None and sm.acked(envelope_ids[3]) is None
    assert len(lines(caplog, "left for Slack to resend")) == 1


async def test_other_envelopes_are_acked_and_logged_once_per_kind(gateway, sm, caplog):
    handle = Handle()
    await connected(await gateway(handle))
    odd = []
    for _ in range(3):
        odd.append(await sm.push({"type": "event_callback"}, envelope_type="events_api"))
        odd.append(await sm.push("not json"))  # a payload that is no object
        odd.append(await sm.push({"type": "view_submission"}))
        odd.append(await sm.push(None))
        await sm.send_raw("{not json")
        await sm.send_raw(json.dumps({"type": "interactive", "payload": click()}))  # no envelope_id
    for envelope_id in odd:
        await sm.wait_ack(envelope_id, timeout=3)
    assert handle.payloads == []
    logged = lines(caplog, "ignoring")
    assert len(logged) == 6, logged  # one line per kind, not one per envelope
    assert any("'events_api'" in line for line in logged) and any("'view_submission'" in line for line in logged)


@pytest.mark.parametrize("reason", ["refresh_requested", "warning"])
async def test_after_disconnect_a_new_connection_opens(gateway, sm, reason):
    socket_mode = await gateway()
    await connected(socket_mode)
    (first,) = sm.open_connections()
    asked = time.time()
    await sm.disconnect(reason)
    second = await sm.wait_connection(after=asked, timeout=10)
    await connected(socket_mode, timeout=10 - (time.time() - asked))
    await eventually(lambda: not first.open)  # the old one was closed by the gateway
    assert [c.id for c in sm.open_connections()] == [second.id]
    await sm.wait_ack(await sm.push(click()), timeout=3)


@pytest.mark.parametrize("trouble", ["close", "drop", "stall"])
async def test_after_the_connection_is_lost_a_new_one_opens_within_10_seconds(gateway, sm, caplog, trouble):
    caplog.set_level(logging.INFO, logger=LOGGER)
    socket_mode = await gateway()
    await connected(socket_mode)
    lost = time.time()
    await getattr(sm, trouble)()
    await sm.wait_connection(after=lost, timeout=10)
    await connected(socket_mode, timeout=10 - (time.time() - lost))
    await sm.wait_ack(await sm.push(click()), timeout=3)
    await eventually(lambda: len(lines(caplog, "Mode connected")) == 2)  # the way back is logged, not only the loss
    assert len(lines(caplog, "connection lost")) == 1


@pytest.mark.parametrize(
    ("token", "error"), [("xapp-1-A0OTHER-1-unknown", "invalid_auth"), (slack_standin.TOKEN, "not_allowed_token_type")]
)
async def test_a_refused_token_is_retried_and_logged_once(gateway, sm, caplog, token, error):
    socket_mode = await gateway(token=token, retry_pause=(0.05, 0.1))
    await eventually(lambda: len(sm.calls(token)) >= 5)
    assert socket_mode.status == f"refused: {error}" and not socket_mode.connected
    assert len(lines(caplog, f"refused: {error}")) == 1
    await socket_mode.stop()
    assert socket_mode.status == "off"
    calls = len(sm.calls(token))
    await asyncio.sleep(0.3)
    assert len(sm.calls(token)) == calls  # stopped means stopped


async def test_an_api_url_that_is_not_slack_or_not_there_is_retried_quietly(standin, caplog):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}/api/"
    cases = [(standin.webhook_url + "/", "refused: HTTP 400"), (nowhere, "unreachable: ClientConnectorError")]
    for api_url, status in cases:  # the webhook answers 400 and a text body, not Slack's JSON
        socket_mode = SocketMode(APP_TOKEN, api_url, Handle(), retry_pause=(0.05, 0.1))
        await socket_mode.start()
        await eventually(lambda socket_mode=socket_mode, status=status: socket_mode.status == status)
        await asyncio.sleep(0.5)  # several more attempts
        await socket_mode.stop()
        assert len(lines(caplog, status)) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_it_connects_with_a_fresh_url_once_slack_takes_connections_again(standin, gateway, sm):
    # URLs that expire: slack-sdk alone would retry the first one, refused for good after 1 s.
    sm.ticket_ttl = 1.0
    await sm.refuse(2.0)
    socket_mode = await gateway(retry_pause=(0.2, 0.5))
    await asyncio.sleep(1.0)
    assert sm.open_connections() == [] and socket_mode.status == "connecting"
    await eventually(lambda: socket_mode.status == "unreachable: no WebSocket within 5s", timeout=6)
    await connected(socket_mode, timeout=5)
    assert len(sm.calls(APP_TOKEN)) >= 2  # a new URL for the new attempt


async def test_stop_ends_every_task_and_closes_the_connection(gateway, sm, caplog):
    before = asyncio.all_tasks()
    handle = Handle()
    socket_mode = await gateway(handle)
    await connected(socket_mode)
    handle.hold = True
    await sm.push(click())  # a click still in hand at stop
    await eventually(lambda: handle.payloads)
    await sm.push({"type": "event_callback"}, envelope_type="events_api")
    await socket_mode.stop()
    assert asyncio.all_tasks() - before == set()
    assert socket_mode.status == "off" and not socket_mode.connected
    await eventually(lambda: sm.open_connections() == [])
    assert [c.how_closed for c in sm.connections] == ["client"]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
