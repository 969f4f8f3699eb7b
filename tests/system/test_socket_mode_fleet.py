"""Acting from Slack over Socket Mode (contract: "Acting from Slack", bullet Socket Mode), end to end.

Gateway processes with an app token and no signing secret open their connections to the Socket
Mode stand-in (``socket_mode_standin.py``, served by the Web API stand-in); a click is the
``interactive`` envelope Slack would send, built from the message as the stand-in shows it, pushed
over one connection. It must be applied for the fleet as a click posted to ``/v1/slack/actions``
is, and its envelope acknowledged within 3 s once recorded.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from clicks import (
    API_TOKEN,
    AUTH,
    BOUND,
    USER,
    Replicas,
    control,
    edited_to,
    is_admitted,
    is_muted,
    overrides,
    post_event,
    until_every_replica,
)
from helpers import Gateway, http, slack_env, wait_for
from slack_standin import SlackStandin, block_actions_payload
from socket_mode_standin import APP_TOKEN, SocketModeStandin

ACK_WITHIN = 3.0  # Slack's: an envelope is acknowledged within 3 s
RECONNECT_WITHIN = 10.0  # the contract's


@pytest.fixture
def slack():
    standin = SlackStandin(socket_mode=SocketModeStandin()).start()
    yield standin
    standin.stop()


def env(redis_url: str, slack: SlackStandin, app_token: str = APP_TOKEN) -> dict[str, str]:
    return slack_env(
        redis_url,
        slack,
        NOTIFIER_API_TOKENS=API_TOKEN,
        NOTIFIER_GLOBAL_LIMIT="100000/1h",
        NOTIFIER_CATEGORY_LIMIT="100000/1h",
        NOTIFIER_SLACK_APP_TOKEN=app_token,  # and no signing secret: clicks come over the socket only
        NOTIFIER_CHANNEL_RATE="20/1s",
        NOTIFIER_MUTE_CHOICES="1h",
    )


@pytest.fixture
def make_fleet(redis_url, slack, tmp_path):
    fleet = Replicas(str(tmp_path))

    def make(replicas: int = 2, app_token: str = APP_TOKEN) -> list[Gateway]:
        return fleet.start(env(redis_url, slack, app_token), replicas)

    yield make
    fleet.stop()


def health(gateway: Gateway) -> str:
    status, body, _ = http("GET", gateway.url + "/healthz")
    assert status == 200, body
    return body["socket_mode"]


def gauge(gateway: Gateway) -> float:
    text = http_text(gateway.url + "/metrics")
    line = next(line for line in text.splitlines() if line.startswith("notifier_socket_mode_connected "))
    return float(line.split()[1])


def http_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.read().decode()


async def connected(slack: SlackStandin, gateways: list[Gateway]) -> None:
    """Every replica connected: as many open connections, and each replica says so."""
    await asyncio.to_thread(
        wait_for, lambda: len(slack.socket_mode.open_connections()) == len(gateways), 15, what="connections"
    )
    for gateway in gateways:
        await asyncio.to_thread(wait_for, lambda g=gateway: health(g) == "connected", 10, what="connected")


def click_payload(slack: SlackStandin, ts: str, action_id: str) -> dict:
    message = slack.message_json(ts)
    value = control(message, action_id).get("value")
    return block_actions_payload(action_id, value, USER, slack.channel_id("#alerts"), ts, message)


async def test_a_click_over_one_connection_mutes_the_fleet_and_edits_the_message(make_fleet, slack):
    gateways = make_fleet()
    await connected(slack, gateways)
    assert [gauge(g) for g in gateways] == [1.0, 1.0]
    ts = post_event(gateways[0], slack, "db", "replication lag 12s on db-2", dedup_key="lag-db-2").ts
    assert control(slack.message_json(ts), "mute")["type"] == "button"  # controls without a signing secret

    pushed_at = time.time()
    envelope = await slack.socket_mode.push(click_payload(slack, ts, "mute"))
    ack = await slack.socket_mode.wait_ack(envelope, ACK_WITHIN)
    assert ack.at - pushed_at < ACK_WITHIN
    assert max(await asyncio.to_thread(until_every_replica, gateways, "db", is_muted("db"), pushed_at)) < BOUND
    assert overrides(gateways[1])["db"]["by"] == f"slack:<@{USER}>"
    await asyncio.to_thread(wait_for, edited_to(slack, ts, f"by <@{USER}>"), 20, what="the mute shown")
    assert control(slack.message_json(ts), "unmute")["type"] == "button"
    assert slack.refusals == []


async def test_an_acknowledge_click_records_who_and_an_unreadable_one_changes_nothing(make_fleet, slack):
    gateways = make_fleet()
    await connected(slack, gateways)
    ts = post_event(gateways[1], slack, "disk", "disk of db1 is full", dedup_key="disk-db1").ts

    planted = click_payload(slack, ts, "ack")
    planted["actions"][0]["block_id"] = "notifier-state-actions:disk:"  # a control the gateway did not seal
    for payload in (planted, {"type": "block_actions"}, "not an object"):
        envelope = await slack.socket_mode.push(payload)
        await slack.socket_mode.wait_ack(envelope, ACK_WITHIN)  # acknowledged: nothing to record
    status, body, _ = http("GET", gateways[0].url + "/v1/alerts", headers=AUTH)
    assert status == 200 and body["alerts"][0]["acknowledged_by"] is None, body

    envelope = await slack.socket_mode.push(click_payload(slack, ts, "ack"))
    await slack.socket_mode.wait_ack(envelope, ACK_WITHIN)
    for gateway in gateways:
        status, body, _ = http("GET", gateway.url + "/v1/alerts", headers=AUTH)
        (alert,) = body["alerts"]
        assert (alert["acknowledged_by"], alert["acknowledged_via"]) == (f"<@{USER}>", "slack"), alert


@pytest.mark.parametrize("how", ["drop", "disconnect", "close"])
async def test_a_lost_connection_is_opened_again_within_10_s(make_fleet, slack, how):
    (gateway,) = make_fleet(replicas=1)
    await connected(slack, [gateway])
    lost_at = time.time()
    if how == "disconnect":  # Slack asks the app to move to a new connection
        await slack.socket_mode.disconnect("refresh_requested", close_after=5.0)
    else:
        await getattr(slack.socket_mode, how)()
    fresh = await slack.socket_mode.wait_connection(after=lost_at, timeout=RECONNECT_WITHIN)
    assert fresh.opened_at - lost_at < RECONNECT_WITHIN
    await asyncio.to_thread(wait_for, lambda: health(gateway) == "connected", 5, what="connected again")
    ts = post_event(gateway, slack, "db", "lag 30s on db-5", dedup_key="lag-db-5").ts
    envelope = await slack.socket_mode.push(click_payload(slack, ts, "mute"))
    await slack.socket_mode.wait_ack(envelope, ACK_WITHIN)


async def test_a_click_while_one_replica_is_away_reaches_the_other(make_fleet, slack):
    gateways = make_fleet()
    await connected(slack, gateways)
    ts = post_event(gateways[0], slack, "db", "cpu 97% on db-4", dedup_key="cpu-db-4").ts
    gateways[0].stop(kill=True)  # its connection goes with it; Slack hands clicks to the ones open
    await asyncio.to_thread(
        wait_for, lambda: len(slack.socket_mode.open_connections()) == 1, 10, what="the killed replica's socket gone"
    )
    pushed_at = time.time()
    envelope = await slack.socket_mode.push(click_payload(slack, ts, "mute"))
    await slack.socket_mode.wait_ack(envelope, ACK_WITHIN)
    assert max(await asyncio.to_thread(until_every_replica, gateways[1:], "db", is_muted("db"), pushed_at)) < BOUND


async def test_a_refused_app_token_keeps_events_served(make_fleet, slack):
    (gateway,) = make_fleet(replicas=1, app_token="xapp-1-A0WRONG-0-not-known")
    await asyncio.to_thread(wait_for, lambda: len(slack.socket_mode.calls()) >= 2, 15, what="two attempts")
    assert "invalid_auth" in health(gateway) and gauge(gateway) == 0.0
    status, body, _ = gateway.post({"category": "db", "text": "still served"}, headers=AUTH)
    assert is_admitted(status, body), body
    refused = [line for line in gateway.output().splitlines() if "invalid_auth" in line]
    assert len(refused) == 1, refused  # logged once a minute, not once a try
    assert "xapp-1-A0WRONG" not in gateway.output()
