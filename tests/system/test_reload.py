"""Reload (contract: "Reload"): the configuration file read again without a restart, by route, signal and
a change on disk (a ConfigMap's symlink swap included); a bad file changes nothing and says so; counts of
levels that stay carry over; requests in flight during reloads are all answered; each reload is audited."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from clicks import Replicas
from helpers import http, wait_for

ADMIN = "reload-admin-7f3e2d1c"
NEW = "reload-new-token-5a6b"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def document(db_rules: str, tokens: tuple[str, ...] = (ADMIN,)) -> dict:
    return {
        "levels": [
            {"name": "global", "rules": "10000/1h"},
            {"name": "category", "key": "category", "rules": "1000/1h", "values": {"db": db_rules}},
        ],
        "tokens": {
            f"t{i}": {"sha256": hashlib.sha256(t.encode()).hexdigest(), "scopes": ["send", "read", "admin"]}
            for i, t in enumerate(tokens)
        },
    }


class ConfigMap:
    """A file as Kubernetes mounts a ConfigMap: ``config.yaml -> ..data/config.yaml``, ``..data -> ..<n>``;
    an update writes a new folder and swaps the ``..data`` symlink."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.version = folder, 0

    @property
    def path(self) -> str:
        return str(self.folder / "config.yaml")

    def write(self, raw: object) -> None:
        self.version += 1
        target = self.folder / f"..{self.version}"
        target.mkdir()
        (target / "config.yaml").write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw))
        link = self.folder / "..data_tmp"
        link.symlink_to(target.name)
        os.replace(link, self.folder / "..data")
        if not (self.folder / "config.yaml").is_symlink():
            (self.folder / "config.yaml").symlink_to("..data/config.yaml")


@pytest.fixture
def fleet(redis_url, tmp_path):
    files = ConfigMap(tmp_path)
    files.write(document("2/1h"))
    replicas = Replicas(str(tmp_path))
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CONFIG": files.path, "NOTIFIER_DIGEST_INTERVAL": "0"}
    yield files, lambda count=2: replicas.start(env, count)
    replicas.stop()


def send(gateway, category: str = "db", token: str = ADMIN) -> int:
    return http(
        "POST", gateway.url + "/v1/events", {"category": category, "text": "x"}, {"Authorization": f"Bearer {token}"}
    )[0]


def reload(gateway) -> tuple[int, dict]:
    status, body, _ = http("POST", gateway.url + "/v1/reload", {}, AUTH)
    return status, body


def test_a_reload_by_route_swaps_the_tree_and_tokens_and_keeps_the_counts(fleet):
    files, start = fleet
    a, b = start()
    assert [send(a), send(b), send(a)] == [202, 202, 429]
    assert send(a, token=NEW) == 401
    before = a.get("/healthz")[1]["config"]
    files.write(document("3/1h", (ADMIN, NEW)))
    status, body = reload(a)
    assert status == 200 and body["config"] != before, body
    assert a.get("/healthz")[1]["config"] == body["config"]
    # The window's two events still count: one more fits under 3/1h, not three.
    assert [send(a), send(a)] == [202, 429]
    assert send(a, "web", token=NEW) == 202  # a token the new file names
    entry = wait_for(lambda: [e for e in a.get("/v1/audit", AUTH)[1]["entries"] if e["action"] == "reload"], 5)[0]
    assert (
        entry["by"] == "t0" and entry["via"] == "api" and entry["before"] == before and entry["after"] == body["config"]
    )
    # b reads the file on its own within 10 s (the change on disk), and then runs the same configuration.
    wait_for(lambda: b.get("/healthz")[1]["config"] == body["config"], 10, what="the other replica's reload")


def test_a_bad_file_changes_nothing_and_says_so(fleet):
    files, start = fleet
    [a] = start(1)
    running = a.get("/healthz")[1]["config"]
    files.write("levels:\n  - {name: global, rules: ten per hour}\n")
    status, body = reload(a)
    assert status == 422 and any("levels[0].rules" in line for line in body["details"]), body
    health = a.get("/healthz")[1]
    assert health["config"] == running and any("levels[0].rules" in line for line in health["config_error"])
    assert [send(a), send(a), send(a)] == [202, 202, 429]  # the old tree, in force
    metrics = http("GET", a.url + "/metrics")[1].get("_raw", "")
    assert "notifier_config_reload_failures_total 1.0" in metrics, metrics[:2000]
    files.write(document("5/1h"))
    wait_for(lambda: "config_error" not in a.get("/healthz")[1], 10, what="the good file read")
    assert a.get("/healthz")[1]["config"] != running


def test_sighup_reads_the_file_again(fleet):
    files, start = fleet
    [a] = start(1)
    running = a.get("/healthz")[1]["config"]
    files.write(document("9/1h"))
    a.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: a.get("/healthz")[1]["config"] != running, 10, what="the reload")
    entries = a.get("/v1/audit", AUTH)[1]["entries"]
    # The signal's reload, not the watch's: the file is looked at every 2 s, the signal answered at once.
    assert [(e["by"], e["via"]) for e in entries if e["action"] == "reload"] == [("signal", "file")]


def test_requests_in_flight_during_reloads_are_all_answered(fleet):
    files, start = fleet
    [a] = start(1)
    answers: list[int] = []
    stop = threading.Event()

    def storm() -> None:
        while not stop.is_set():
            answers.append(send(a, category=f"c{len(answers) % 7}"))

    threads = [threading.Thread(target=storm) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(6):
            files.write(document(f"{i + 2}/1h"))
            assert reload(a)[0] == 200
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert len(answers) > 100 and set(answers) <= {202}, sorted(set(answers))


def test_a_reload_brings_a_new_destination_into_delivery(fleet, monkeypatch):
    from discord_standin import DiscordStandin

    files, start = fleet
    discord = DiscordStandin().start()
    try:
        monkeypatch.setenv("CHAT_HOOK", discord.webhook_url)  # read by the gateway at the reload
        [a] = start(1)
        assert send(a, "web") == 202  # the console, before
        files.write({**document("2/1h"), "destinations": {"chat": {"kind": "discord", "url": "${CHAT_HOOK}"}}})
        assert reload(a)[0] == 200
        assert send(a, "web") == 202
        wait_for(lambda: len(discord.messages) == 1, 10, what="the event in the new destination")
        counted = {"chat": {"delivered": 1, "dead": 0, "paused_until": None}}  # a moment after the post
        wait_for(lambda: a.get("/v1/stats", AUTH)[1]["destinations"] == counted, 10, what="the delivery counted")
    finally:
        discord.stop()
