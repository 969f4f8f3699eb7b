"""Real parts for the tests: redis-server, gateway processes, programs from Debian packages.

A missing program fails the test that needs it, naming the command that
installs it (``tests/run`` installs them all): the suite never turns green by
skipping what it could not run.

Programs are found by ``need`` (``programs.py``); ``ShiftedClock`` lives in ``shifted_clock.py``.
Both are importable from here as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from programs import ALIASES, INSTALL, need
from shifted_clock import SHIFT_SOURCE, ShiftedClock

__all__ = [
    "ALERTMANAGER_CONFIG",
    "ALIASES",
    "INSTALL",
    "SHIFT_SOURCE",
    "STORE_ONLY",
    "Gateway",
    "RedisServer",
    "ShiftedClock",
    "alertmanager",
    "free_port",
    "http",
    "need",
    "replicas",
    "slack_env",
    "until",
    "wait_for",
]


PORTS_FROM = 20000  # servers' ports: from here up to the kernel's ephemeral range


def free_port() -> int:
    """A free port for a server, below the kernel's ephemeral range and in this test worker's slice of it.

    A port from ``bind(0)`` is one an outgoing connection may take meanwhile: a server restarted on
    its port (a pod, a replica, a store) then found it in use. Each pytest-xdist worker draws from
    its own slice, so two workers never hand out the same port.
    """
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    below = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (below - PORTS_FROM) // max(1, workers)
    for _ in range(200 if size >= 100 else 0):
        port = PORTS_FROM + worker * size + random.randrange(size)
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # no room below the ephemeral range: let the kernel choose
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """Await ``predicate()`` (a coroutine function) until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class RedisServer:
    """A throw-away redis-server on a free port, no persistence."""

    def __init__(
        self,
        port: int | None = None,
        extra: list[str] | None = None,
        config: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.env = env  # added to the environment of redis-server (e.g. ShiftedClock.env)
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="notifier-redis-")
        self.extra = extra or []
        self.config = config  # a configuration file read first; the arguments here override it
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = need("redis-server")
        config = None
        if self.config:  # a copy of its own: Sentinel's CONFIG REWRITE must never touch the original
            config = os.path.join(self.dir, "redis.conf")
            shutil.copyfile(self.config, config)
        self.proc = subprocess.Popen(
            [
                binary,
                *([config] if config else []),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--daemonize",
                "no",
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **self.env} if self.env else None,
        )
        wait_for(self.ping, 10, what=f"redis-server on {self.port}")
        return self

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith((b"+PONG", b"-NOAUTH"))  # up, with --requirepass or not
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
            self.proc.wait(10)


def http(
    method: str, url: str, body: object = None, headers: dict | None = None, timeout: float = 10.0
) -> tuple[int, dict, dict]:
    """A blocking HTTP call: (status, JSON body or {}, headers)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw, status, head = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, head = exc.read(), exc.code, dict(exc.headers)
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {"_raw": raw.decode(errors="replace")}
    return status, parsed, head


# `notifier serve` whose replicas decide no alert locally: every event with a dedup_key goes to
# the store (the Limiter's ``alerts=False``). Tests compare the answers of a storm with it.
STORE_ONLY = [
    sys.executable,
    "-c",
    "import functools, sys, notifier.admission.limiter as m, notifier.cli as cli; "
    "m.Limiter.__init__ = functools.partialmethod(m.Limiter.__init__, alerts=False); "
    "sys.exit(cli.main(['serve']))",
]


class Gateway:
    """``notifier serve`` as a user runs it: the installed console script, in its own process."""

    def __init__(
        self,
        env: dict[str, str],
        port: int | None = None,
        wrapper: list[str] | None = None,
        log_dir: str | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.command = command  # default: the installed console script
        self.env = {
            **os.environ,
            "NOTIFIER_HOST": "127.0.0.1",
            "NOTIFIER_PORT": str(self.port),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.wrapper = wrapper or []
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="notifier-gw-")) / f"gateway-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready: bool = True) -> Gateway:
        script = shutil.which("notifier")
        argv = self.command or ([script, "serve"] if script else [sys.executable, "-m", "notifier", "serve"])
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(self.wrapper + argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        path = "/readyz" if ready else "/healthz"
        wait_for(lambda: self._ok(path), 120 if self.command else 20, what=f"gateway on {self.port}{path}")
        return self

    def _ok(self, path: str) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"gateway exited with {self.proc.returncode}:\n{self.output()}")
        try:
            return http("GET", self.url + path, timeout=1)[0] == 200
        except OSError:
            return False

    def post(self, body: object, path: str = "/v1/events", **kwargs):
        return http("POST", self.url + path, body, **kwargs)

    def get(self, path: str, headers: dict | None = None):
        return http("GET", self.url + path, headers=headers)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, kill: bool = False, timeout: float = 15) -> int | None:
        if self.proc and self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode if self.proc else None


ALERTMANAGER_CONFIG = """\
route:
  receiver: notifier
  group_by: [{group_by}]
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 1h
receivers:
- name: notifier
  webhook_configs:
  - url: {url}/v1/alertmanager
    send_resolved: true
"""


@contextlib.contextmanager
def replicas(env: dict[str, str], tmp_path, names=("a", "b")) -> Iterator[list[Gateway]]:
    """Gateway processes on one settings, each its own NOTIFIER_REPLICA_ID; stopped on exit."""
    gateways: list[Gateway] = []
    try:
        for name in names:
            gateways.append(Gateway({**env, "NOTIFIER_REPLICA_ID": name}, log_dir=str(tmp_path)).start())
        yield gateways
    finally:
        for gateway in gateways:
            gateway.stop()


@contextlib.contextmanager
def alertmanager(
    gateway_url: str, folder: Path, group_by: str = "'alertname'", config: str | None = None
) -> Iterator[str]:
    """A real prometheus-alertmanager posting to the gateway at ``gateway_url``; yields its URL.

    ``config``: a configuration of its own (e.g. ``slack_configs`` pointing at the front doors).
    """
    binary = need("prometheus-alertmanager")
    (folder / "am.yml").write_text(config or ALERTMANAGER_CONFIG.format(url=gateway_url, group_by=group_by))
    port = free_port()
    argv = [
        binary,
        f"--config.file={folder / 'am.yml'}",
        f"--storage.path={folder / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    log_path = folder / "alertmanager.log"
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, log_path.read_text()
        try:
            return http("GET", url + "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    try:
        wait_for(ready, 30, what="alertmanager ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def slack_env(redis_url: str, slack: Any, **extra: str) -> dict[str, str]:
    """Settings of a gateway on ``redis_url`` posting to the Slack stand-in; limits far away unless given
    (or a configuration file gives the tree: the file and the environment may not both)."""
    from slack_standin import TOKEN  # the stand-in's own token

    far = (
        {} if "NOTIFIER_CONFIG" in extra else {"NOTIFIER_GLOBAL_LIMIT": "1000/1h", "NOTIFIER_CATEGORY_LIMIT": "1000/1h"}
    )
    return {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": "#alerts",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        **far,
        **extra,
    }
