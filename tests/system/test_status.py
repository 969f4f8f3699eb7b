"""``notifier status`` against a running gateway."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from helpers import Gateway


@pytest.fixture
def gateway(redis_url, tmp_path):
    gw = Gateway(
        {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_GLOBAL_LIMIT": "10/1h,100/1d", "NOTIFIER_CATEGORY_LIMIT": "2/1h"},
        log_dir=str(tmp_path),
    ).start()
    yield gw
    gw.stop()


def test_status_shows_every_rule_and_the_totals(gateway):
    for i in range(3):
        gateway.post({"category": "db", "text": f"e{i}"})
    gateway.post({"category": "web", "text": "w"})
    command = shutil.which("notifier")
    argv = [command] if command else [sys.executable, "-m", "notifier"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    done = subprocess.run([*argv, "status", "--url", gateway.url], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    screen = done.stdout
    print(screen)
    lines = screen.splitlines()
    assert any("global" in line and "10/1h" in line and "3/10" in line and "[######" in line for line in lines)
    assert any("global" in line and "100/1d" in line and "3/100" in line for line in lines)
    assert any(line.split()[:1] == ["db"] and "2/2" in line and "next free in" in line for line in lines)
    assert any(line.split()[:1] == ["web"] and "1/2" in line and "free now" in line for line in lines)
    assert "accepted       3" in screen and "dropped        1 (global 0, category 1)" in screen


TREE = """
levels:
  - {name: global, rules: 100/1h}
  - {name: channel, key: channel, rules: 50/1h}
  - {name: team, key: "field:team", rules: 3/1h}
  - {name: category, key: category, rules: 10/1h}
routes:
  - {match: {category: "db.*"}, channel: "#db"}
"""


def _notifier(*args: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("notifier")
    argv = [command] if command else [sys.executable, "-m", "notifier"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=30)


def test_status_shows_the_tree_and_mute_takes_a_level_value(redis_url, tmp_path):
    config = tmp_path / "tree.yaml"
    config.write_text(TREE)
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CONFIG": str(config), "NOTIFIER_SLACK_CHANNEL": "#alerts"}
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        for i in range(4):
            gateway.post({"category": "db-primary", "text": f"e{i}", "fields": {"team": "dba"}})
        gateway.post({"category": "web", "text": "w"})
        done = _notifier("status", "--url", gateway.url)
        assert done.returncode == 0, done.stderr
        print(done.stdout)
        lines = done.stdout.splitlines()
        assert " channel (per channel): 2 values" in lines and " team (per field:team): 2 values" in lines
        assert any(line.split()[:2] == ["#db", "50/1h"] and "3/50" in line for line in lines)
        assert any(line.split()[:2] == ["dba", "3/1h"] and "3/3" in line and "next free in" in line for line in lines)
        assert "dropped        1 (global 0, channel 0, team 1, category 0)" in done.stdout
        muted = _notifier("mute", "channel/#alerts", "10m", "--url", gateway.url)
        assert (muted.returncode, muted.stdout.split(":")[0]) == (0, "channel #alerts"), muted.stderr
        status, body, _ = gateway.post({"category": "web", "text": "muted"})
        assert (status, body["limit"], body["value"], body["rule"]) == (429, "channel", "#alerts", "0/10m")
        assert _notifier("unmute", "channel/#alerts", "--url", gateway.url).returncode == 0
        assert gateway.post({"category": "web", "text": "again"})[0] == 202
    finally:
        gateway.stop()


def test_status_fails_clearly_without_a_gateway():
    from helpers import free_port

    from notifier.terminal import show

    assert show(f"http://127.0.0.1:{free_port()}", None) == 1


def test_grafana_dashboard_uses_only_exported_metrics(gateway):
    import json
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json").read_text())
    used = {
        re.sub(r"_bucket$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"notifier_[a-z_]+", target["expr"])
    }
    exported = set(re.findall(r"^# TYPE (\S+) (\S+)", gateway.get("/metrics")[1]["_raw"], re.M))
    names = {n for n, _ in exported} | {n + "_total" for n, kind in exported if kind == "counter"}
    assert used and used <= names, used - names
