"""The audit log (contract: "Audit log"): every change, who made it and from where, read back through
``GET /v1/audit``; each kind of change whichever face made it, filters and pages, bounds, no secret."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from doors_app import sha
from slack_standin import block_actions_payload, signed_action_request

from notifier.http.state import GATEWAY

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
BOSS, READER, SENDER = "BOSSTOKEN-5c1f0e2d", "READERTOKEN-77aa", "SENDERTOKEN-0b9e"
TOKENS = {
    "boss": {"sha256": sha(BOSS), "scopes": ["send", "read", "ack", "admin"]},
    "reader": {"sha256": sha(READER), "scopes": ["read"]},
    "sender": {"sha256": sha(SENDER), "scopes": ["send"]},
}
USER, CHANNEL = "U0AUDITOR1", "COPS1"  # the stand-in answers #OPS1 as COPS1


def auth(token: str = BOSS) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def gateway(make_doors):
    return await make_doors(TOKENS, slack_signing_secret=SECRET, slack_channel="#OPS1", mute_choices="1h")


async def audit(client, query: str = "", token: str = READER) -> dict:
    answer = await client.get(f"/v1/audit{query}", headers=auth(token))
    assert answer.status == 200, await answer.text()
    return await answer.json()


async def ok(answer) -> dict:
    assert answer.status == 200, await answer.text()
    return await answer.json()


async def posted(slack, text: str) -> tuple[dict, str]:
    """The message holding ``text`` once the gateway sent it, and the ts the stand-in gave it."""
    for _ in range(200):
        sent = [body for method, body in slack.calls if method == "chat.postMessage"]
        found = [i for i, body in enumerate(sent) if text in body["text"]]
        if found:
            return sent[found[0]], f"1.{found[0] + 1}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message with {text!r} reached Slack")


def control(message: dict, action_id: str) -> dict:
    return next(
        e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id
    )


async def click(client, message: dict, ts: str, action_id: str) -> dict:
    value = control(message, action_id)["value"]
    body, headers = signed_action_request(SECRET, block_actions_payload(action_id, value, USER, CHANNEL, ts, message))
    return await ok(await client.post("/v1/slack/actions", data=body, headers=headers))


async def test_overrides_put_replaced_and_removed_say_who_from_where_and_before_after(gateway, caplog):
    client, _ = gateway
    caplog.set_level(logging.INFO, logger="audit")
    await ok(await client.put("/v1/limits/db", json={"rules": "20/30m"}, headers=auth()))
    await ok(await client.put("/v1/limits/db", json={"rules": "5/1m", "for": "1h", "via": "console"}, headers=auth()))
    await ok(await client.delete("/v1/limits/db", headers=auth()))
    removed, replaced, put = (await audit(client))["entries"]
    assert put["action"] == "override.put" and put["by"] == "boss" and put["via"] == "api"
    assert put["target"] == {"level": "category", "value": "db"}
    assert put["before"] is None and put["after"] == {"rules": "20/30m", "until": None}
    assert replaced["via"] == "console" and replaced["before"]["rules"] == "20/30m"
    assert replaced["after"]["rules"] == "5/1m" and replaced["after"]["until"].endswith("Z")
    assert removed["action"] == "override.delete" and removed["before"]["rules"] == "5/1m"
    assert removed["after"] is None and removed["at"].endswith("Z") and removed["at"][:2] == "20"
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "audit"]
    assert [e["id"] for e in logged] == [put["id"], replaced["id"], removed["id"]]


async def test_a_removal_that_removed_nothing_records_nothing(gateway):
    client, _ = gateway
    assert (await client.delete("/v1/limits/db", headers=auth())).status == 404
    assert (await audit(client))["entries"] == []


async def test_slack_clicks_are_recorded_as_the_user_via_slack(gateway):
    client, slack = gateway
    event = {"category": "db", "text": "lag-audit fired SECRET-TEXT-3141", "dedup_key": "lag-audit"}
    assert (await client.post("/v1/events", json=event, headers=auth(SENDER))).status == 202
    message, ts = await posted(slack, "lag-audit fired")
    assert (await click(client, message, ts, "ack"))["action"] == "ack"
    assert (await click(client, message, ts, "mute"))["action"] == "mute"
    await ok(await client.delete("/v1/alerts/lag-audit/ack", headers=auth()))
    unack, mute, ack = (await audit(client))["entries"]
    assert ack["action"] == "ack" and ack["by"] == f"slack:{USER}" and ack["via"] == "slack"
    assert ack["target"] == {"dedup_key": "lag-audit", "category": "db"}
    assert ack["before"] is None and ack["after"] == {"by": f"<@{USER}>", "via": "slack"}
    assert mute["action"] == "override.put" and mute["by"] == f"slack:{USER}" and mute["via"] == "slack"
    assert mute["after"]["rules"] == "0/1h"
    assert unack["action"] == "unack" and unack["by"] == "boss" and unack["via"] == "api"
    assert unack["before"] == {"by": f"<@{USER}>", "via": "slack"} and unack["after"] is None
    assert "SECRET-TEXT-3141" not in json.dumps([unack, mute, ack])


async def test_an_acknowledgement_names_its_author_and_the_name_it_shows(gateway):
    client, _ = gateway
    event = {"category": "db", "text": "disk full", "dedup_key": "disk-1"}
    assert (await client.post("/v1/events", json=event, headers=auth(SENDER))).status == 202
    await ok(await client.post("/v1/alerts/disk-1/ack", json={"by": "alice", "via": "cli"}, headers=auth()))
    (entry,) = (await audit(client))["entries"]
    assert (entry["by"], entry["via"], entry["after"]) == ("boss", "cli", {"by": "alice", "via": "cli"})


async def test_windows_opened_and_ended_and_requeues_are_recorded(gateway):
    client, _ = gateway
    window = {"for": "1h", "categories": ["db"], "note": "db upgrade", "via": "cli"}
    opened = await ok(await client.put("/v1/windows/upgrade", json=window, headers=auth()))
    await ok(await client.delete("/v1/windows/upgrade", headers=auth()))
    gw = client.server.app[GATEWAY]
    for n in range(3):
        await gw.store.redis.xadd(gw.keys.dead, {"e": json.dumps({"id": f"ev-{n}", "t": "x"}), "reason": "gone"})
    moved = await ok(await client.post("/v1/dead/requeue", json={"via": "console"}, headers=auth()))
    assert moved["count"] == 3
    requeue, ended, open_ = (await audit(client))["entries"]
    assert open_["action"] == "window.open" and open_["target"] == {"window": "upgrade"} and open_["via"] == "cli"
    assert open_["before"] is None and open_["after"]["note"] == "db upgrade"
    assert open_["after"]["categories"] == ["db"] and opened["categories"] == ["db"]
    assert ended["action"] == "window.end" and ended["before"]["end"] == open_["after"]["end"]
    assert ended["after"]["end"] < ended["before"]["end"] and ended["via"] == "api"
    assert requeue["action"] == "requeue" and requeue["via"] == "console" and requeue["by"] == "boss"
    assert requeue["target"] == {"dead_letters": 3, "asked": "all"}
    assert requeue["after"] == {"ids": ["ev-0", "ev-1", "ev-2"]}


async def test_http_callers_cannot_claim_to_be_slack(gateway):
    client, _ = gateway
    for answer in (
        await client.put("/v1/limits/db", json={"rules": "1/1m", "via": "slack"}, headers=auth()),
        await client.post("/v1/dead/requeue", json={"via": "slack"}, headers=auth()),
        await client.put("/v1/windows/w", json={"for": "1h", "categories": ["db"], "via": "slack"}, headers=auth()),
    ):
        assert answer.status == 422, await answer.text()
    assert (await audit(client))["entries"] == []


async def test_filters_and_pages(gateway):
    client, _ = gateway
    for n in range(7):
        await ok(await client.put("/v1/limits/db", json={"rules": f"{n + 1}/1m"}, headers=auth()))
    await ok(await client.delete("/v1/limits/db", headers=auth()))
    every = (await audit(client))["entries"]
    assert len(every) == 8 and [e["id"] for e in every] == sorted((e["id"] for e in every), reverse=True)
    seen, before = [], ""
    while True:
        page = await audit(client, f"?action=override.put&limit=3{before}")
        seen += page["entries"]
        if page["next"] is None:
            break
        before = f"&before={page['next']}"
    assert [e["after"]["rules"] for e in seen] == [f"{n}/1m" for n in range(7, 0, -1)]
    assert (await audit(client, "?by=nobody"))["entries"] == []
    assert len((await audit(client, "?by=boss&action=override.delete"))["entries"]) == 1
    middle = every[3]["at"]
    newer = (await audit(client, f"?since={middle}"))["entries"]
    older = (await audit(client, f"?until={middle}"))["entries"]
    assert newer[-1]["at"] >= middle and all(e["at"] <= middle for e in older) and len(newer) + len(older) >= 8


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("?limit=0", 422),
        ("?limit=1001", 422),
        ("?limit=ten", 422),
        ("?since=yesterday", 422),
        ("?until=2026-01-01T00:00:00", 422),
        ("?before=nonsense", 400),
        ("?before=1-2-3", 400),
        ("?before=99999999999999999999-0", 400),
        ("?limit=1&limit=2", 422),
    ],
)
async def test_bad_parameters_are_refused_with_a_reason(gateway, query, status):
    client, _ = gateway
    answer = await client.get(f"/v1/audit{query}", headers=auth(READER))
    assert answer.status == status, await answer.text()
    assert (await answer.json())["error"]


async def test_reading_needs_scope_read(gateway):
    client, _ = gateway
    assert (await client.get("/v1/audit")).status == 401
    assert (await client.get("/v1/audit", headers=auth(SENDER))).status == 403
    assert (await client.get("/v1/audit?limit=1000", headers=auth(READER))).status == 200


async def test_no_entry_holds_a_token_or_a_secret(gateway):
    client, slack = gateway
    await ok(await client.put("/v1/limits/db", json={"rules": "1/1m"}, headers=auth()))
    event = {"category": "db", "text": "leak", "dedup_key": "k"}
    assert (await client.post("/v1/events", json=event, headers=auth(SENDER))).status == 202
    message, ts = await posted(slack, "leak")
    await click(client, message, ts, "ack")
    text = json.dumps(await audit(client))
    assert len(json.loads(text)["entries"]) == 2
    for secret in (BOSS, READER, SENDER, SECRET, sha(BOSS), "xoxb-test"):
        assert secret not in text


@pytest.mark.parametrize("settings", [{"audit_max_entries": 3}, {"audit_retention": "1s"}])
async def test_the_oldest_entries_go_first(make_doors, settings):
    client, _ = await make_doors(TOKENS, **settings)
    for n in range(6):
        await ok(await client.put("/v1/limits/db", json={"rules": f"{n + 1}/1m"}, headers=auth()))
        if "audit_retention" in settings and n == 2:
            await asyncio.sleep(1.1)
    entries = (await audit(client))["entries"]
    assert [e["after"]["rules"] for e in entries] == ["6/1m", "5/1m", "4/1m"]


async def test_before_the_first_possible_id_is_an_empty_page(gateway):
    client, _ = gateway
    await ok(await client.put("/v1/limits/db", json={"rules": "1/1m"}, headers=auth()))
    assert await audit(client, "?before=0-0") == {"entries": [], "next": None}
    assert await audit(client, "?before=00-000&since=5e-324") == {"entries": [], "next": None}
