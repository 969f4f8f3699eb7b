"""The configuration file: every problem the contract lists is one line naming the file and the place;
``check-config`` and ``route`` print what the contract says."""

from __future__ import annotations

import subprocess
import sys

import pytest

from notifier.config import EMPTY, fingerprint, load_config, parse_config
from notifier.errors import ConfigError
from notifier.explain import explain_route
from notifier.policy import Policy
from notifier.settings import load_settings

HASH = "a" * 64
TREE = """
levels:
  - name: global
    rules: 100/30m
    reserves: {critical: 10%, "channel=#incidents": 20%}
  - name: channel
    key: channel
    rules: 40/30m
    values: {"#incidents": 200/30m, "#noisy": 10/30m}
    reserves: {critical: 25%}
  - name: team
    key: field:team
    rules: 30/30m
  - name: category
    key: category
    rules: 10/30m
    values: {error: 20/30m, debug: 0/1h}
routes:
  - match: {category: deploy}
    channel: "#deploys"
  - match: {source: grafana-payments, severity: "critical|error"}
    channel: "#payments-oncall"
  - match: {"field:team": db}
    channel: "#team-db"
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("NOTIFIER_"):
            monkeypatch.delenv(name)


def problems(text: str, tmp_path, **settings: str) -> list[str]:
    path = tmp_path / "notifier.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, load_settings(**settings) if settings else load_settings())
    lines = caught.value.problems
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    return [line.removeprefix(f"{path}: ") for line in lines]


def test_the_smallest_file_is_empty(tmp_path):
    for text in ("", "{}", "# nothing\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        assert load_config(path) == EMPTY


def test_the_contract_s_example_tree_loads(tmp_path):
    path = tmp_path / "tree.yaml"
    path.write_text(TREE)
    config = load_config(path)
    assert [level.name for level in config.levels] == ["global", "channel", "team", "category"]
    assert [str(r) for r in config.levels[1].values["#incidents"].rules] == ["200/30m"]


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("levels: [{name: global, rules: 10/1m, rule: 3/1s}]", "levels[0].rule: unknown key"),
        ("colour: red", "colour: unknown key"),
        ("levels: [{name: global, rules: 10/1x}]", "levels[0].rules: '1x' is not a duration"),
        ("levels: [{name: global, rules: ten}]", "levels[0].rules: 'ten' is not a rule"),
        ("levels: [{name: Global, rules: 10/1m}]", "levels[0].name: 'Global': a level's name is"),
        (
            "levels: [{name: global, rules: 10/1m}, {name: global, key: category, rules: 1/1m}]",
            "levels[1].name: 'global' is the name of levels[0] too",
        ),
        ("levels: [{name: g, rules: 10/1m}, {name: c, key: colour, rules: 1/1m}]", "levels[1].key: 'colour' is not"),
        ("levels: [{name: g, rules: 10/1m}, {name: c, rules: 1/1m}]", "levels[1].key: missing"),
        ("levels: [{name: g, key: category, rules: 10/1m}]", "levels[0].key: the first level is the root"),
        (
            'levels: [{name: g, rules: 10/1m, reserves: {critical: 60%, "c=db": 50%}}, '
            "{name: c, key: category, rules: 1/1m}]",
            "levels[0].reserves: reserves add up to 110%, more than 100%",
        ),
        (
            'levels: [{name: g, rules: 10/1m}, {name: c, key: category, rules: 1/1m, reserves: {"g=x": 5%}}]',
            "levels[1].reserves.\"g=x\": 'g' is not a level below this one",
        ),
        ("levels: [{name: g, rules: 10/1m, reserves: {loud: 5%}}]", "levels[0].reserves.loud: a reserve class is"),
        ("routes: [{match: {category: x}, channel: '#x', template: nope}]", "routes[0].template: no template 'nope'"),
        ("routes: [{match: {category: '('}, channel: '#x'}]", "routes[0].match.category: not a regular expression"),
        (
            "routes: [{match: {'field:host': 'db(?!-test)'}, channel: '#x'}]",
            '"field:host": not a regular expression routes can match (error: look-around, including look-ahead',
        ),
        ("routes: [{match: {category: '(a)\\1'}, channel: '#x'}]", "routes[0].match.category: not a regular"),
        ("routes: [{match: {category: 'a)|(b'}, channel: '#x'}]", "routes[0].match.category: not a regular"),
        ("routes: [{match: {colour: red}, channel: '#x'}]", "routes[0].match.colour: 'colour' is not one of"),
        ("tokens: {ci: {sha256: abc, scopes: [send]}}", "tokens.ci.sha256: not 64 hex digits"),
        (f"tokens: {{ci: {{sha256: {HASH}, scopes: [write]}}}}", "tokens.ci.scopes[0]: Input should be 'send'"),
        (
            "levels: [{name: g, rules: 10/1m}, {name: c, key: category, rules: 1/1m, values: {a: 1/1s,2/1m}}]",
            "no rules",
        ),
        ("levels:\n  - {name: g, rules: 10/1m}\nlevels: []\n", "line 3, column 1: key 'levels' is given twice"),
        ("levels: [name: g", "line 1"),
        ("- just a list", "the file must hold a mapping"),
    ],
)
def test_each_problem_is_a_line_naming_its_place(tmp_path, text, wanted):
    found = problems(text, tmp_path)
    assert any(line.startswith(wanted) or wanted in line for line in found), found


def test_every_problem_is_told_at_once(tmp_path):
    text = "levels: [{name: g, rules: 10/1x, x: 1}]\nroutes: [{channel: '#a', match: {colour: red}}]\n"
    assert len(problems(text, tmp_path)) == 2  # the schema's problems together (the routes' come once it holds)


@pytest.mark.parametrize(
    "variable",
    ["global_limit", "category_limit", "category_limits", "category_reserves", "critical_reserve"],
)
def test_a_tree_in_the_file_and_in_the_environment_is_refused(tmp_path, variable):
    value = {"category_limits": '{"a": "1/1m"}', "category_reserves": '{"a": "5%"}', "critical_reserve": "5%"}
    found = problems(TREE, tmp_path, **{variable: value.get(variable, "5/1m")})
    assert found == [
        f"levels: NOTIFIER_{variable.upper()} is set too: give the tree in one place, the file or the environment"
    ]


def test_routes_in_the_file_and_category_channels_are_refused(tmp_path):
    found = problems("routes: [{match: {category: x}, channel: '#x'}]", tmp_path, category_channels='{"x": "#y"}')
    assert found == [
        "routes: NOTIFIER_CATEGORY_CHANNELS is set too: give the routes in one place, the file or the environment"
    ]


def test_a_route_decides_channel_and_every_level_s_value_and_class():
    policy = Policy.from_settings(load_settings(slack_channel="#alerts"), parse_config(_yaml(TREE)))
    text = explain_route(policy, {"category": "db", "severity": "critical", "field:team": "db", "source": "ci"})
    assert text.splitlines() == [
        "channel: #team-db",
        "template: (the built-in shape)",
        "levels:",
        "  global = (all events): 100/30m; reserves critical 10%, channel=#incidents 20%; class critical",
        "  channel = #team-db: 40/30m; reserves critical 25%; class critical",
        "  team = db: 30/30m",
        "  category = db: 10/30m",
    ]
    assert explain_route(policy, {"category": "web"}).splitlines()[0] == "channel: #alerts"  # no route: the default
    grafana = explain_route(policy, {"category": "pay", "source": "grafana-payments", "severity": "error"})
    assert grafana.splitlines()[0] == "channel: #payments-oncall"  # every key of a match must match
    info = explain_route(policy, {"category": "pay", "source": "grafana-payments", "severity": "info"})
    assert info.splitlines()[0] == "channel: #alerts"
    with pytest.raises(ValueError):
        explain_route(policy, {"colour": "red"})


def test_a_category_no_event_can_have_is_named_where_the_file_names_it():
    """With NOTIFIER_CATEGORIES set, a reserve, a value or a route's category it does not name could never
    apply: a typo that would leave a team without its reserve."""
    text = """
