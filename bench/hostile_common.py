"""What the scenarios of ``bench/hostile.py`` share: the report of figures (printed, and kept
for ``--json``), the processes under test (the ``notifier`` console script, everything a
scenario starts, their RSS, their logs), Redis seen from outside (keys found with SCAN and
their sizes) and the HTTP load (concurrent posts, the open loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import redis
from helpers import Gateway, RedisServer
from hostile_slack import SlackStandIn

KIB_PER_MIB = 1024


# -- reporting -----------------------------------------------------------------------------


class Report:
    """Prints one line per figure, in blocks per scenario and run, and keeps them for ``--json``."""

    def __init__(self) -> None:
        self.blocks: dict[str, dict[str, object]] = {}
        self._current: dict[str, object] = {}

    def block(self, title: str) -> None:
        print(f"\n== {title} ==", flush=True)
        self._current = self.blocks.setdefault(title, {})

    def add(self, label: str, value: object, unit: str = "", note: str = "") -> None:
        self._current[label] = value
        text = f"  {label:<60} {_fmt(value)}{' ' + unit if unit else ''}"
        print(text + (f"   ({note})" if note else ""), flush=True)

    def note(self, text: str) -> None:
        print(f"  .. {text}", flush=True)


def _fmt(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile ``q`` (0-100) of ``values``, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# -- the processes under test ------------------------------------------------------------


def find_notifier(given: str | None) -> str:
    """The ``notifier`` console script to run: ``--notifier``, else the first on PATH."""
    path = given or shutil.which("notifier")
    if not path:
        beside = Path(sys.executable).with_name("notifier")  # an unactivated venv's own script
        path = str(beside) if beside.exists() else None
    if not path or not os.access(path, os.X_OK):
        sys.exit("no notifier console script: put one on PATH or pass --notifier /path/to/notifier")
    return path


class Started:
    """Everything a scenario starts, stopped in reverse order on leaving, whatever happened.

    A thing is registered before it starts, so one that fails half-way is stopped too.
    """

    def __init__(self, notifier: str, log_dir: str) -> None:
        self.notifier, self.log_dir = notifier, log_dir
        self._things: list = []

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc_info) -> None:
        for thing in reversed(self._things):
            try:
                thing.stop()
            except Exception as exc:  # cleaning up must go on
                print(f"  !! stopping {type(thing).__name__}: {exc}", file=sys.stderr)

    def add(self, thing):
        """Register ``thing`` (anything with ``stop()``) and return it, not yet started."""
        self._things.append(thing)
        return thing

    def redis(self) -> RedisServer:
        return self.add(RedisServer()).start()

    def standin(self, delay: float = 0.0) -> SlackStandIn:
        return self.add(SlackStandIn(delay)).start()

    def gateway(self, env: dict[str, str]) -> Gateway:
        """One ``notifier serve`` with ``env``, ready once ``/readyz`` answers."""
        return self.add(Gateway(env, command=[self.notifier, "serve"], log_dir=self.log_dir)).start()


def rss_kib(pid: int) -> int | None:
    """``VmRSS`` of a process in KiB, None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class RssSampler(threading.Thread):
    """Samples a process's RSS every ``interval`` seconds: a list of (monotonic time, KiB)."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.samples = pid, interval, []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            kib = rss_kib(self.pid)
            if kib is not None:
                self.samples.append((time.monotonic(), kib))
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(5)

    def peak(self, start: float = 0.0, end: float = math.inf) -> int | None:
        inside = [kib for at, kib in self.samples if start <= at <= end]
        return max(inside) if inside else None


def fetch(url: str, timeout: float = 120.0) -> tuple[int, bytes, float]:
    """GET ``url``: (status, raw body, seconds it took)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    return status, raw, time.perf_counter() - started


def log_errors(gateway: Gateway) -> int:
    return sum(1 for line in gateway.output().splitlines() if "ERROR" in line or "Traceback" in line)


