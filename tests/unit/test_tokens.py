"""Tokens: the file's checks, who a presented token is, the route table, ``notifier token new``."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml
from aiohttp import web

from notifier.config import parse_config
from notifier.errors import ConfigError
from notifier.http import auth
from notifier.http.app import create_app
from notifier.http.auth import Caller, Tokens, need_of
from notifier.settings import load_settings
from notifier.tokens import new_token

GOOD = hashlib.sha256(b"a token").hexdigest()


def problems(tokens: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config({"tokens": tokens}, "notifier.yaml")
    return caught.value.problems


def tokens_of(tokens: dict, api_tokens: str | None = None) -> Tokens:
    settings = load_settings(api_tokens=api_tokens) if api_tokens else load_settings()
    return Tokens(settings, parse_config({"tokens": tokens}))


# --- the configuration file ---


def test_a_token_entry_is_read():
    config = parse_config({"tokens": {"ci": {"sha256": GOOD.upper(), "scopes": ["send"], "channels": ["#ci-*"]}}})
    assert config.tokens["ci"].scopes == ("send",) and config.tokens["ci"].channels == ("#ci-*",)


@pytest.mark.parametrize(
    ("sha256", "why"),
    [("abc", "not 64 hex digits"), (GOOD[:-1] + "g", "not 64 hex digits"), (GOOD + "0", "not 64 hex digits")],
)
def test_a_hash_that_is_not_64_hex_digits_is_named(sha256, why):
    (line,) = problems({"ci": {"sha256": sha256, "scopes": ["send"]}})
    assert line.startswith("notifier.yaml: tokens.ci.sha256: ") and why in line


def test_an_unknown_scope_is_named():
    (line,) = problems({"ci": {"sha256": GOOD, "scopes": ["send", "write"]}})
    assert line.startswith("notifier.yaml: tokens.ci.scopes[1]: ") and "'admin'" in line


def test_no_scope_at_all_is_a_problem():
    (line,) = problems({"ci": {"sha256": GOOD, "scopes": []}})
    assert line.startswith("notifier.yaml: tokens.ci.scopes: ")


NOT_SOURCES = ["anonymous", "global", "env-1", "env-12", "has space", "x" * 65, "a/b", "ci\n", "env-1\n"]


@pytest.mark.parametrize("name", NOT_SOURCES)
def test_a_name_that_cannot_be_a_source_is_named(name):
    (line,) = problems({name: {"sha256": GOOD, "scopes": ["send"]}})
    assert "a token's name is 1-64 of A-Z a-z 0-9 _ . : -, not anonymous, global or env-N" in line
    assert "\n" not in line  # one line per problem, whatever the name holds


def test_two_names_for_one_hash_are_named():
    (line,) = problems({"ci": {"sha256": GOOD, "scopes": ["send"]}, "cd": {"sha256": GOOD.upper(), "scopes": ["read"]}})
    assert line == "notifier.yaml: tokens.cd.sha256: the same hash as tokens.ci"


def test_unknown_keys_and_a_bad_refusal_are_named():
    lines = problems({"ci": {"sha256": GOOD, "scopes": ["send"], "scope": ["read"], "refusal": 500}})
    assert any(line.startswith("notifier.yaml: tokens.ci.scope: unknown key") for line in lines)
    assert any(line.startswith("notifier.yaml: tokens.ci.refusal: ") for line in lines)


# --- who a presented token is ---


def test_file_and_environment_tokens_are_named_and_scoped():
    tokens = tokens_of({"ci": {"sha256": GOOD, "scopes": ["send"]}}, api_tokens="first,second")
    assert tokens.identify("first") == Caller("env-1", frozenset({"send", "read", "ack", "admin"}))
    assert tokens.identify("second").name == "env-2"
    assert tokens.identify(b"a token") == Caller("ci", frozenset({"send"}))
    assert tokens.identify("a toke") is None and tokens.identify("") is None
    assert not tokens.open and tokens_of({}).open


def test_known_tokens_are_remembered_and_unknown_ones_hashed_every_time(monkeypatch):
    tokens = tokens_of({"ci": {"sha256": GOOD, "scopes": ["send"]}})
    identified: list[str | bytes] = []
    identify = tokens.identify
    monkeypatch.setattr(tokens, "identify", lambda given: identified.append(given) or identify(given))
    assert tokens.lookup("a token").name == "ci" and tokens.lookup("a token").name == "ci"
    assert identified == ["a token"]  # hashed once, then remembered
    assert tokens.lookup("a guess") is None and tokens.lookup("a guess") is None
    assert identified == ["a token", "a guess", "a guess"] and list(tokens._remembered) == ["a token"]


def test_remembered_tokens_are_bounded(monkeypatch):
    monkeypatch.setattr(auth, "MAX_REMEMBERED", 2)
    names = [f"t{i}" for i in range(5)]
    tokens = tokens_of({n: {"sha256": hashlib.sha256(n.encode()).hexdigest(), "scopes": ["read"]} for n in names})
    for _ in range(2):
        for name in names:
            assert tokens.lookup(name).name == name
            assert len(tokens._remembered) <= 2


@pytest.mark.parametrize(
    ("channels", "channel", "allowed"),
    [
        (("*",), "#anything", True),
        (("#payments-*",), "#payments-eu", True),
        (("#payments-*",), "#payments", False),
        (("#a", "#b-*"), "#b-1", True),
        (("#a",), "#A", False),
    ],
)
def test_channels_are_globs(channels, channel, allowed):
    assert Caller("c", frozenset({"send"}), channels).may_post_to(channel) is allowed


# --- the route table ---


def test_every_route_of_the_app_is_in_the_table():
    app = create_app(load_settings())
    for route in app.router.routes():
        need = need_of(route.method, route.resource.canonical)
        assert need in (auth.OPEN, auth.TOKEN, *auth.SCOPES), (route.method, route.resource.canonical)


def test_an_app_with_a_route_the_table_does_not_name_is_not_built():
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    app = create_app(load_settings())
    app.router.add_get("/v1/new", handler)
    with pytest.raises(
        LookupError, match=re.escape("/v1/new is not in notifier.http.auth.ROUTES: say which scope it needs")
    ):
        auth.Guard(tokens_of({}), app.router.routes(), load_settings())


def test_the_host_check_remembers_a_bounded_number_of_answers():
    """Open mode on loopback: each ``Host`` value's answer is remembered, and no more than
    ``MAX_REMEMBERED`` of them, whatever a client sends."""
    from aiohttp.test_utils import make_mocked_request

    guard = auth.Guard(tokens_of({}), create_app(load_settings()).router.routes(), load_settings())
    asked = lambda host: guard.host_allowed(make_mocked_request("GET", "/", headers={"Host": host}))  # noqa: E731
    for _ in range(2):
        assert [asked(h) for h in ("127.0.0.1:8080", "localhost", "[::1]:80", "a.localhost")] == [True] * 4
        assert [asked(h) for h in ("attacker.example", "127.0.0.1.attacker.example:80")] == [False] * 2
    for n in range(3 * auth.MAX_REMEMBERED):
        assert not asked(f"h{n}.attacker.example")
    assert len(guard._seen_hosts) <= auth.MAX_REMEMBERED
    assert asked("127.0.0.1") and not asked("attacker.example")


# --- notifier token new ---


def test_a_new_token_is_random_and_its_line_is_a_valid_entry():
    made = new_token("grafana-payments", ["send"], ["#payments-*"], mentions=True, refusal="429")
    again = new_token("grafana-payments", ["send"], [])
    assert made.token != again.token and len(made.token) >= 43
    assert made.token not in made.line
    config = parse_config(yaml.safe_load("tokens:\n" + made.line))
    entry = config.tokens["grafana-payments"]
    assert entry.sha256 == hashlib.sha256(made.token.encode()).hexdigest()
    assert (entry.scopes, entry.channels, entry.mentions, entry.refusal) == (("send",), ("#payments-*",), True, "429")
    assert tokens_of(config.model_dump()["tokens"]).identify(made.token).name == "grafana-payments"


@pytest.mark.parametrize("name", ["true", "null", "1", "a:b"])
def test_a_name_yaml_would_read_otherwise_is_quoted(name):
    line = new_token(name, ["read"], []).line
    assert list(parse_config(yaml.safe_load("tokens:\n" + line)).tokens) == [name]


def test_a_bad_name_or_scope_makes_no_token():
    with pytest.raises(ConfigError, match=re.escape("tokens.anonymous")):
        new_token("anonymous", ["send"], [])
    with pytest.raises(ConfigError, match=re.escape("tokens.ci.scopes[0]")):
        new_token("ci", ["everything"], [])
