"""The ``destinations`` section: secrets by variable or file, never shown; bad ones refused with their place."""

from __future__ import annotations

import json

import pytest

from notifier.cli import main
from notifier.config import parse_config
from notifier.destinations.spec import destinations_of
from notifier.errors import ConfigError
from notifier.models import Event
from notifier.policy import Policy
from notifier.settings import load_settings
from notifier.terminal import render

SECRET = "xoxb-do-not-show-1234"


def problems(raw: dict, **env: str) -> list[str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with pytest.raises(ConfigError) as caught:
            parse_config(raw, "f.yaml", load_settings())
    return caught.value.problems


def test_secrets_from_a_variable_and_a_file(tmp_path, monkeypatch):
    (tmp_path / "contoso").write_text(SECRET + "-file\n")
    monkeypatch.setenv("ACME_BOT", SECRET)
    raw = {
        "destinations": {
            "acme": {"kind": "slack", "bot_token": "${ACME_BOT}", "channel": "#alerts"},
            "contoso": {"kind": "slack", "bot_token_file": str(tmp_path / "contoso"), "channel": "#ops"},
        }
    }
    settings = load_settings()
    config = parse_config(raw, "f.yaml", settings)
    acme, contoso = destinations_of(config.destinations, settings)
    assert acme.bot_token is not None and acme.bot_token.get_secret_value() == SECRET
    assert contoso.bot_token is not None and contoso.bot_token.get_secret_value() == SECRET + "-file"
    assert SECRET not in repr(acme) and SECRET not in repr(config)


@pytest.mark.parametrize(
    ("raw", "env", "place", "why"),
    [
        ({"x": {"kind": "telegram", "url": "${U}"}}, {}, "destinations.x.kind", "Input should be"),
        (
            {"x": {"kind": "slack", "bot_token": "${UNSET_ONE}", "channel": "#a"}},
            {},
            "destinations.x.bot_token",
            "UNSET_ONE is not set",
        ),
        (
            {"x": {"kind": "slack", "bot_token": SECRET, "channel": "#a"}},
            {},
            "destinations.x.bot_token",
            "never written in the file",
        ),
        (
            {"x": {"kind": "slack", "bot_token": "${T}", "bot_token_file": "/f", "channel": "#a"}},
            {"T": "t"},
            "destinations.x.bot_token",
            "not both",
        ),
        ({"x": {"kind": "slack", "bot_token": "${T}"}}, {"T": "t"}, "destinations.x.channel", "missing"),
        (
            {"x": {"kind": "discord", "url": "${U}"}},
            {"U": "http://discord.com/api/webhooks/1/" + SECRET},
            "destinations.x.url",
            "not an https://",
        ),
        (
            {"x": {"kind": "discord", "url": "${U}"}},
            {"U": "https://evil.example/api/webhooks/1/" + SECRET},
            "destinations.x.url",
            "not a discord webhook URL",
        ),
        ({"x": {"kind": "teams", "url_file": "/nonexistent/hook"}}, {}, "destinations.x.url_file", "cannot read"),
        (
            {"x": {"kind": "teams", "url": "${U}", "bot_token": "${U}"}},
            {"U": "https://a.example/w"},
            "destinations.x.bot_token",
            "only a destination of kind slack",
        ),
        (
            {"x": {"kind": "teams", "url": "${U}", "rate": "0/1s"}},
            {"U": "https://a.example/w"},
            "destinations.x.rate",
            "at least 1 message",
        ),
        (
            {"Bad:Name": {"kind": "teams", "url": "${U}"}},
            {"U": "https://a.example/w"},
            "destinations.Bad:Name",
            "a destination's name",
        ),
    ],
)
def test_bad_destinations_are_problems_with_their_place(raw, env, place, why):
    found = problems({"destinations": raw}, **env)
    assert any(line.startswith(f"f.yaml: {place}: ") and why in line for line in found), found
    assert not any(SECRET in line for line in found), found  # never the secret


def test_a_route_or_token_naming_an_unknown_destination(monkeypatch):
    monkeypatch.setenv("U", "https://a.example/w")
    raw = {
        "destinations": {"teams": {"kind": "teams", "url": "${U}"}},
        "routes": [{"match": {"category": "db"}, "destination": "nowhere"}, {"match": {}}],
        "tokens": {"ci": {"sha256": "a" * 64, "scopes": ["send"], "destination": "elsewhere"}},
    }
    found = problems(raw)
    assert "f.yaml: routes[0].destination: no destination 'nowhere' (known: teams)" in found
    assert "f.yaml: tokens.ci.destination: no destination 'elsewhere' (known: teams)" in found
    assert "f.yaml: routes[1]: give a channel, a destination or both" in found


def test_slack_settings_and_a_destinations_section_are_one_place_too_many(monkeypatch):
    monkeypatch.setenv("U", "https://a.example/w")
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {"destinations": {"t": {"kind": "teams", "url": "${U}"}}}, "f.yaml", load_settings(slack_channel="#a")
        )
    assert any("NOTIFIER_SLACK_CHANNEL is set too" in line for line in caught.value.problems)