# -- Redis, seen from outside ------------------------------------------------------------


def redis_keys(client: redis.Redis, pattern: str) -> dict[str, str]:
    """Every key matching ``pattern`` with its type."""
    names = [k.decode() for k in client.scan_iter(match=pattern, count=1000)]
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
    return {name: kind.decode() for name, kind in zip(names, pipe.execute(), strict=True)}


def redis_sizes(client: redis.Redis, keys: dict[str, str]) -> dict[str, tuple[str, int]]:
    """Name -> (type, HLEN / SCARD / ZCARD / XLEN / 1 for strings)."""
    size_of = {
        "hash": client.hlen,
        "set": client.scard,
        "zset": client.zcard,
        "stream": client.xlen,
        "list": client.llen,
    }
    return {name: (kind, size_of[kind](name) if kind in size_of else 1) for name, kind in keys.items()}


def stream_texts(client: redis.Redis, key: str, pattern: re.Pattern) -> list[str]:
    """Every match of ``pattern`` (group 1) in any field of any entry of a stream."""
    found = []
    for _, fields in client.xrange(key, "-", "+"):
        for value in fields.values():
            found += pattern.findall(value.decode(errors="replace"))
    return found


# -- HTTP load ---------------------------------------------------------------------------


async def post_concurrently(url: str, bodies: list[dict], in_flight: int) -> tuple[Counter, float]:
    """POST every body with ``in_flight`` requests at a time: (statuses, seconds)."""
    statuses: Counter = Counter()
    pending = iter(bodies)

    async def worker(session: aiohttp.ClientSession) -> None:
        for body in pending:
            try:
                async with session.post(url, json=body) as response:
                    await response.read()
                    statuses[response.status] += 1
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                statuses[type(exc).__name__] += 1

    started = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(*(worker(session) for _ in range(in_flight)))
    return statuses, time.perf_counter() - started


@dataclass
class Request:
    """One request of the open-loop load."""

    n: int
    due: float
    sent: float = 0.0
    answered: float = 0.0
    status: object = None  # an int, or the name of the client error
    id: str = ""


async def _send(session: aiohttp.ClientSession, url: str, body: dict, req: Request) -> None:
    req.sent = time.monotonic()
    try:
        async with session.post(url, json=body) as response:
            raw = await response.read()
            req.status = response.status
            with contextlib.suppress(ValueError, AttributeError):
                req.id = json.loads(raw).get("id", "") or ""
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        req.status = type(exc).__name__
    req.answered = time.monotonic()


async def _at(start: float, actions: list[tuple[float, object]]) -> None:
    """Run each (seconds after ``start``, callable) in turn, on time."""
    for offset, action in actions:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
        action()


async def open_loop(url: str, rate: float, seconds: float, body_for, actions) -> tuple[list[Request], float]:
    """Send ``rate`` requests/s for ``seconds`` without waiting for answers (open loop).

    ``actions`` run at their offsets meanwhile. Returns every request and the start time.
    """
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=180)
    requests, tasks = [], []
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.monotonic()
        chaos = asyncio.create_task(_at(start, actions))
        for n in range(int(rate * seconds)):
            req = Request(n, start + n / rate)
            wait = req.due - time.monotonic()
            await asyncio.sleep(max(0.0, wait))
            requests.append(req)
            tasks.append(asyncio.create_task(_send(session, url, body_for(n), req)))
        await chaos
        await asyncio.gather(*tasks)
    return requests, start


def max_outstanding(requests: list[Request]) -> tuple[int, float]:
    """The most requests sent and not yet answered at once, and when (monotonic time)."""
    edges = sorted([(r.sent, 1) for r in requests] + [(r.answered, -1) for r in requests], key=lambda e: (e[0], e[1]))
    level = peak = 0
    when = 0.0
    for at, step in edges:
        level += step
        if level > peak:
            peak, when = level, at
    return peak, when
