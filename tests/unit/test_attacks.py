"""Attacks a token with scope ``send``, or a web page in the operator's browser, could make (contract:
"Only the gateway's own controls act", the front doors' ``ts`` bullets, "Open mode is not open to web
pages"). Each was seen to work on the code before its fix; each test fails there."""

from __future__ import annotations

import asyncio
import json

import pytest
from slack_standin import block_actions_payload, signed_action_request

from notifier.errors import StoreUnavailable
from notifier.http import actions
from notifier.http.answers import ApiError
from notifier.http.state import GATEWAY
from notifier.store.keys import key_digest

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
OPS = {"Authorization": "Bearer OPSTOKEN"}  # a token with scope send only
USER, CHANNEL = "U0MALLORY1", "COPS1"  # the stand-in answers #OPS1 as COPS1


@pytest.fixture
async def gateway(make_doors):
    """A gateway whose messages carry controls (signing secret, one mute choice: a button)."""
    return await make_doors(slack_signing_secret=SECRET, slack_channel="#OPS1", mute_choices="1h")


async def posted(slack, text: str) -> dict:
    """The chat.postMessage of the message whose text holds ``text``, once the gateway sent it."""
    for _ in range(200):
        found = [body for method, body in slack.calls if method == "chat.postMessage" and text in body["text"]]
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message with {text!r} reached Slack: {slack.calls}")


async def alert(client, slack, category: str, dedup_key: str) -> tuple[dict, str]:
    """An alert posted through ``/v1/events``: its message as sent, and the ts Slack gave it."""
    event = {"category": category, "text": f"{dedup_key} fired", "dedup_key": dedup_key}
    answer = await client.post("/v1/events", json=event, headers=OPS)
    assert answer.status == 202, await answer.text()
    message = await posted(slack, f"{dedup_key} fired")
    index = [body for method, body in slack.calls if method == "chat.postMessage"].index(message)
    return message, f"1.{index + 1}"


async def click(client, payload: dict) -> tuple[int, dict]:
    body, headers = signed_action_request(SECRET, payload)
    answer = await client.post("/v1/slack/actions", data=body, headers=headers)
    return answer.status, await answer.json()


async def overrides(client) -> dict:
    return (await (await client.get("/v1/limits")).json())["overrides"]


async def muted(client, category: str) -> bool:
    answer = await client.post("/v1/events", json={"category": category, "text": "probe"}, headers=OPS)
    return answer.status == 429


async def store_keys(client) -> list[str]:
    store = client.server.app[GATEWAY].store
    return sorted(k.decode() if isinstance(k, bytes) else k for k in await store.redis.keys("*"))


async def settled_keys(client) -> list[str]:
    """The store's keys once the delivery of what was sent has written all it writes (stable for 0.2 s)."""
    keys = await store_keys(client)
    for _ in range(50):
        await asyncio.sleep(0.2)
        keys, before = await store_keys(client), keys
        if keys == before:
            break
    return keys


