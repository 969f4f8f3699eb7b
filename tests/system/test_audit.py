"""The audit log across a fleet (contract: "Audit log"): two gateway processes share a real redis; each
kind of change made on one is in ``GET /v1/audit`` on the other within a second, with its author, its
face and what was there before and after; filters and pages work there; no entry holds a token or a
secret; the count bound holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import redis
import slack_standin
from clicks import API_TOKEN, USER, Replicas, control, post_event
from helpers import Gateway, http, slack_env, wait_for
from slack_standin import block_actions_payload, signed_action_request

from notifier.store.keys import Keys

SECRET = "0c7a1d9e4b2f6a8c3e5d7f9a1b3c5e7d"
ADMIN_TOKEN, READ_TOKEN = "admin-token-9f8e7d6c5b", "reader-token-1a2b3c4d5e"
ADMIN, READER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}, {"Authorization": f"Bearer {READ_TOKEN}"}
BOUND = 1.0  # seconds from a change's answer to its entry on another replica


def env(redis_url: str, slack, **extra: str) -> dict[str, str]:
    tokens = f"{ADMIN_TOKEN},{READ_TOKEN},{API_TOKEN}"  # env-1, env-2, env-3 (events)
    far = {"NOTIFIER_GLOBAL_LIMIT": "100000/1h", "NOTIFIER_CATEGORY_LIMIT": "100000/1h"}
    settings = {"NOTIFIER_SLACK_SIGNING_SECRET": SECRET, "NOTIFIER_MUTE_CHOICES": "1h", **far, **extra}
    return slack_env(redis_url, slack, **{"NOTIFIER_API_TOKENS": tokens, **settings})


@pytest.fixture
def make_fleet(redis_url, slack, tmp_path):
    fleet = Replicas(str(tmp_path))
    yield lambda **extra: fleet.start(env(redis_url, slack, **extra), 2)
    fleet.stop()


def entries(gateway: Gateway, query: str = "") -> dict:
    status, answer, _ = http("GET", f"{gateway.url}/v1/audit{query}", headers=READER)
    assert status == 200, answer
    return answer


def change(gateway: Gateway, method: str, path: str, body: object = None) -> dict:
    status, answer, _ = http(method, gateway.url + path, body, headers=ADMIN)
    assert status == 200, answer
    return answer


def click(gateway: Gateway, slack, ts: str, action_id: str) -> None:
    message = slack.message_json(ts)
    payload = block_actions_payload(
        action_id, control(message, action_id)["value"], USER, slack.channel_id("#alerts"), ts, message
    )
    body, headers = signed_action_request(SECRET, payload)
    status, answer, _ = http("POST", gateway.url + "/v1/slack/actions", body, headers)
    assert status == 200, answer


def seen_on(other: Gateway, action: str, known: set[str], since: float) -> tuple[dict, float]:
    """The newest entry of ``action`` that ``other`` shows and that was not there before, and how long
    after ``since`` it showed."""

    def found():
        newest = entries(other, f"?action={action}&limit=1")["entries"]
        return newest[0] if newest and newest[0]["id"] not in known else None

    entry = wait_for(found, 5, interval=0.01, what=f"{action} in the other replica's audit log")
    return entry, time.monotonic() - since


def test_each_change_made_on_one_replica_is_in_the_audit_log_of_the_other(make_fleet, slack, redis_url):
    one, other = make_fleet()
    posted = post_event(one, slack, "db", "TOPSECRET-EVENT-TEXT replication lag", dedup_key="lag-7")
    client = redis.Redis.from_url(redis_url)
    dead = Keys("notifier").dead
    client.xadd(dead, {"e": json.dumps({"id": "ev-dead-1", "t": "x"}), "reason": "channel_not_found"})
    window = {"for": "1h", "categories": ["db"], "note": "db upgrade, ask #dba", "via": "console"}
    steps = [
        ("ack", lambda: click(one, slack, posted.ts, "ack")),
        ("override.put", lambda: click(one, slack, posted.ts, "mute")),
        ("unack", lambda: change(one, "DELETE", "/v1/alerts/lag-7/ack")),
        ("override.put", lambda: change(one, "PUT", "/v1/limits/web", {"rules": "5/1m", "via": "cli"})),
        ("override.delete", lambda: change(one, "DELETE", "/v1/limits/web")),
        ("window.open", lambda: change(one, "PUT", "/v1/windows/upgrade", window)),
        ("window.end", lambda: change(one, "DELETE", "/v1/windows/upgrade")),
        ("requeue", lambda: change(one, "POST", "/v1/dead/requeue", {})),
    ]
    got, delays = {}, []
    for action, make in steps:
        known = {e["id"] for e in entries(other, "?limit=1000")["entries"]}
        make()
        entry, took = seen_on(other, action, known, time.monotonic())
        got.setdefault(action, []).append(entry)
        delays.append(took)
    print(f"\nchange answered -> its entry on the other replica: {', '.join(f'{d * 1000:.0f} ms' for d in delays)}")
    assert max(delays) < BOUND

    (ack,), (mute, web), (unack,) = got["ack"], got["override.put"], got["unack"]
    assert (ack["by"], ack["via"], ack["target"]) == (
        f"slack:{USER}",
        "slack",
        {"dedup_key": "lag-7", "category": "db"},
    )
    assert (mute["by"], mute["via"], mute["before"]) == (f"slack:{USER}", "slack", None)
    assert mute["after"]["rules"] == "0/1h" and mute["target"] == {"level": "category", "value": "db"}
    assert (unack["by"], unack["via"]) == ("env-1", "api") and unack["before"]["by"] == f"<@{USER}>"
    assert (web["by"], web["via"], web["after"]["rules"]) == ("env-1", "cli", "5/1m")
    (removed,) = got["override.delete"]
    assert removed["before"]["rules"] == "5/1m" and removed["after"] is None
    (opened,), (ended,) = got["window.open"], got["window.end"]
    assert opened["via"] == "console" and opened["after"]["note"] == window["note"] and opened["before"] is None
    assert ended["before"]["end"] > ended["after"]["end"]
    (requeued,) = got["requeue"]
    assert requeued["target"]["dead_letters"] == 1 and requeued["after"] == {"ids": ["ev-dead-1"]}

    every = entries(other, "?limit=1000")
    assert len(every["entries"]) == len(steps) and every["next"] is None
    assert [e["id"] for e in every["entries"]] == sorted((e["id"] for e in every["entries"]), reverse=True)
    text = json.dumps(every)
    for secret in (ADMIN_TOKEN, READ_TOKEN, API_TOKEN, SECRET, slack_standin.TOKEN, "TOPSECRET-EVENT-TEXT"):
        assert secret not in text, secret
    logged = [json.loads(line) for g in (one, other) for line in g.output().splitlines() if line.startswith("{")]
    assert sorted(logged, key=lambda e: e["id"], reverse=True) == every["entries"], "each entry is one JSON line"


def test_filters_pages_and_the_count_bound_across_replicas(make_fleet, redis_url):
    one, other = make_fleet(NOTIFIER_AUDIT_MAX_ENTRIES="5")
    for n in range(12):  # both replicas write; the bound is the fleet's
        change((one, other)[n % 2], "PUT", "/v1/limits/db", {"rules": f"{n + 1}/1m"})
    change(one, "DELETE", "/v1/limits/db")
    assert redis.Redis.from_url(redis_url).xlen(Keys("notifier").audit) == 5
    page = entries(other, "?limit=2&action=override.put")
    seen = page["entries"]
    while page["next"]:
        page = entries(other, f"?limit=2&action=override.put&before={page['next']}")
        seen += page["entries"]
    assert [e["after"]["rules"] for e in seen] == ["12/1m", "11/1m", "10/1m", "9/1m"]
    assert next(e["action"] for e in entries(one, "?by=env-1")["entries"]) == "override.delete"
    assert entries(one, "?by=env-2")["entries"] == []
    status, answer, _ = http("GET", f"{other.url}/v1/audit?limit=5000", headers=READER)
    assert status == 422 and "limit" in answer["error"] + json.dumps(answer.get("details")), answer


def cli(*args: str) -> str:
    """What ``notifier ARGS`` prints, once it succeeded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    done = subprocess.run(
        [sys.executable, "-m", "notifier", *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_notifier_audit_prints_the_entries_newest_first(make_fleet):
    one, other = make_fleet()
    cli("mute", "db", "30m", "--url", one.url, "--token", ADMIN_TOKEN)
    change(one, "PUT", "/v1/limits/web", {"rules": "5/1m"})
    change(one, "DELETE", "/v1/limits/web")
    printed = cli(
        "audit", "--limit", "2", "--action", "override.put", "--by", "env-1", "--url", other.url, "--token", READ_TOKEN
    )
    print(printed)
    web, db = printed.splitlines()
    assert "override.put" in web and "value=web" in web and "by env-1 via api" in web and '"5/1m"' in web
    assert "value=db" in db and "by env-1 via cli" in db and '"0/30m"' in db and db < web
