"""Who may do what: every route against no token, an unknown token and a token of each scope.

The tokens are made by ``notifier token new`` and their lines written into the configuration
file, as an operator does. The routes come from the application's own router, so a route added
later without an expectation here fails :func:`test_every_route_has_an_expectation`. What each
route needs is written here from the contract, not read from the code. A refused request
changes nothing: counts, overrides, windows, acknowledgements and dead letters are compared
before and after.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
from helpers import Gateway, http, wait_for
from slack_standin import TOKEN as SLACK_TOKEN
from slack_standin import SlackStandin

from notifier.config import load_config
from notifier.http.app import create_app
from notifier.settings import load_settings

OPEN, ANY = "open", "any token"
SCOPES = ("send", "read", "ack", "admin")
ENV_TOKEN = "env-Secret-5b1e"  # NOTIFIER_API_TOKENS: every scope, named env-1
ALERT = {"category": "db", "text": "disk full", "dedup_key": "disk-db1", "severity": "error"}
WEBHOOK = {"version": "4", "alerts": [{"labels": {"alertname": "Matrix"}, "fingerprint": "f-matrix"}]}
TREE = """\
levels:
  - {name: global, rules: 10000/1h}
  - {name: source, key: source, rules: 1000/1h, values: {limited: 2/1h}}
  - {name: channel, key: channel, rules: 1000/1h}
  - {name: category, key: category, rules: 1000/1h}
routes:
  - match: {category: payments}
    channel: "#payments"