def planted(block_id: str, action_id: str, value: dict) -> dict:
    button = {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": "OK"}}
    return {"type": "actions", "block_id": block_id, "elements": [{**button, "value": json.dumps(value)}]}


# --------------------------------------------------------------- controls


@pytest.mark.parametrize("block_id", ["notifier-state-actions:security:", "mine"])
@pytest.mark.parametrize("action_id", ["mute", "unmute", "ack", "unack"])
async def test_a_front_door_refuses_the_gateway_s_control_ids(gateway, block_id, action_id):
    client, _ = gateway
    block = planted(block_id, action_id if block_id == "mine" else "x", {"category": "security", "for": "366d"})
    message = {"channel": "#OPS1", "text": "click me", "blocks": [block]}
    answer = await (await client.post("/api/chat.postMessage", json=message, headers=OPS)).json()
    assert answer["ok"] is False and answer["error"] == "invalid_blocks", answer
    webhook = await client.post("/services/T0/B0/OPSTOKEN", json=message)
    assert (webhook.status, await webhook.text()) == (400, "invalid_blocks")


@pytest.mark.parametrize(
    "block_id",
    [
        "notifier-state-actions:security:",  # the shape before controls were sealed
        "notifier-state-actions:security::AAAAAAAAAAAAAAAAAAAAAA",  # a made-up seal
        "planted",
    ],
)
async def test_a_signed_click_on_a_planted_mute_changes_nothing(gateway, block_id):
    client, slack = gateway
    await alert(client, slack, "db", "lag-1")  # the gateway made its key
    message = {"text": "click me", "blocks": [planted(block_id, "mute", {"category": "security", "for": "366d"})]}
    value = message["blocks"][0]["elements"][0]["value"]
    status, answer = await click(client, block_actions_payload("mute", value, USER, CHANNEL, "1.99", message))
    assert status == 400, answer
    assert await overrides(client) == {} and not await muted(client, "security")


async def test_a_signed_click_on_a_planted_acknowledge_changes_nothing(gateway):
    client, slack = gateway
    await alert(client, slack, "security", "intrusion")
    block_id = f"notifier-state-actions:security:{key_digest('intrusion')}"
    record = client.server.app[GATEWAY].keys.record("security", "intrusion")
    message = {"text": "ack me", "blocks": [planted(block_id, "ack", {"category": "security", "record": record})]}
    value = message["blocks"][0]["elements"][0]["value"]
    status, answer = await click(client, block_actions_payload("ack", value, USER, CHANNEL, "1.99", message))
    assert status == 400, answer
    app = client.server.app[GATEWAY]
    record = await app.store.redis.hgetall(app.keys.record("security", "intrusion"))
    assert record and not {b"ack_by", "ack_by"} & set(record)


@pytest.mark.parametrize("duration", ["366d", "9999d", "1h", "1h~AAAAAAAAAAAAAAAAAAAAAA", "ever"])
async def test_a_mute_lasts_only_a_sealed_choice(gateway, duration):
    """The real button, its duration changed: 400 (9999d answered 500 before), nothing muted."""
    client, slack = gateway
    message, ts = await alert(client, slack, "db", "lag-2")
    payload = block_actions_payload("mute", "{}", USER, CHANNEL, ts, message)
    real = next(
        e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == "mute"
    )
    payload["actions"][0]["value"] = json.dumps({**json.loads(real["value"]), "for": duration})
    status, answer = await click(client, payload)
    assert status == 400, answer
    assert await overrides(client) == {}
    payload["actions"][0]["value"] = real["value"]  # the control as the gateway made it still works
    status, answer = await click(client, payload)
    assert status == 200 and answer["action"] == "mute", answer
    assert [o["rules"] for o in (await overrides(client)).values()] == ["0/1h"]


async def test_a_signature_not_in_ascii_is_401_not_500(gateway):
    client, _ = gateway
    body, headers = signed_action_request(SECRET, {"type": "block_actions"})
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    request = (
        f"POST /v1/slack/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {headers['Content-Type']}\r\n"
        f"X-Slack-Request-Timestamp: {headers['X-Slack-Request-Timestamp']}\r\nContent-Length: {len(body)}\r\n"
    ).encode()
    writer.write(request + "X-Slack-Signature: v0=é€\r\nConnection: close\r\n\r\n".encode() + body)
    status_line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status_line.split()[1] == b"401", status_line


# --------------------------------------------------------------- ts values


async def test_a_token_cannot_edit_an_alert_it_did_not_send(gateway):
    client, slack = gateway
    _, ts = await alert(client, slack, "db", "lag-3")
    before = await settled_keys(client)
    edit = {"channel": CHANNEL, "ts": ts, "text": "resolved, ignore TAMPER"}
    answer = await (await client.post("/api/chat.update", json=edit, headers=OPS)).json()
    assert answer == {"ok": False, "error": "message_not_found"}
    assert await store_keys(client) == before


async def test_made_up_ts_values_write_nothing(gateway):
    client, slack = gateway
    await alert(client, slack, "db", "lag-4")
    before = await settled_keys(client)
    for n in range(30):
        edit = {"channel": CHANNEL, "ts": f"17{n:08d}.000100", "text": "x" * 30_000}
        answer = await (await client.post("/api/chat.update", json=edit, headers=OPS)).json()
        assert answer == {"ok": False, "error": "message_not_found"}
    assert await store_keys(client) == before
    assert [m for m, _ in slack.calls].count("chat.update") == 0


@pytest.mark.parametrize("parent", ["{channel}:{ts}", "{ts}x", "{ts}"])
async def test_a_reply_names_a_message_of_its_own_token_by_a_ts(gateway, parent):
    """A ``thread_ts`` with a colon named another channel's record key; an alert's ts is not the token's."""
    client, slack = gateway
    _, ts = await alert(client, slack, "db", "lag-5")
    reply = {"channel": "#OPS1", "thread_ts": parent.format(channel=CHANNEL, ts=ts), "text": "in its thread"}
    answer = await (await client.post("/api/chat.postMessage", json=reply, headers=OPS)).json()
    assert answer == {"ok": False, "error": "message_not_found"}
    own = await (
        await client.post("/api/chat.postMessage", json={"channel": "#OPS1", "text": "own"}, headers=OPS)
    ).json()
    reply["thread_ts"] = own["ts"]
    assert (await (await client.post("/api/chat.postMessage", json=reply, headers=OPS)).json())["ok"] is True


async def test_a_broadcast_in_an_attachment_typed_plain_text_reaches_slack_as_text(gateway):
    client, slack = gateway
    message = {"attachments": [{"type": "plain_text", "text": "<!channel> wake up"}]}
    assert (await client.post("/services/T0/B0/OPSTOKEN", json=message)).status == 200
    (attachment,) = (await posted_attachments(slack))["attachments"]
    assert attachment["text"] == "&lt;!channel&gt; wake up"


async def posted_attachments(slack) -> dict:
    for _ in range(200):
        found = [b for m, b in slack.calls if m == "chat.postMessage" and b.get("attachments")]
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message with attachments reached Slack: {slack.calls}")


# --------------------------------------------------------------- open mode


@pytest.fixture
async def open_gateway(make_doors):
    return await make_doors(tokens={}, slack_signing_secret=SECRET, slack_channel="#OPS1")


async def test_open_mode_takes_no_change_a_page_could_send_cross_site(open_gateway):
    client, slack = open_gateway
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        for path in ("/v1/dead/requeue", "/v1/alerts/lag-6/ack", "/v1/events"):
            answer = await client.post(path, data=b"", headers={"Content-Type": content_type})
            assert answer.status == 415, (path, content_type, await answer.text())
    await alert(client, slack, "db", "lag-6")
    simple = await client.post("/v1/alerts/lag-6/ack", data="by=mallory", headers={"Content-Type": "text/plain"})
    assert simple.status == 415
    json_call = await client.post("/v1/alerts/lag-6/ack", json={"by": "ops"})
    assert (json_call.status, (await json_call.json())["acknowledged_via"]) == (200, "api")
    assert (await client.post("/v1/dead/requeue", headers={"Content-Type": "application/json"})).status == 200


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "127.0.0.1.attacker.example"])
async def test_open_mode_on_loopback_answers_no_rebound_host(open_gateway, host):
    client, _ = open_gateway
    for path in ("/v1/alerts", "/v1/stats", "/"):
        assert (await client.get(path, headers={"Host": host})).status == 403, path
    webhook = await client.post("/services/T0/B0/any", json={"text": "hi"}, headers={"Host": host})
    assert (webhook.status, await webhook.text()) == (403, "access_denied")
    for allowed in ("localhost:8080", "127.0.0.1", "[::1]:80", "LOCALHOST"):
        assert (await client.get("/v1/alerts", headers={"Host": allowed})).status == 200, allowed


async def test_allowed_hosts_add_names(make_doors):
    client, _ = await make_doors(tokens={}, allowed_hosts="notifier.internal")
    assert (await client.get("/v1/alerts", headers={"Host": "notifier.internal:8080"})).status == 200
    assert (await client.get("/v1/alerts", headers={"Host": "other.internal"})).status == 403


# --------------------------------------------------------------- Socket Mode's clicks


@pytest.mark.parametrize(
    ("raised", "acked"),
    [(None, True), (ApiError(400, "not a control of this gateway"), True), (StoreUnavailable("down"), False)],
)
async def test_a_socket_mode_click_is_acknowledged_unless_the_store_could_not_record_it(monkeypatch, raised, acked):
    async def act(gateway, payload, destination=""):
        if raised is not None:
            raise raised
        return {"status": "ok"}

    monkeypatch.setattr(actions, "act", act)
    assert await actions.socket_click(None, {"type": "block_actions"}) is acked