levels:
  - {name: global, rules: 100/30m, reserves: {"kind=payments": 10%, "kind=paymnts": 5%}}
  - {name: team, key: "field:team", rules: 50/30m, values: {db: {rules: 20/30m, reserves: {"kind=pya": 5%}}}}
  - {name: kind, key: category, rules: 10/30m, values: {db: 5/30m, dbb: 5/30m}}
routes:
  - {match: {source: grafana}, channel: "#g", category: grafna}
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(_yaml(text), "notifier.yaml", load_settings(categories="payments,db,grafana"))
    why = "NOTIFIER_CATEGORIES does not name it: no event can have it"
    assert caught.value.problems == [
        f'notifier.yaml: levels[0].reserves."kind=paymnts": {why}',  # a level keyed by category, by any name
        f'notifier.yaml: levels[1].values.db.reserves."kind=pya": {why}',
        f"notifier.yaml: levels[2].values.dbb: {why}",
        f"notifier.yaml: routes[0].category: {why}",
    ]
    assert parse_config(_yaml(text), "notifier.yaml", load_settings()).levels  # unset: any category may come


@pytest.mark.timeout(30)
def test_a_route_matches_a_sender_s_value_in_linear_time():
    """``(a+)+b`` against 64 "a": Python's ``re`` would try 2**64 ways (the test would time out);
    the routes' engine answers at once, as anchored as before."""
    routes = """
routes:
  - {match: {'field:host': '(a+)+b'}, channel: '#b'}
  - {match: {category: 'db.1'}, channel: '#d'}
  - {match: {category: 'web|api'}, channel: '#w'}
"""
    policy = Policy.from_settings(load_settings(slack_channel="#alerts"), parse_config(_yaml(routes)))
    for value in ("a" * 64, "a" * 1000, "a" * 999 + "b"):
        route = explain_route(policy, {"category": "x", "field:host": value}).splitlines()[0]
        assert route == ("channel: #b" if value.endswith("b") else "channel: #alerts")
    assert explain_route(policy, {"category": "db-1"}).splitlines()[0] == "channel: #d"  # "." is any character
    assert explain_route(policy, {"category": "db-12"}).splitlines()[0] == "channel: #alerts"  # anchored
    routed = [explain_route(policy, {"category": c}).splitlines()[0] for c in ("api", "webx", "xapi")]
    assert routed == ["channel: #w", "channel: #alerts", "channel: #alerts"]  # the alternation as a whole
    named = Policy.from_settings(load_settings(slack_channel="#alerts", category_channels={"db.1": "#d"}))
    assert [explain_route(named, {"category": c}).splitlines()[0] for c in ("db.1", "dbx1")] == [
        "channel: #d",
        "channel: #alerts",  # NOTIFIER_CATEGORY_CHANNELS names categories, not patterns
    ]


