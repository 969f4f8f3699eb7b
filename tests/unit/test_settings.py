"""Settings from the environment and env files; a bad value names its variable."""

import subprocess
import sys

import pytest

from notifier.errors import SettingsError
from notifier.policy import Policy
from notifier.settings import load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("NOTIFIER_"):
            monkeypatch.delenv(name)


def test_contract_defaults():
    s = load_settings()
    assert (s.host, s.port, s.redis_url, s.redis_cluster) == ("127.0.0.1", 8080, None, False)
    assert [r.text for r in s.global_limit] == ["100/30m"]
    assert [r.text for r in s.category_limit] == ["10/30m"]
    assert s.category_limits == {} and s.categories is None and s.api_tokens is None
    assert (s.key_prefix, s.digest_interval, s.alertmanager_category_label) == ("notifier", 300_000, "alertname")
    assert s.slack_api_url.startswith("https://slack.com/api")
    assert [r.text for r in s.channel_rate] == ["1/1s"]


def test_environment_values(monkeypatch):
    monkeypatch.setenv("NOTIFIER_CATEGORY_LIMITS", '{"error": "20/30m", "debug": "5/1h"}')
    monkeypatch.setenv("NOTIFIER_CATEGORIES", "error, debug,deploy")
    monkeypatch.setenv("NOTIFIER_CATEGORY_CHANNELS", '{"error": "#errors"}')
    monkeypatch.setenv("NOTIFIER_SLACK_CHANNEL", "#alerts")
    monkeypatch.setenv("NOTIFIER_API_TOKENS", "a,b")
    monkeypatch.setenv("NOTIFIER_DIGEST_INTERVAL", "0")
    s = load_settings()
    policy = Policy.from_settings(s)
    assert [r.text for r in policy.rules_for("debug")] == ["5/1h"]
    assert [r.text for r in policy.rules_for("other")] == ["10/30m"]
    assert s.categories == ("error", "debug", "deploy") and s.api_tokens == ("a", "b")
    assert (policy.channel_for("error"), policy.channel_for("deploy")) == ("#errors", "#alerts")
    assert s.digest_interval == 0


def test_env_file(tmp_path):
    env = tmp_path / "gw.env"
    env.write_text("NOTIFIER_GLOBAL_LIMIT=5/1s,50/1m\nNOTIFIER_PORT=9999\n")
    s = load_settings(str(env))
    assert s.port == 9999 and [r.count for r in s.global_limit] == [5, 50]


def test_example_file_lists_every_setting_and_loads():
    from pathlib import Path

    from notifier.settings import Settings

    text = (Path(__file__).resolve().parents[2] / "settings.example.env").read_text()
    for name in Settings.model_fields:
        assert f"NOTIFIER_{name.upper()}=" in text, name
    load_settings(str(Path(__file__).resolve().parents[2] / "settings.example.env"))


@pytest.mark.parametrize(
    "name,value",
    [
        ("NOTIFIER_GLOBAL_LIMIT", "lots"),
        ("NOTIFIER_CATEGORY_LIMIT", "10/30x"),
        ("NOTIFIER_CATEGORY_LIMITS", "{bad json"),
        ("NOTIFIER_CATEGORY_LIMITS", '{"a b": "1/1s"}'),
        ("NOTIFIER_CATEGORY_LIMITS", '["1/1s"]'),
        ("NOTIFIER_PORT", "http"),
        ("NOTIFIER_PORT", "70000"),
        ("NOTIFIER_REDIS_CLUSTER", "perhaps"),
        ("NOTIFIER_CHANNEL_RATE", "1/1s,2/1s"),
        ("NOTIFIER_CHANNEL_RATE", "0/1s"),
        ("NOTIFIER_DIGEST_INTERVAL", "soon"),
        ("NOTIFIER_CATEGORIES", "ok,not ok"),
        ("NOTIFIER_KEY_PREFIX", "a{b}"),
    ],
)
def test_bad_value_names_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value).startswith(f"invalid setting {name}:")


def test_bad_setting_stops_startup_with_one_line(monkeypatch):
    env = {"NOTIFIER_GLOBAL_LIMIT": "100 per hour", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "NOTIFIER_GLOBAL_LIMIT" in lines[0]
