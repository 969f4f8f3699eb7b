"""`notifier serve` as a user runs it, and the package as `pip install .` builds it."""

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from helpers import Gateway, RedisServer, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_serve_with_no_configuration_enforces_default_limits(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    gateway = Gateway({}, log_dir=str(tmp_path))
    gateway.env = {**env, "NOTIFIER_PORT": str(gateway.port), "PYTHONUNBUFFERED": "1"}
    gateway.start()
    try:
        answers = [gateway.post({"category": "deploy", "text": f"release {i}"}) for i in range(12)]
        assert [a[0] for a in answers] == [202] * 10 + [429] * 2  # default category limit 10/30m
        assert answers[-1][1]["rule"] == "10/30m"
        wait_for(lambda: "release 9" in gateway.output(), 15, what="console sink output")
        assert "one replica" in gateway.output()  # the embedded store warns
        assert gateway.get("/v1/stats")[1]["accepted"] == 10
    finally:
        assert gateway.stop() == 0  # SIGTERM: a clean shutdown


def test_serve_over_a_unix_socket(tmp_path):
    socket_path = tmp_path / "redis.sock"
    server = RedisServer(extra=["--unixsocket", str(socket_path), "--unixsocketperm", "700"]).start()
    gateway = Gateway(
        {
            "NOTIFIER_REDIS_URL": f"unix://{socket_path}",
            "NOTIFIER_CATEGORY_LIMIT": "2/1m",
            "NOTIFIER_DIGEST_INTERVAL": "0",
        },
        log_dir=str(tmp_path),
    )
    try:
        gateway.start()
        answers = [gateway.post({"category": "db", "text": f"over the socket {i}"})[0] for i in range(3)]
        assert answers == [202, 202, 429]
        wait_for(lambda: "over the socket 1" in gateway.output(), 15, what="console sink output")
        assert gateway.get("/v1/stats")[1]["accepted"] == 2
        # The events are in that server, not in an embedded store.
        assert "one replica" not in gateway.output()
    finally:
        gateway.stop()
        server.stop()


def test_python_m_notifier_is_the_same_command():
    done = subprocess.run([sys.executable, "-m", "notifier", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "serve" in done.stdout


def test_wheel_ships_the_lua_scripts_and_finds_them(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("notifier-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    scripts = sorted(p.name for p in (ROOT / "lua").glob("*.lua"))
    assert sorted(n.split("/")[-1] for n in names if n.startswith("notifier/lua/")) == scripts
    console = sorted(p.name for p in (ROOT / "notifier" / "console").iterdir() if p.is_file())
    assert sorted(n.split("/")[-1] for n in names if n.startswith("notifier/console/")) == console  # uPlot too
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = "import notifier.store.scripts as s; print(s.script_dir()); print(len(list(s.script_dir().glob('*.lua'))))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
        check=True,
    )
    folder, count = done.stdout.split()
    assert folder.startswith(str(target)) and int(count) == len(scripts)


def test_sdist_carries_the_tests_and_what_they_need(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path), str(ROOT)], check=True, capture_output=True
    )
    (sdist,) = tmp_path.glob("notifier-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {
        "LICENSE",
        "settings.example.env",
        "tests/run",
        "tests/conftest.py",
        "tests/support/helpers.py",
        "tests/support/slack_standin.py",
        "tests/support/builders.py",
        "lua/admit.lua",
    } <= names
    tracked = subprocess.run(["git", "ls-files", "tests"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert set(tracked) <= names  # every test file of the checkout
    (unpacked,) = (p for p in tmp_path.iterdir() if p.is_dir())
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=unpacked,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and " error" not in done.stdout, done.stdout[-2000:]