"""


class Sample(NamedTuple):
    """A request of one route: what it needs (the contract), and what a caller allowed may get."""

    need: str
    path: str
    body: Any = None
    ok: tuple[int, ...] = (200,)


# What each route needs, by the contract's "Who may do what", and a request of it. A refused
# request that got through would change something the comparison sees: requeue all, ack, mute.
SAMPLES: dict[tuple[str, str], Sample] = {
    ("POST", "/v1/events"): Sample("send", "/v1/events", {"category": "matrix", "text": "hi"}, (202,)),
    ("POST", "/v1/alertmanager"): Sample("send", "/v1/alertmanager", WEBHOOK),
    ("GET", "/v1/stats"): Sample(OPEN, "/v1/stats"),
    ("GET", "/v1/limits"): Sample(OPEN, "/v1/limits"),
    ("PUT", "/v1/limits/{level}"): Sample("admin", "/v1/limits/db", {"rules": "0/1h", "for": "1h"}),
    ("DELETE", "/v1/limits/{level}"): Sample("admin", "/v1/limits/db", None, (200, 404)),
    ("PUT", "/v1/limits/{level}/{value}"): Sample("admin", "/v1/limits/channel/%23muted", {"rules": "0/1h"}),
    ("DELETE", "/v1/limits/{level}/{value}"): Sample("admin", "/v1/limits/channel/%23muted", None, (200, 404)),
    ("GET", "/v1/windows"): Sample(OPEN, "/v1/windows"),
    ("PUT", "/v1/windows/{name}"): Sample("admin", "/v1/windows/mw", {"for": "1h", "categories": ["db"]}),
    ("DELETE", "/v1/windows/{name}"): Sample("admin", "/v1/windows/mw", None, (200, 404)),
    ("POST", "/v1/slack/actions"): Sample(OPEN, "/v1/slack/actions", b"payload=%7B%7D", (404,)),  # no secret set
    ("GET", "/v1/alerts"): Sample("read", "/v1/alerts"),
    ("POST", "/v1/alerts/{dedup_key}/ack"): Sample("ack", "/v1/alerts/disk-db1/ack"),
    ("DELETE", "/v1/alerts/{dedup_key}/ack"): Sample("ack", "/v1/alerts/disk-db1/ack"),
    ("GET", "/v1/dead"): Sample("read", "/v1/dead"),
    ("GET", "/v1/audit"): Sample("read", "/v1/audit"),
    ("GET", "/v1/stats/history"): Sample("read", "/v1/stats/history"),
    ("POST", "/v1/reload"): Sample("admin", "/v1/reload", {}, (200, 422)),
    ("GET", "/v1/names"): Sample("read", "/v1/names?ids=U0ALICE123"),
    ("POST", "/v1/dead/requeue"): Sample("admin", "/v1/dead/requeue", b"", (200,)),
    ("GET", "/v1/token"): Sample(ANY, "/v1/token"),
    ("GET", "/healthz"): Sample(OPEN, "/healthz"),
    ("GET", "/readyz"): Sample(OPEN, "/readyz"),
    ("GET", "/metrics"): Sample(OPEN, "/metrics"),
    ("GET", "/openapi.json"): Sample(OPEN, "/openapi.json"),
    ("GET", "/"): Sample(OPEN, "/"),
    ("GET", "/{asset}"): Sample(OPEN, "/favicon.ico"),
    ("*", "/{path}"): Sample(OPEN, "/nowhere", None, (404,)),
    # The front doors: the token is in the path or the call, checked at the door and answered in Slack's
    # shapes (tests/system/test_front_doors.py walks their refusals); no bearer header is looked at here.
    ("POST", "/services/{a}/{b}/{secret}"): Sample(OPEN, "/services/T0/B0/not-a-token", {"text": "hi"}, (404,)),
    ("POST", "/api/chat.postMessage"): Sample(OPEN, "/api/chat.postMessage", {"channel": "#alerts", "text": "hi"}),
    ("POST", "/api/chat.update"): Sample(OPEN, "/api/chat.update", {"channel": "C1", "ts": "1.000001", "text": "x"}),
    ("POST", "/api/auth.test"): Sample(OPEN, "/api/auth.test", {}),
    ("POST", "/api/{method}"): Sample(OPEN, "/api/users.list", {}, (404,)),
}


def router_routes() -> list[tuple[str, str]]:
    """Every (method, path) of the application as its router names them; HEAD as its GET."""
    app = create_app(load_settings())
    found = {(route.method, route.resource.canonical) for route in app.router.routes()}
    return sorted(found)


class Fleet(NamedTuple):
    gateway: Gateway
    tokens: dict[str, str]  # name -> token, one per scope, and "bounded" and "limited"
    slack: SlackStandin


def _new_token(name: str, *options: str) -> tuple[str, str]:
    """``notifier token new``, as an operator runs it: the token and its line for ``tokens:``."""
    done = subprocess.run(["notifier", "token", "new", name, *options], capture_output=True, text=True, check=True)
    token, line = done.stdout.splitlines()
    return token, line


@pytest.fixture(scope="module")
def fleet(redis_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scopes")
    redis.Redis.from_url(redis_server.url).flushall()
    tokens, lines = {}, []
    for name, options in [
        *((scope, ("--scopes", scope)) for scope in SCOPES),
        ("bounded", ("--scopes", "send", "--channels", "#alerts,#ops-*")),
        ("limited", ("--scopes", "send")),
    ]:
        tokens[name], line = _new_token(name, *options)
        lines.append(line)
    config = folder / "notifier.yaml"
    config.write_text(TREE + "tokens:\n" + "\n".join(lines) + "\n")
    assert set(load_config(config).tokens) == set(tokens)  # the lines as printed are a valid file
    slack = SlackStandin().start()
    env = {
        "NOTIFIER_REDIS_URL": redis_server.url,
        "NOTIFIER_CONFIG": str(config),
        "NOTIFIER_API_TOKENS": ENV_TOKEN,
        "NOTIFIER_SLACK_BOT_TOKEN": SLACK_TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": "#alerts",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_KEY_PREFIX": "scopes",
    }
    gateway = Gateway(env, log_dir=str(folder)).start()
    try:
        yield Fleet(gateway, tokens, slack)
    finally:
        gateway.stop()
        slack.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def call(fleet: Fleet, method: str, sample: Sample, headers: dict[str, str]) -> tuple[int, dict, dict]:
    if method == "*":
        method = "GET"
    body = sample.body
    extra = {"Content-Type": "application/x-www-form-urlencoded"} if sample.path == "/v1/slack/actions" else {}
    return http(method, fleet.gateway.url + sample.path, body, headers={**headers, **extra})


def state(fleet: Fleet) -> dict[str, Any]:
    """Everything a request could change, as the gateway shows it."""
    gateway, everything = fleet.gateway, bearer(ENV_TOKEN)
    stats = gateway.get("/v1/stats")[1]
    alerts = gateway.get("/v1/alerts", headers=everything)[1]["alerts"]
    dead = gateway.get("/v1/dead", headers=everything)[1]
    return {
        "counts": {k: stats[k] for k in ("accepted", "dropped", "by_category", "by_level", "duplicates", "resolved")},
        "overrides": gateway.get("/v1/limits")[1]["overrides"],
        "windows": gateway.get("/v1/windows")[1]["maintenance"],
        "acknowledgements": {a["dedup_key"]: a["acknowledged_by"] for a in alerts},
        "dead letters": sorted(entry["id"] for entry in dead["entries"]),
    }


def _prepare(fleet: Fleet) -> None:
    """An open alert, acknowledged; a mute and a window in force; a dead letter: what refusals must not touch."""
    everything = bearer(ENV_TOKEN)
    gateway = fleet.gateway
    if not gateway.get("/v1/alerts", headers=everything)[1]["alerts"]:
        assert gateway.post(ALERT, headers=everything)[0] == 202
    assert http("POST", gateway.url + "/v1/alerts/disk-db1/ack", headers=everything)[0] == 200
    assert http("PUT", gateway.url + "/v1/limits/db", {"rules": "0/1h", "for": "1h"}, headers=everything)[0] == 200
    window = {"for": "1h", "categories": ["db"]}
    assert http("PUT", gateway.url + "/v1/windows/mw", window, headers=everything)[0] == 200
    path = "/v1/limits/channel/%23muted"
    assert http("PUT", gateway.url + path, {"rules": "0/1h"}, headers=everything)[0] == 200
    if not gateway.get("/v1/dead", headers=everything)[1]["count"]:
        fleet.slack.script(("error", "channel_not_found"))
        assert gateway.post({"category": "lost", "text": "x"}, headers=bearer(fleet.tokens["send"]))[0] == 202
        wait_for(lambda: gateway.get("/v1/dead", headers=everything)[1]["count"], 10, what="a dead letter")


def test_every_route_has_an_expectation():
    missing = [
        route for route in router_routes() if (route[0] if route[0] != "HEAD" else "GET", route[1]) not in SAMPLES
    ]
    assert missing == [], "say in SAMPLES what these routes need, by the contract"


@pytest.mark.parametrize("route", router_routes(), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_route_answers_each_caller_as_the_contract_says(fleet, route):
    method, path = route
    sample = SAMPLES[("GET" if method == "HEAD" else method, path)]
    callers = {"no token": {}, "unknown token": bearer("not-a-known-token")}
    callers.update({scope: bearer(fleet.tokens[scope]) for scope in SCOPES})
    _prepare(fleet)
    before = state(fleet)
    allowed = []
    for who, headers in callers.items():
        may = sample.need == OPEN or (who in SCOPES and sample.need in (ANY, who))
        if may:
            allowed.append((who, headers))
            continue
        status, body, head = call(fleet, method, sample, headers)
        if who in SCOPES:
            assert status == 403, (who, status, body)
            assert method == "HEAD" or body["error"] == f"token '{who}' lacks scope '{sample.need}'"
        else:
            assert status == 401, (who, status, body)
            assert head.get("WWW-Authenticate", "").startswith("Bearer")
    assert state(fleet) == before, "a refused request changed something"
    for who, headers in [*allowed, ("env-1", bearer(ENV_TOKEN))]:
        status, body, _ = call(fleet, method, sample, headers)
        assert status in sample.ok, (who, status, body)
        _prepare(fleet)


def test_the_token_route_says_who_a_token_is_and_what_it_may_do(fleet):
    for scope in SCOPES:
        status, body, _ = fleet.gateway.get("/v1/token", headers=bearer(fleet.tokens[scope]))
        assert status == 200 and body == {"name": scope, "scopes": [scope], "channels": ["*"], "open": False}
    status, body, _ = fleet.gateway.get("/v1/token", headers=bearer(ENV_TOKEN))
    assert (body["name"], body["scopes"]) == ("env-1", list(SCOPES))
    assert fleet.gateway.get("/v1/token", headers=bearer(fleet.tokens["bounded"]))[1]["channels"] == [
        "#alerts",
        "#ops-*",
    ]


def test_the_source_is_the_token_and_a_source_level_counts_per_token(fleet):
    gateway, limited = fleet.gateway, bearer(fleet.tokens["limited"])
    answers = [gateway.post({"category": "src", "text": f"n{i}"}, headers=limited) for i in range(3)]
    assert [status for status, _, _ in answers] == [202, 202, 429]
    assert (answers[2][1]["limit"], answers[2][1]["value"], answers[2][1]["rule"]) == ("source", "limited", "2/1h")
    assert gateway.post({"category": "src", "text": "other"}, headers=bearer(fleet.tokens["send"]))[0] == 202
    by_source = gateway.get("/v1/stats")[1]["by_level"]["source"]
    assert by_source["limited"] == {"accepted": 2, "dropped": 1}
    assert "anonymous" not in by_source and by_source["send"]["accepted"] >= 1
    webhook = {"version": "4", "alerts": [{"labels": {"alertname": "Src"}, "fingerprint": "f-src"}]}
    status, body, _ = gateway.post(webhook, path="/v1/alertmanager", headers=limited)
    assert status == 200 and body["results"][0]["status"] == "dropped"  # Alertmanager's alert, the same source
    assert gateway.get("/v1/stats")[1]["by_level"]["source"]["limited"] == {"accepted": 2, "dropped": 2}


@pytest.mark.parametrize(
    "body",
    [
        {"category": "src", "text": "x", "source": "someone-else"},
        {"source": "send", "category": "src", "text": "x", "fields": {"source": "fine as a field"}},
    ],
)
def test_a_body_naming_its_source_is_422_and_counted_nowhere(fleet, body):
    before = state(fleet)["counts"]
    status, answer, _ = fleet.gateway.post(body, headers=bearer(fleet.tokens["send"]))
    assert status == 422 and [d["field"] for d in answer["details"]] == ["source"], answer
    assert state(fleet)["counts"] == before
    body = {"category": "src", "text": "x", "fields": {"source": "a field may be named so"}}
    assert fleet.gateway.post(body, headers=bearer(fleet.tokens["send"]))[0] == 202


def test_a_token_whose_channels_exclude_the_route_is_403_and_counted_nowhere(fleet):
    gateway, bounded = fleet.gateway, bearer(fleet.tokens["bounded"])
    before = state(fleet)["counts"]
    status, body, _ = gateway.post({"category": "payments", "text": "to #payments"}, headers=bounded)
    assert status == 403 and body["error"] == "token 'bounded' may not post to channel '#payments'"
    webhook = {"version": "4", "alerts": [{"labels": {"alertname": "payments"}, "fingerprint": "f-pay"}]}
    status, body, _ = gateway.post(webhook, path="/v1/alertmanager", headers=bounded)
    assert status == 200 and body["results"][0]["status"] == "rejected"
    assert "may not post to channel '#payments'" in body["results"][0]["error"]
    assert state(fleet)["counts"] == before
    status, body, _ = gateway.post({"category": "ops", "text": "to #alerts"}, headers=bounded)
    assert status == 202, body  # #alerts is one of its channels
    assert "bounded" in gateway.get("/v1/stats")[1]["by_level"]["source"]
    assert gateway.post({"category": "payments", "text": "x"}, headers=bearer(fleet.tokens["send"]))[0] == 202


def test_every_change_is_authored_by_the_token_name(fleet):
    gateway, admin, ack = fleet.gateway, bearer(fleet.tokens["admin"]), bearer(fleet.tokens["ack"])
    _prepare(fleet)
    assert http("DELETE", gateway.url + "/v1/alerts/disk-db1/ack", headers=ack)[0] == 200
    status, body, _ = http("POST", gateway.url + "/v1/alerts/disk-db1/ack", headers=ack)
    assert status == 200 and body["acknowledged_by"] == "ack"
    status, body, _ = http("PUT", gateway.url + "/v1/limits/web", {"rules": "5/1m"}, headers=admin)
    assert status == 200 and body["by"] == "admin"
    assert gateway.get("/v1/limits")[1]["overrides"]["web"]["by"] == "admin"
    status, body, _ = http(
        "PUT", gateway.url + "/v1/windows/authored", {"for": "1h", "channels": ["#x"]}, headers=admin
    )
    assert status == 200 and body["by"] == "admin"
    for text in (gateway.output(), str(gateway.get("/v1/limits")[1]), str(gateway.get("/v1/windows")[1])):
        for token in fleet.tokens.values():
            assert token not in text and hashlib.sha256(token.encode()).hexdigest()[:8] not in text


def test_without_tokens_every_route_is_open_and_the_source_is_anonymous(redis_server, tmp_path):
    config = Path(tmp_path / "tree.yaml")
    config.write_text(TREE)
    env = {
        "NOTIFIER_REDIS_URL": redis_server.url,
        "NOTIFIER_CONFIG": str(config),
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_KEY_PREFIX": "scopes-open",
    }
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        assert gateway.post({"category": "db", "text": "x"})[0] == 202
        assert gateway.get("/v1/stats")[1]["by_level"]["source"] == {"anonymous": {"accepted": 1, "dropped": 0}}
        status, body, _ = http("PUT", gateway.url + "/v1/limits/db", {"rules": "5/1m"})
        assert status == 200 and body["by"] == "anonymous"
        assert gateway.get("/v1/token")[1] == {
            "name": "anonymous",
            "scopes": list(SCOPES),
            "channels": ["*"],
            "open": True,
        }
        for path in ("/v1/alerts", "/v1/dead"):
            assert gateway.get(path, headers=bearer("anything"))[0] == 200
    finally:
        gateway.stop()
