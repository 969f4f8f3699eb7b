"""Maintenance windows over HTTP and from the CLI, and quiet hours listed (contract: "Quiet hours and
maintenance windows"): the fleet sees a change within 1 s, bad input changes nothing, windows survive
restarts of the replicas, and times are the store's clock."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Gateway, http, wait_for

TOKEN = "windows-token-5e1f"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BOUND = 1.0  # the contract's: a window takes effect on every replica within 1 s
QUIET = '{"#team-db": "mon-fri 19:00-08:00 Europe/Berlin; sat-sun 00:00-24:00 Europe/Berlin"}'


@pytest.fixture
def fleet(redis_url, tmp_path):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_API_TOKENS": TOKEN,
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_QUIET_HOURS": QUIET,
        "NOTIFIER_CATEGORIES": "db,web,cache",
    }
    gateways = [Gateway(env, log_dir=str(tmp_path)) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda g: g.start(), gateways))
    yield gateways
    for gateway in gateways:
        gateway.stop()


def put(gateway: Gateway, name: str, body: object, headers: dict | None = AUTH):
    return http("PUT", f"{gateway.url}/v1/windows/{name}", body, headers)


def listed(gateway: Gateway) -> dict:
    status, body, _ = gateway.get("/v1/windows")
    assert status == 200, body
    return {w["name"]: w for w in body["maintenance"]}


def test_a_window_opened_on_one_replica_is_listed_by_the_other_within_a_second(fleet):
    first, second = fleet
    status, window, _ = put(first, "db-upgrade", {"for": "2h", "categories": ["db"], "note": "pg 17"})
    answered = time.time()
    assert status == 200, window
    assert window["categories"] == ["db"] and window["channels"] == [] and window["note"] == "pg 17"
    assert window["in_force"] and answered - 5 <= window["start"] <= answered, window
    assert abs(window["end"] - window["start"] - 7200) < 0.002 and window["by"] == "env-1"
    assert window["start"] == round(window["start"], 3), "unix seconds with a millisecond fraction"
    wait_for(lambda: "db-upgrade" in listed(second), BOUND, what="the window on the other replica")
    print(f"\nlisted by the other replica {1000 * (time.time() - answered):.0f} ms after the answer")
    assert listed(second)["db-upgrade"] == window

    status, ended, _ = http("DELETE", f"{second.url}/v1/windows/db-upgrade", None, AUTH)
    assert status == 200 and ended["end"] <= time.time() + 1, ended
    wait_for(lambda: "db-upgrade" not in listed(first), BOUND, what="the end on the other replica")
    assert http("DELETE", f"{first.url}/v1/windows/db-upgrade", None, AUTH)[0] == 404


def test_windows_take_unix_seconds_or_iso_8601_and_a_later_start(fleet):
    gateway = fleet[0]
    start = int(time.time()) + 3600
    iso_end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 1800))
    status, window, _ = put(gateway, "later", {"start": start, "end": iso_end, "channels": ["#ops"]})
    assert status == 200, window
    assert (window["start"], window["end"], window["in_force"]) == (start, start + 1800, False)
    # Ending a window that has not started removes it: it held nothing.
    assert http("DELETE", f"{gateway.url}/v1/windows/later", None, AUTH)[0] == 200
    assert "later" not in listed(gateway)


def test_bad_windows_are_422_and_change_nothing(fleet):
    gateway = fleet[0]
    now = time.time()
    bad = [
        ("no category or channel", {"for": "1h"}, "categories"),
        ("end before start", {"start": now + 60, "end": now + 30, "categories": ["db"]}, "end"),
        ("end passed", {"end": now - 60, "categories": ["db"]}, "end"),
        ("end and for", {"end": now + 60, "for": "1h", "categories": ["db"]}, "end"),
        ("neither end nor for", {"categories": ["db"]}, "end"),
        ("for not a duration", {"for": "soon", "categories": ["db"]}, "for"),
        ("iso without offset", {"end": "2030-01-01T00:00:00", "categories": ["db"]}, "end"),
        ("not a time", {"end": "tomorrow", "categories": ["db"]}, "end"),
        ("a boolean end", {"end": True, "categories": ["db"]}, "end"),
        ("unknown category", {"for": "1h", "categories": ["payroll"]}, "categories"),
        ("invalid category", {"for": "1h", "categories": ["a b"]}, "categories"),
        ("unknown field", {"for": "1h", "categories": ["db"], "color": "red"}, "color"),
        ("note too long", {"for": "1h", "categories": ["db"], "note": "n" * 1001}, "note"),
        ("not an object", ["db"], "body"),
    ]
    for what, body, field in bad:
        status, answer, _ = put(gateway, "bad", body)
        assert status == 422, (what, status, answer)
        assert field in str(answer["details"]), (what, answer)
    assert put(gateway, "no%20spaces", {"for": "1h", "categories": ["db"]})[0] == 422
    assert put(gateway, "ok", {"for": "1h", "categories": ["db"]}, headers=None)[0] == 401
    assert http("DELETE", f"{gateway.url}/v1/windows/ok", None, None)[0] == 401
    time.sleep(0.3)
    assert listed(gateway) == {} and listed(fleet[1]) == {}


def test_quiet_hours_are_listed_with_their_next_start_and_end(fleet):
    status, body, _ = fleet[0].get("/v1/windows")
    assert status == 200
    (quiet,) = body["quiet_hours"]
    assert quiet["channel"] == "#team-db" and quiet["windows"].startswith("mon-fri 19:00-08:00 Europe/Berlin")
    now = time.time()
    assert quiet["end"] > now and quiet["end"] > quiet["start"]
    assert quiet["in_force"] == (quiet["start"] <= now), quiet


def maintenance(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``notifier maintenance cache-move ...`` against the gateway at ``url``."""
    command = [sys.executable, "-m", "notifier", "maintenance", "cache-move", "--url", url, "--token", TOKEN, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def test_windows_survive_restarts_and_the_cli_opens_and_ends_them(fleet, tmp_path):
    done = maintenance(fleet[0].url, "--for", "30m", "--category", "cache", "--channel", "#ops", "--note", "moving")
    assert done.returncode == 0 and "cache-move: holds cache, #ops from" in done.stdout, done
    settings = {k: v for k, v in fleet[0].env.items() if k.startswith("NOTIFIER_") and k != "NOTIFIER_PORT"}
    for gateway in fleet:
        gateway.stop()
    restarted = Gateway(settings, log_dir=str(tmp_path)).start()
    try:
        window = listed(restarted)["cache-move"]
        assert window["channels"] == ["#ops"] and window["note"] == "moving" and window["in_force"], window
        done = maintenance(restarted.url, "--end")
        assert done.returncode == 0 and "cache-move: ended at" in done.stdout, done
        assert "cache-move" not in listed(restarted)
        assert maintenance(restarted.url, "--end").returncode == 1, "ending it twice: 404"
    finally:
        restarted.stop()
