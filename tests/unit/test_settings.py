"""Settings from the environment and env files; a bad value names its variable."""

import socket
import subprocess
import sys

import pytest

from notifier.errors import SettingsError
from notifier.policy import Policy
from notifier.settings import load_settings, unknown_variables


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
    assert s.mute_choices == ("1h", "4h", "24h")


def test_mute_choices_keep_their_order(monkeypatch):
    monkeypatch.setenv("NOTIFIER_MUTE_CHOICES", " 30m, 2h ,1d,15m")
    assert load_settings().mute_choices == ("30m", "2h", "1d", "15m")


def test_environment_values(monkeypatch):
    monkeypatch.setenv("NOTIFIER_CATEGORY_LIMITS", '{"error": "20/30m", "debug": "5/1h"}')
    monkeypatch.setenv("NOTIFIER_CATEGORIES", "error, debug,deploy")
    monkeypatch.setenv("NOTIFIER_CATEGORY_CHANNELS", '{"error": "#errors"}')
    monkeypatch.setenv("NOTIFIER_SLACK_CHANNEL", "#alerts")
    monkeypatch.setenv("NOTIFIER_API_TOKENS", "a,b")
    monkeypatch.setenv("NOTIFIER_DIGEST_INTERVAL", "0")
    s = load_settings()
    policy = Policy.from_settings(s)
    assert [r.text for r in policy.rules_for(1, "debug")] == ["5/1h"]
    assert [r.text for r in policy.rules_for(1, "other")] == ["10/30m"]
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
        ("NOTIFIER_REDIS_URL", "http://x"),
        ("NOTIFIER_LOG_LEVEL", "verbose"),
        ("NOTIFIER_CLAIM_IDLE", "0"),
        ("NOTIFIER_REDIS_TIMEOUT", "0"),
        ("NOTIFIER_UPDATE_RATE", "0/1m"),
        ("NOTIFIER_MAX_CATEGORIES", "0"),
        ("NOTIFIER_CRITICAL_RESERVE", "5"),
        ("NOTIFIER_CRITICAL_RESERVE", "101%"),
        ("NOTIFIER_CATEGORY_RESERVES", '{"payments": "10.55%"}'),
        ("NOTIFIER_CATEGORY_RESERVES", '{"a": "60%", "b": "41%"}'),
        ("NOTIFIER_CATEGORIES", "db,global"),
        ("NOTIFIER_CATEGORY_LIMITS", '{"global": "1/1s"}'),
        ("NOTIFIER_CATEGORY_CHANNELS", '{"global": "#x"}'),
        ("NOTIFIER_MUTE_CHOICES", ""),
        ("NOTIFIER_MUTE_CHOICES", "1h,2h,3h,4h,5h,6h"),
        ("NOTIFIER_MUTE_CHOICES", "1h,soon"),
        ("NOTIFIER_MUTE_CHOICES", "0s"),
        ("NOTIFIER_MUTE_CHOICES", "1h,60m"),
        ("NOTIFIER_MUTE_CHOICES", "1" * 21),
        ("NOTIFIER_REDIS_MIN_REPLICAS", "-1"),
        ("NOTIFIER_REDIS_SENTINELS", "10.0.0.1:26379,nowhere"),
        ("NOTIFIER_REDIS_SENTINELS", "10.0.0.1:99999"),
    ],
)
def test_bad_value_names_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value).startswith(f"invalid setting {name}:")


def test_reserves_together_and_against_the_category_list(monkeypatch):
    monkeypatch.setenv("NOTIFIER_CATEGORY_RESERVES", '{"a": "60%"}')
    monkeypatch.setenv("NOTIFIER_CRITICAL_RESERVE", "40.5%")
    with pytest.raises(SettingsError, match=r"NOTIFIER_CATEGORY_RESERVES: reserves add up to 100\.5%"):
        load_settings()
    monkeypatch.setenv("NOTIFIER_CRITICAL_RESERVE", "40%")
    assert load_settings().critical_reserve == 40  # exactly 100% is allowed
    monkeypatch.setenv("NOTIFIER_CATEGORIES", "b,c")
    with pytest.raises(SettingsError, match="reserve for 'a', which NOTIFIER_CATEGORIES excludes"):
        load_settings()


def serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``notifier serve`` with only ``env``, as a newcomer starts it; it must stop on its own."""
    return subprocess.run(
        [sys.executable, "-m", "notifier", "serve", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "env,args,names",
    [
        ({"NOTIFIER_GLOBAL_LIMIT": "100 per hour"}, (), "NOTIFIER_GLOBAL_LIMIT"),
        ({"NOTIFIER_REDIS_URL": "http://x"}, (), "NOTIFIER_REDIS_URL"),
        ({"NOTIFIER_LOG_LEVEL": "verbose"}, (), "NOTIFIER_LOG_LEVEL"),
        ({"NOTIFIER_CLAIM_IDLE": "0"}, (), "NOTIFIER_CLAIM_IDLE"),
        ({"NOTIFIER_REDIS_TIMEOUT": "0"}, (), "NOTIFIER_REDIS_TIMEOUT"),
        ({"NOTIFIER_MUTE_CHOICES": "1h,forever"}, (), "NOTIFIER_MUTE_CHOICES"),
        (
            {"NOTIFIER_CATEGORY_RESERVES": '{"a": "70%"}', "NOTIFIER_CRITICAL_RESERVE": "31%"},
            (),
            "NOTIFIER_CATEGORY_RESERVES",
        ),
        ({"NOTIFIER_REDIS_MIN_REPLICAS": "1"}, (), "NOTIFIER_REDIS_MIN_REPLICAS"),
        (
            {"NOTIFIER_REDIS_SENTINELS": "127.0.0.1:26379", "NOTIFIER_REDIS_CLUSTER": "true"},
            (),
            "NOTIFIER_REDIS_SENTINELS",
        ),
        ({}, ("--env-file", "/nonexistent.env"), "/nonexistent.env"),
        ({"NOTIFIER_HOST": "nonexistent.invalid"}, (), "nonexistent.invalid:8080"),
    ],
)
def test_bad_start_is_one_line_naming_what_is_wrong(env, args, names):
    done = serve(env, *args)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_a_port_in_use_is_one_line_naming_the_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve({"NOTIFIER_PORT": str(port)})
    assert done.returncode == 2 and done.stderr.strip() == (
        f"notifier: cannot listen on 127.0.0.1:{port} (NOTIFIER_HOST/NOTIFIER_PORT): Address already in use"
    )


def test_an_unknown_setting_is_named_with_the_closest_known_one(tmp_path):
    env_file = tmp_path / "gw.env"
    env_file.write_text("NOTIFIER_DIGEST_INTERVALL=1m\n")
    warnings = unknown_variables(str(env_file), {"NOTIFIER_GLOBAL_LIMITS": "5/1m", "NOTIFIER_ZZZ": "1", "HOME": "/"})
    assert warnings == [
        "unknown setting NOTIFIER_DIGEST_INTERVALL is ignored (did you mean NOTIFIER_DIGEST_INTERVAL?)",
        "unknown setting NOTIFIER_GLOBAL_LIMITS is ignored (did you mean NOTIFIER_GLOBAL_LIMIT?)",
        "unknown setting NOTIFIER_ZZZ is ignored",
    ]


# --- secrets from files (NOTIFIER_<NAME>_FILE) ---


def test_a_secret_setting_is_read_from_its_file(monkeypatch, tmp_path):
    (tmp_path / "bot").write_text("xoxb-from-a-file\n")  # as kubectl create secret --from-file leaves it
    (tmp_path / "app").write_text("xapp-1-A0-from-a-file")
    monkeypatch.setenv("NOTIFIER_SLACK_BOT_TOKEN_FILE", str(tmp_path / "bot"))
    monkeypatch.setenv("NOTIFIER_SLACK_APP_TOKEN_FILE", str(tmp_path / "app"))
    settings = load_settings()
    assert (settings.slack_bot_token, settings.slack_app_token) == ("xoxb-from-a-file", "xapp-1-A0-from-a-file")
    assert unknown_variables() == []


def test_a_secret_file_in_an_env_file_is_read_too(tmp_path):
    (tmp_path / "secret").write_text("s3cret-signing\n")
    env = tmp_path / "notifier.env"
    env.write_text(f"NOTIFIER_SLACK_SIGNING_SECRET_FILE={tmp_path / 'secret'}\n")
    assert load_settings(str(env)).slack_signing_secret == "s3cret-signing"
    assert unknown_variables(str(env)) == []


@pytest.mark.parametrize(
    ("content", "both", "problem"),
    [
        (None, False, "cannot read"),
        ("", False, "is empty"),
        ("xoxb-1", True, "give NOTIFIER_SLACK_BOT_TOKEN or NOTIFIER_SLACK_BOT_TOKEN_FILE, not both"),
    ],
)
def test_a_secret_file_that_cannot_serve_names_the_variable_not_the_value(
    monkeypatch, tmp_path, content, both, problem
):
    path = tmp_path / "bot"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv("NOTIFIER_SLACK_BOT_TOKEN_FILE", str(path))
    if both:
        monkeypatch.setenv("NOTIFIER_SLACK_BOT_TOKEN", "xoxb-from-the-env")
    with pytest.raises(SettingsError, match=problem) as raised:
        load_settings()
    assert "NOTIFIER_SLACK_BOT_TOKEN_FILE" in str(raised.value) or both
    assert "xoxb" not in str(raised.value)


def test_an_app_token_is_an_app_level_one(monkeypatch):
    monkeypatch.setenv("NOTIFIER_SLACK_APP_TOKEN", "xoxb-a-bot-token-by-mistake")
    with pytest.raises(SettingsError, match="NOTIFIER_SLACK_APP_TOKEN: not an app-level token") as raised:
        load_settings()
    assert "xoxb-a-bot" not in str(raised.value)


def test_workers_default_to_one_and_auto_is_the_usable_cpus(monkeypatch):
    import os

    assert load_settings().workers == 1
    monkeypatch.setenv("NOTIFIER_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("NOTIFIER_WORKERS", "auto")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert load_settings().workers == usable
    monkeypatch.setenv("NOTIFIER_WORKERS", " 3 ")
    assert load_settings().workers == 3


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", ""])
def test_workers_that_are_not_a_count_of_processes_are_refused(monkeypatch, value):
    monkeypatch.setenv("NOTIFIER_WORKERS", value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert str(refused.value) == (
        f"invalid setting NOTIFIER_WORKERS: {value.strip()!r} is not a number of worker processes: "
        "give 1 or more, or auto (one per usable CPU)"
    )


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_serve_workers_refuses_what_is_not_a_count_before_starting_anything(value):
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "serve", f"--workers={value}"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and done.stdout == ""
    assert f"argument --workers: {value!r} is not a number of worker processes" in done.stderr, done.stderr


def test_workers_need_a_store_they_share(monkeypatch):
    monkeypatch.setenv("NOTIFIER_WORKERS", "2")
    with pytest.raises(
        SettingsError, match="NOTIFIER_WORKERS: the embedded store lives in one process; with 2 workers"
    ):
        load_settings()