def test_the_fingerprint_follows_what_shapes_decisions_only():
    config = parse_config(_yaml(TREE))
    settings = load_settings(slack_channel="#alerts")
    same = fingerprint(config, load_settings(slack_channel="#alerts", port=9999, slack_bot_token="xoxb-1"))
    assert fingerprint(config, settings) == same  # where it listens and its secrets do not count
    assert fingerprint(config, load_settings(slack_channel="#other")) != fingerprint(config, settings)
    assert fingerprint(EMPTY, settings) != fingerprint(config, settings)


def _yaml(text: str) -> object:
    import yaml

    return yaml.safe_load(text)


def notifier(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notifier", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_check_config_prints_the_tree_routes_and_token_names_never_a_hash(tmp_path):
    path = tmp_path / "tree.yaml"
    path.write_text(TREE)
    done = notifier("check-config", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path}: ok\n")
    assert "  3. category (key category): 10/30m" in done.stdout
    assert "  field:team=db -> #team-db" in done.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("levels: [{name: g, rules: 10/1x}]\n")
    done = notifier("check-config", str(bad))
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr
        == f"notifier: {bad}: levels[0].rules: '1x' is not a duration (a number with unit ms, s, m, h or d)\n"
    )


def test_serve_with_a_bad_file_stops_with_exit_2_and_the_lines(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("levels: [{name: g, rules: 10/1m, reserves: {loud: 5%}}]\nroutes: [{channel: '#x', template: t}]\n")
    done = notifier("serve", "--config", str(bad))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"notifier: {bad}: levels[0].reserves.loud: a reserve class is critical or LEVEL=VALUE, "
        "e.g. channel=#incidents",
        f"notifier: {bad}: routes[0].template: no template 't' in templates",
    ]


def test_route_prints_where_an_event_goes(tmp_path):
    path = tmp_path / "tree.yaml"
    path.write_text(TREE)
    done = notifier("route", "--config", str(path), "category=deploy", "field:team=web")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["channel: #deploys", "template: (the built-in shape)"]
    assert notifier("route", "--config", str(path), "category").returncode == 2