def route(policy: Policy, **facts: str):
    event = Event(category=facts.get("category", "db"), text="x")
    return policy.route(event, facts.get("source", "anonymous"), facts.get("channel"))


def test_channel_values_name_their_destination_when_there_are_several(monkeypatch):
    monkeypatch.setenv("T", "xoxb-1")
    monkeypatch.setenv("U", "https://a.example/w")
    raw = {
        "destinations": {
            "acme": {"kind": "slack", "bot_token": "${T}", "channel": "#alerts"},
            "it": {"kind": "teams", "url": "${U}"},
        },
        "levels": [{"name": "all", "rules": "100/1h"}, {"name": "dest", "key": "destination", "rules": "10/1h"}],
        "routes": [
            {"match": {"category": "deploy"}, "channel": "#deploys"},
            {"match": {"category": "office"}, "destination": "it"},
            {"match": {"destination": "acme", "channel": "acme:#ops"}, "destination": "it"},
        ],
        "tokens": {"ci": {"sha256": "b" * 64, "scopes": ["send"], "destination": "it"}},
    }
    settings = load_settings()
    policy = Policy.from_settings(settings, parse_config(raw, "f.yaml", settings))
    assert route(policy).channel == "acme:#alerts" and route(policy).values == ("", "acme")
    assert route(policy, category="deploy").channel == "acme:#deploys"
    assert route(policy, category="office").channel == "it" and route(policy, category="office").values[1] == "it"
    assert route(policy, source="ci").channel == "it"  # the token's destination
    assert route(policy, channel="#ops").channel == "it"  # a front door's channel, matched as acme:#ops


def test_one_destination_keeps_bare_channels():
    policy = Policy.from_settings(load_settings(slack_channel="#alerts"))
    assert route(policy).channel == "#alerts"
    assert route(policy, channel="C0123ABCD").channel == "C0123ABCD"


def test_status_shows_each_destination():
    stats = {
        "destinations": {
            "acme": {"delivered": 4, "dead": 0, "paused_until": None},
            "gaming": {"delivered": 2, "dead": 1, "paused_until": "2026-11-29T04:00:00Z"},
        }
    }
    screen = render({"levels": []}, stats)
    assert "  acme    delivered 4, dead 0\n" in screen + "\n"
    assert "  gaming  delivered 2, dead 1, paused until 2026-11-29T04:00:00Z" in screen


@pytest.mark.parametrize("kind", ["slack", "teams", "discord", "mattermost", "google-chat"])
def test_render_shows_what_a_kind_is_sent(kind, capsys):
    assert main(["render", "--destination", kind, "category=db", "text=disk full @here", "severity=critical"]) == 0
    sent = json.loads(capsys.readouterr().out)
    assert "disk full" in json.dumps(sent, ensure_ascii=False)
    assert "@here" not in json.dumps(sent, ensure_ascii=False) or kind == "slack"  # Slack's own text is escaped


def test_render_refuses_a_kind_there_is_not(capsys):
    with pytest.raises(SystemExit):
        main(["render", "--destination", "telegram", "text=x"])
    assert "invalid choice: 'telegram'" in capsys.readouterr().err
