"""Hostile-load figures: what many categories, a hung store and a dead replica do to the gateway.

    python bench/hostile.py                          # all three scenarios, default sizes
    python bench/hostile.py --categories 30000       # one scenario (the flags combine)
    python bench/hostile.py --hung-store --rate 600 --repeat 2
    python bench/hostile.py --reclaim --notifier /path/to/venv/bin/notifier --json out.json

It measures and prints numbers, it asserts nothing: run it before and after a change and
compare. The gateway is a black box: the ``notifier serve`` console script (the first on
PATH, or ``--notifier``), its environment settings, HTTP, and the Redis keys it leaves
(found with SCAN). Each scenario starts its own redis-server on a free port, and where
Slack is needed a local incoming-webhook stand-in that enforces Block Kit's size limits.

* ``--categories [N]``: N events with N random categories against ``100/30m`` global,
  ``10/30m`` per category and 2 s digests: gateway memory, ``/metrics``, ``/v1/stats`` and
  Redis sizes, and whether the digests fit Slack and add up to the 429s.
* ``--hung-store``: an open-loop load of ``--rate`` requests/s while redis-server is
  frozen with SIGSTOP for 8 s: outstanding requests, latency, 503s, memory, recovery,
  and how many events answered 503 were delivered or queued all the same.
* ``--reclaim``: two replicas, Slack answering in 0.5 s; one replica is killed while it
  holds entries: how late its entries arrive and whether newer events overtake them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import redis
from aiohttp import web

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The test helpers live in tests/ today and in tests/support/ later: try that first.
sys.path[:0] = [str(REPO), str(REPO / "tests" / "support"), str(REPO / "tests")]
_helpers = importlib.import_module("helpers")
Gateway, RedisServer, free_port = _helpers.Gateway, _helpers.RedisServer, _helpers.free_port

KIB_PER_MIB = 1024
SECTION_TEXT_LIMIT, BLOCKS_LIMIT, FIELDS_LIMIT, TEXT_LIMIT = 3000, 50, 10, 40_000
SUPPRESSED = re.compile(r"Suppressed (\d+)")


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


# -- the Slack stand-in ------------------------------------------------------------------


def block_kit_problem(body: object) -> str | None:
    """Why Slack would refuse this webhook body for its size (``invalid_blocks``), or None."""
    if not isinstance(body, dict):
        return "body is not a JSON object"
    text = body.get("text") or ""
    if len(text) > TEXT_LIMIT:
        return f"text of {len(text)} characters"
    blocks = body.get("blocks") or []
    if len(blocks) > BLOCKS_LIMIT:
        return f"{len(blocks)} blocks"
    for block in blocks:
        if block.get("type") != "section":
            continue
        section = (block.get("text") or {}).get("text") or ""
        if len(section) > SECTION_TEXT_LIMIT:
            return f"section text of {len(section)} characters"
        if len(block.get("fields") or []) > FIELDS_LIMIT:
            return f"section with {len(block['fields'])} fields"
    return None


@dataclass
class Received:
    """One webhook call as the stand-in saw it."""

    at: float  # time.monotonic() on arrival
    text: str
    status: int
    problem: str


class SlackStandIn:
    """An incoming-webhook stand-in on a free port, served from a thread of its own.

    Records every body's text and answers 400 ``invalid_blocks`` when a body breaks
    Block Kit's size limits, else 200 ``ok``, each answer after ``delay`` seconds.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.port, self.delay = free_port(), delay
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> SlackStandIn:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the Slack stand-in did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=512 * 1024 * 1024)  # a digest may be huge: see it whole
        app.router.add_post("/hook", self._hook)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    async def _hook(self, request: web.Request) -> web.Response:
        at = time.monotonic()
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        problem = block_kit_problem(body)
        text = body.get("text", "") if isinstance(body, dict) else ""
        with self._lock:
            self.received.append(Received(at, text, 400 if problem else 200, problem or ""))
        if self.delay:
            await asyncio.sleep(self.delay)
        if problem:
            return web.Response(status=400, text="invalid_blocks")
        return web.Response(text="ok")


def wait_until_quiet(standin: SlackStandIn, quiet: float, at_least: float, timeout: float) -> float:
    """Wait until the stand-in got nothing for ``quiet`` s (and ``at_least`` s passed); the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        received = standin.snapshot()
        last = received[-1].at if received else started
        now = time.monotonic()
        if now - started >= at_least and now - max(last, started) >= quiet:
            break
        time.sleep(0.2)
    return time.monotonic() - started


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


# -- scenario 1: many categories ---------------------------------------------------------


def scenario_categories(report: Report, notifier: str, count: int, channel_rate: str, title: str, log_dir: str) -> None:
    """``count`` events, each of a new random category; memory, views, Redis and digests."""
    interval = 2.0
    with Started(notifier, log_dir) as started:
        server = started.redis()
        standin = started.standin()
        gateway = started.gateway(
            {
                "NOTIFIER_REDIS_URL": server.url,
                "NOTIFIER_GLOBAL_LIMIT": "100/30m",
                "NOTIFIER_CATEGORY_LIMIT": "10/30m",
                "NOTIFIER_DIGEST_INTERVAL": f"{interval:g}s",
                "NOTIFIER_SLACK_WEBHOOK_URL": standin.url,
                "NOTIFIER_CHANNEL_RATE": channel_rate,
            }
        )
        client = redis.Redis.from_url(server.url)
        pid = gateway.proc.pid
        report.block(title)
        report.add(
            "settings", f"100/30m global, 10/30m per category, {interval:g}s digests, channel rate {channel_rate}"
        )
        rss_idle = rss_kib(pid)
        bodies = [{"category": uuid.uuid4().hex, "text": f"cat-{n}"} for n in range(count)]
        statuses, seconds = asyncio.run(post_concurrently(gateway.url + "/v1/events", bodies, 64))
        rss_loaded = rss_kib(pid)
        report.add("events posted", count, note=f"{seconds:.1f} s, {count / seconds:.0f} req/s, 64 in flight")
        report.add("answers", " ".join(f"{k}:{v}" for k, v in sorted(statuses.items(), key=str)))
        waited = wait_until_quiet(standin, quiet=3 * interval, at_least=3 * interval, timeout=180)
        report.add(
            "waited after the load for deliveries",
            round(waited, 1),
            "s",
            "until the stand-in got nothing for 3 digest intervals",
        )
        stats = _report_views(report, gateway.url)
        report.add(
            "/v1/stats accepted / dropped vs 202s / 429s",
            f"{stats.get('accepted')} / {stats.get('dropped')} vs {statuses[202]} / {statuses[429]}",
        )
        rss_scraped = rss_kib(pid)
        report.add("gateway RSS idle (after start)", round(rss_idle / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS right after the load", round(rss_loaded / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS after digests and the scrapes", round(rss_scraped / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS growth (after scrapes - idle)", round((rss_scraped - rss_idle) / KIB_PER_MIB, 1), "MiB")
        _report_redis(report, client)
        _report_digests(report, standin.snapshot(), statuses.get(429, 0))
        report.add("gateway log lines with ERROR or Traceback", _log_errors(gateway))
        report.note(f"gateway log: {gateway.log_path}")
        client.close()


def _report_views(report: Report, base: str) -> dict:
    """Size and time of ``/metrics`` (one scrape), ``/v1/stats`` and ``/v1/limits``."""
    status, raw, seconds = fetch(base + "/metrics")
    lines = raw.decode(errors="replace").splitlines()
    series = sum(1 for line in lines if line.startswith("notifier_events_total{"))
    report.add("/metrics status", status)
    report.add("/metrics size", len(raw), "bytes")
    report.add("/metrics lines", len(lines))
    report.add("/metrics notifier_events_total series", series)
    report.add("/metrics scrape time", round(seconds * 1000, 1), "ms")
    bodies = {}
    for path in ("/v1/stats", "/v1/limits"):
        status, raw, seconds = fetch(base + path)
        with contextlib.suppress(ValueError):
            bodies[path] = json.loads(raw)
        named = bodies.get(path, {}).get("by_category" if path == "/v1/stats" else "categories")
        report.add(f"{path} status", status)
        report.add(f"{path} size", len(raw), "bytes")
        report.add(
            f"{path} categories named",
            None if named is None else len(named),
            note="with (other)" if named and "(other)" in named else "",
        )
        report.add(f"{path} time", round(seconds * 1000, 1), "ms")
    return bodies.get("/v1/stats", {})


def _report_redis(report: Report, client: redis.Redis) -> None:
    """The deployment's keys: every hash and set with its size, the rest summed by type."""
    sizes = redis_sizes(client, redis_keys(client, "notifier:*"))
    report.add("redis keys notifier:*", len(sizes))
    by_type: Counter = Counter()
    for name, (kind, size) in sorted(sizes.items()):
        if kind in ("hash", "set"):
            report.add(f"redis {'HLEN' if kind == 'hash' else 'SCARD'} {name}", size)
        else:
            by_type[kind] += 1
    report.add("redis other keys by type", " ".join(f"{k}:{v}" for k, v in sorted(by_type.items())) or "none")
    report.add("redis used_memory", round(client.info("memory")["used_memory"] / KIB_PER_MIB / KIB_PER_MIB, 2), "MiB")


def _report_digests(report: Report, received: list[Received], dropped: int) -> None:
    """Digests accepted vs refused by the stand-in, and their Suppressed sums vs the 429s."""
    digests = [r for r in received if SUPPRESSED.search(r.text)]
    accepted = [r for r in digests if r.status == 200]
    refused = [r for r in digests if r.status != 200]
    events = [r for r in received if not SUPPRESSED.search(r.text)]
    ok_sum = sum(int(SUPPRESSED.search(r.text).group(1)) for r in accepted)
    refused_sum = sum(int(SUPPRESSED.search(r.text).group(1)) for r in refused)
    report.add("event messages received / refused", f"{len(events)} / {sum(r.status != 200 for r in events)}")
    report.add("digests accepted by the stand-in", len(accepted))
    report.add(
        "digests refused (400 invalid_blocks)",
        len(refused),
        note=", ".join(sorted({r.problem for r in refused}))[:120] or "",
    )
    report.add("largest digest text", max((len(r.text) for r in digests), default=0), "characters")
    report.add("Suppressed N summed, accepted digests", ok_sum)
    report.add("Suppressed N summed, refused digests", refused_sum)
    report.add("429 answers", dropped)
    report.add("accepted digests' sum == 429s", ok_sum == dropped)
    report.add("all digests' sum == 429s", ok_sum + refused_sum == dropped)


def _log_errors(gateway: Gateway) -> int:
    return sum(1 for line in gateway.output().splitlines() if "ERROR" in line or "Traceback" in line)


# -- scenario 2: a hung store ------------------------------------------------------------

HOSTILE = re.compile(r"\bhostile-(\d+)\b")
OVERTAKEN_S = 5.0  # a text delivered after one sent this much later was held back (e.g. until a reclaim)


def scenario_hung_store(report: Report, notifier: str, rate: float, linger: float, title: str, log_dir: str) -> None:
    """Open-loop load while redis-server is frozen (SIGSTOP) for 8 of 16 seconds."""
    before, frozen, after = 4.0, 8.0, 4.0
    marks: dict[str, float] = {}
    with Started(notifier, log_dir) as started:
        server = started.redis()
        gateway = started.gateway(
            {
                "NOTIFIER_REDIS_URL": server.url,
                "NOTIFIER_GLOBAL_LIMIT": "1000000/1h",
                "NOTIFIER_CATEGORY_LIMIT": "1000000/1h",
            }
        )
        redis_pid = server.proc.pid
        sampler = started.add(RssSampler(gateway.proc.pid))
        sampler.start()
        time.sleep(1.0)
        idle = sampler.peak()
        counters = redis_counters(redis.Redis.from_url(server.url))

        def freeze() -> None:
            os.kill(redis_pid, signal.SIGSTOP)
            marks["stop"] = time.monotonic()

        def thaw() -> None:
            os.kill(redis_pid, signal.SIGCONT)
            marks["cont"] = time.monotonic()

        try:
            requests, start = asyncio.run(
                open_loop(
                    gateway.url + "/v1/events",
                    rate,
                    before + frozen + after,
                    lambda n: {"category": "hung", "text": f"hostile-{n}"},
                    [(before, freeze), (before + frozen, thaw)],
                )
            )
        finally:
            os.kill(redis_pid, signal.SIGCONT)  # never leave it frozen, whatever happened
        marks.setdefault("cont", time.monotonic())
        time.sleep(linger)  # let delivery drain
        sampler.stop()
        report.block(title)
        _report_open_loop(report, requests, start, rate, marks)
        _report_memory(report, sampler, idle, marks)
        _report_redis_counters(report, counters, redis_counters(redis.Redis.from_url(server.url)))
        _report_admitted_503(report, requests, gateway, redis.Redis.from_url(server.url), marks["stop"], rate)
        report.add("gateway log lines with ERROR or Traceback", _log_errors(gateway))
        report.note(f"gateway log: {gateway.log_path}")


def _report_open_loop(
    report: Report, requests: list[Request], start: float, rate: float, marks: dict[str, float]
) -> None:
    """Answers, outstanding requests, latency by phase and recovery after SIGCONT."""
    stop, cont = marks["stop"], marks["cont"]
    lag = max(r.sent - r.due for r in requests)
    span = requests[-1].sent - requests[0].sent
    report.add(
        "requests sent",
        len(requests),
        note=f"target {rate:g}/s, achieved {len(requests) / span:.0f}/s, sender at most {lag * 1000:.0f} ms late",
    )
    report.add("SIGSTOP / SIGCONT at", f"{stop - start:.2f} s / {cont - start:.2f} s")
    statuses = Counter(r.status for r in requests)
    report.add("answers", " ".join(f"{k}:{v}" for k, v in sorted(statuses.items(), key=str)))
    report.add("503 answers", statuses.get(503, 0))
    peak, when = max_outstanding(requests)
    report.add("max outstanding requests", peak, note=f"at {when - start:.2f} s")
    phases = {"before the stop": (start, stop), "during the stop": (stop, cont), "after SIGCONT": (cont, math.inf)}
    for name, (low, high) in phases.items():
        latencies = [(r.answered - r.sent) * 1000 for r in requests if low <= r.sent < high]
        report.add(
            f"latency of requests sent {name}: n / p50 / p99 / max",
            f"{len(latencies)} / {_ms(percentile(latencies, 50))} / {_ms(percentile(latencies, 99))} / "
            f"{_ms(max(latencies, default=None))}",
            "ms",
        )
    answered_in_stop = [r for r in requests if stop <= r.answered < cont]
    report.add(
        "answers given during the stop",
        len(answered_in_stop),
        note=" ".join(f"{k}:{v}" for k, v in sorted(Counter(r.status for r in answered_in_stop).items(), key=str)),
    )
    refused = sorted(r.answered for r in requests if r.status == 503)
    report.add(
        "SIGSTOP -> first / last 503",
        f"{(refused[0] - stop) * 1000:.0f} / {(refused[-1] - stop) * 1000:.0f}" if refused else "n/a",
        "ms",
    )
    first_ok = min((r.answered for r in requests if r.status == 202 and r.answered >= cont), default=None)
    report.add("SIGCONT -> first 202", None if first_ok is None else round((first_ok - cont) * 1000, 1), "ms")
    last = max(r.answered for r in requests)
    report.add("SIGCONT -> last answer", round((last - cont) * 1000, 1), "ms")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _report_memory(report: Report, sampler: RssSampler, idle: int | None, marks: dict[str, float]) -> None:
    during = sampler.peak(marks["stop"], marks["cont"])
    report.add("gateway RSS idle", round(idle / KIB_PER_MIB, 1) if idle else None, "MiB")
    report.add(
        "gateway RSS peak during the stop",
        round(during / KIB_PER_MIB, 1) if during else None,
        "MiB",
        note="sampled every 100 ms",
    )
    report.add("gateway RSS peak over the whole run", round(sampler.peak() / KIB_PER_MIB, 1), "MiB")
    report.add("gateway RSS at the end (after the linger)", round(sampler.samples[-1][1] / KIB_PER_MIB, 1), "MiB")


def redis_counters(client: redis.Redis) -> Counter:
    """Connections Redis accepted and the calls of each command so far (then closes ``client``)."""
    counts = Counter({"connections": client.info("stats")["total_connections_received"]})
    for name, stats in client.info("commandstats").items():
        counts[name.removeprefix("cmdstat_")] = stats["calls"]
    client.close()
    return counts


def _report_redis_counters(report: Report, before: Counter, after: Counter) -> None:
    """What Redis saw of the run: connections opened and the commands that ran."""
    delta = after - before
    report.add("redis connections accepted during the run", delta["connections"])
    scripts = sum(delta[name] for name in ("evalsha", "eval", "fcall"))
    report.add("redis script calls (EVALSHA/EVAL/FCALL) during the run", scripts)
    busiest = ", ".join(f"{k} {v}" for k, v in delta.most_common() if k != "connections")
    report.add("redis commands during the run", busiest[:200])


def _overtaken(order: list[int], rate: float, seconds: float) -> tuple[int, float]:
    """Of texts in delivery order, how many came after one sent ``seconds`` or more later; the worst gap (s).

    Smaller gaps are normal: under load, requests reach the gateway out of their send order.
    """
    late, gap, highest = 0, 0.0, -1
    for n in order:
        if highest - n >= rate * seconds:
            late += 1
            gap = max(gap, (highest - n) / rate)
        highest = max(highest, n)
    return late, gap


def _report_admitted_503(
    report: Report, requests: list[Request], gateway: Gateway, client: redis.Redis, stop: float, rate: float
) -> None:
    """How many events answered 503 were delivered (console lines) or still sit in a stream."""
    order = [
        int(m)
        for line in gateway.output().splitlines()
        if line.startswith("[notifier -> ")
        for m in HOSTILE.findall(line)
    ]
    printed = Counter(order)
    streams = {
        name: [int(n) for n in stream_texts(client, name, HOSTILE)]
        for name, kind in redis_keys(client, "*").items()
        if kind == "stream"
    }
    queued = {n for found in streams.values() for n in found}
    refused = {r.n for r in requests if r.status == 503}
    accepted = {r.n for r in requests if r.status == 202}
    report.add("texts delivered (console lines)", len(printed), note=f"{sum(printed.values())} lines")
    report.add("texts delivered more than once", sum(1 for c in printed.values() if c > 1))
    late, gap = _overtaken(order, rate, OVERTAKEN_S)
    report.add(
        f"texts printed after one sent >= {OVERTAKEN_S:g} s later",
        late,
        note=f"the worst by {gap:.1f} s of sending" if late else "",
    )
    for name, found in sorted(streams.items()):
        report.add(f"texts still in stream {name}", len(found))
        for group in client.xinfo_groups(name):
            held = ", ".join(
                f"{c['name'].decode()} {c['pending']} (idle {c['idle'] / 1000:.1f} s)"
                for c in client.xinfo_consumers(name, group["name"])
                if c["pending"]
            )
            report.add(f"  pending in group {group['name'].decode()}", group["pending"], note=held)
    report.add("503 answers whose event was delivered", len(refused & set(printed)))
    report.add("503 answers whose event is still queued", len(refused & queued - set(printed)))
    admitted = sorted(refused & (set(printed) | queued))
    report.add("503 that admitted (delivered or queued)", len(admitted), note=f"of {len(refused)} 503s")
    by_n = {r.n: r for r in requests}
    for n in admitted[:5]:
        req = by_n[n]
        report.note(
            f"hostile-{n}: sent {(req.sent - stop) * 1000:+.0f} ms, answered 503 "
            f"{(req.answered - stop) * 1000:+.0f} ms from SIGSTOP"
        )
    report.add("202 answers never delivered nor queued", len(accepted - set(printed) - queued))
    other = {r.n for r in requests if r.status not in (202, 503)}
    report.add(
        "other answers whose event was delivered or queued",
        len(other & (set(printed) | queued)),
        note=f"of {len(other)}",
    )
    client.close()


# -- scenario 3: a replica killed while it holds entries ---------------------------------

RECLAIM = re.compile(r"\breclaim-([ab])-(\d+)\b")


def scenario_reclaim(
    report: Report, notifier: str, events: int, rate: float, seconds: float, title: str, log_dir: str
) -> None:
    """Kill replica a while it holds entries; keep posting to b; when and in what order do a's arrive."""
    with Started(notifier, log_dir) as started:
        server = started.redis()
        standin = started.standin(delay=0.5)
        common = {
            "NOTIFIER_REDIS_URL": server.url,
            "NOTIFIER_SLACK_WEBHOOK_URL": standin.url,
            "NOTIFIER_CLAIM_IDLE": "2s",
            "NOTIFIER_GLOBAL_LIMIT": "1000000/1h",
            "NOTIFIER_CATEGORY_LIMIT": "1000000/1h",
        }
        client = redis.Redis.from_url(server.url)
        gw_a = started.gateway({**common, "NOTIFIER_REPLICA_ID": "a"})
        posted_a = asyncio.run(
            post_concurrently(
                gw_a.url + "/v1/events", [{"category": "reclaim", "text": f"reclaim-a-{n}"} for n in range(events)], 8
            )
        )[0]
        posted = time.monotonic()
        gw_b = started.gateway({**common, "NOTIFIER_REPLICA_ID": "b"})
        gw_a.proc.kill()
        gw_a.proc.wait(10)
        killed, killed_wall = time.monotonic(), time.time()
        held = _held_texts(client, "a")
        posted_b = asyncio.run(_post_paced(gw_b.url + "/v1/events", rate, seconds))
        expected = {("a", n) for n in held} | {("b", n) for n, status in posted_b if status == 202}
        waited = _wait_for_arrivals(standin, expected, timeout=max(120.0, len(expected) * 3))
        report.block(title)
        report.add(
            "expected events missing at the stand-in",
            len(expected - _arrived(standin)),
            note=f"waited {waited:.1f} s after the last post",
        )
        report.add("a's events posted -> SIGKILL (b starting meanwhile)", round(killed - posted, 2), "s")
        _report_reclaim(report, standin.snapshot(), killed, held, posted_a, posted_b, events)
        reclaimed = _first_reclaim_logged(gw_b.output())
        report.add(
            "SIGKILL -> b logs its first reclaim",
            None if reclaimed is None else round(reclaimed - killed_wall, 2),
            "s",
            "log timestamps have ms resolution",
        )
        report.add("gateway b log lines with ERROR or Traceback", _log_errors(gw_b))
        report.note(f"gateway logs: {gw_a.log_path}, {gw_b.log_path}")
        client.close()


def _held_texts(client: redis.Redis, consumer: str) -> list[int]:
    """The ``reclaim-a-<n>`` numbers of the outbox entries pending under ``consumer``."""
    numbers = []
    for name, kind in redis_keys(client, "*outbox*").items():
        if kind != "stream":
            continue
        for group in client.xinfo_groups(name):
            pending = client.xpending_range(name, group["name"], "-", "+", 10_000, consumername=consumer)
            for entry in pending:
                for _, fields in client.xrange(name, entry["message_id"], entry["message_id"]):
                    text = " ".join(v.decode(errors="replace") for v in fields.values())
                    numbers += [int(n) for side, n in RECLAIM.findall(text) if side == "a"]
    return sorted(set(numbers))


async def _post_paced(url: str, rate: float, seconds: float) -> list[tuple[int, object]]:
    """Post ``reclaim-b-<n>`` at ``rate``/s for ``seconds``, each after the last answer: (n, status)."""
    results = []
    start = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        for n in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
            try:
                async with session.post(url, json={"category": "reclaim", "text": f"reclaim-b-{n}"}) as resp:
                    await resp.read()
                    results.append((n, resp.status))
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                results.append((n, type(exc).__name__))
    return results


def _first_reclaim_logged(output: str) -> float | None:
    """Unix time of the first log line that mentions a reclaim, None if there is none."""
    for line in output.splitlines():
        match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*reclaim", line)
        if match:
            stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            return stamp.timestamp() + int(match.group(2)) / 1000
    return None


def _wait_for_arrivals(standin: SlackStandIn, expected: set, timeout: float) -> float:
    """Wait until every expected text reached the stand-in, at most ``timeout`` s; the wait."""
    started = time.monotonic()
    while not expected <= _arrived(standin) and time.monotonic() - started < timeout:
        time.sleep(0.5)
    return time.monotonic() - started


def _arrived(standin: SlackStandIn) -> set[tuple[str, int]]:
    return {(side, int(n)) for r in standin.snapshot() if r.status == 200 for side, n in RECLAIM.findall(r.text)}


def _report_reclaim(
    report: Report,
    received: list[Received],
    killed: float,
    held: list[int],
    posted_a: Counter,
    posted_b: list,
    events: int,
) -> None:
    """Lateness of the killed replica's entries, and whether newer events overtook them."""
    first: dict[tuple[str, int], float] = {}
    copies: Counter = Counter()
    for r in received:
        for side, n in RECLAIM.findall(r.text):
            first.setdefault((side, int(n)), r.at)
            copies[(side, int(n))] += 1
    before_kill = sorted(n for (side, n), at in first.items() if side == "a" and at < killed)
    report.add("events posted to a", events, note=" ".join(f"{k}:{v}" for k, v in sorted(posted_a.items(), key=str)))
    report.add("a's events at the stand-in before the kill", len(before_kill))
    report.add("entries held by a at the kill (XPENDING)", len(held), note=_ranges(held))
    report.add(
        "of those, already at the stand-in before the kill",
        sum(1 for n in held if n in before_kill),
        note="a send in flight, unsettled: delivered again",
    )
    late = sorted(first[("a", n)] - killed for n in held if ("a", n) in first and first[("a", n)] >= killed)
    report.add("held entries arriving after the kill", len(late))
    report.add(
        "their delay after SIGKILL: first / median / last",
        f"{late[0]:.2f} / {statistics.median(late):.2f} / {late[-1]:.2f}" if late else "n/a",
        "s",
    )
    b_ok = [n for n, status in posted_b if status == 202]
    report.add("events posted to b after the kill (202)", len(b_ok), note=f"of {len(posted_b)}")
    b_times = sorted(first[("b", n)] for n in b_ok if ("b", n) in first)
    a_times = [first[("a", n)] for n in held if ("a", n) in first and first[("a", n)] >= killed]
    overtaken = sum(1 for a in a_times for b in b_times if b < a)
    b_before_first = sum(1 for b in b_times if a_times and b < min(a_times))
    report.add("b's newer events arriving before a's first held entry", b_before_first)
    report.add(
        "b's newer events arriving before a's last held entry", sum(1 for b in b_times if a_times and b < max(a_times))
    )
    report.add(
        "pairs (held a entry, newer b event) out of admission order",
        overtaken,
        note=f"of {len(a_times) * len(b_times)} pairs",
    )
    report.add("delivered in admission order on the channel", overtaken == 0)
    report.add(
        "texts delivered more than once",
        sum(1 for c in copies.values() if c > 1),
        note=", ".join(f"{s}-{n}" for (s, n), c in sorted(copies.items()) if c > 1),
    )
    report.add("last arrival after the kill", round(max(first.values()) - killed, 2), "s")


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``a-1-3,7``."""
    parts, run = [], []
    for n in numbers:
        if run and n != run[-1] + 1:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(n)
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return "a-" + ",".join(parts) if parts else "none"


# -- main --------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notifier", help="the notifier console script (default: the first on PATH)")
    parser.add_argument(
        "--categories",
        type=int,
        nargs="?",
        const=30_000,
        metavar="N",
        help="scenario 1 with N random categories (default 30,000)",
    )
    parser.add_argument(
        "--categories-channel-rate",
        default="100/1s",
        help="NOTIFIER_CHANNEL_RATE of scenario 1, so the admitted events and the "
        "digests reach the stand-in within the wait (default 100/1s)",
    )
    parser.add_argument("--hung-store", action="store_true", help="scenario 2: SIGSTOP redis-server under load")
    parser.add_argument("--rate", type=float, default=600, help="requests/s of scenario 2 (default 600)")
    parser.add_argument(
        "--linger",
        type=float,
        default=5,
        help="seconds scenario 2 waits for delivery to drain before counting (default 5)",
    )
    parser.add_argument("--reclaim", action="store_true", help="scenario 3: kill a replica holding entries")
    parser.add_argument("--reclaim-events", type=int, default=20, help="events posted to replica a (default 20)")
    parser.add_argument("--reclaim-rate", type=float, default=2, help="events/s posted to b after the kill")
    parser.add_argument("--reclaim-seconds", type=float, default=15, help="how long to post to b (default 15)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each selected scenario (default 1)")
    parser.add_argument("--json", help="also write every figure to this JSON file")
    args = parser.parse_args()
    if args.categories is None and not args.hung_store and not args.reclaim:
        args.categories, args.hung_store, args.reclaim = 30_000, True, True
    return args


def raise_fd_limit() -> None:
    """Open loads hold thousands of sockets: lift the soft limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))


def main() -> None:
    args = parse_args()
    notifier = find_notifier(args.notifier)
    raise_fd_limit()
    log_dir = tempfile.mkdtemp(prefix="hostile-")
    report = Report()
    print(
        f"hostile: {notifier}; logs in {log_dir}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True
    )
    for run in range(1, args.repeat + 1):
        if args.categories:
            scenario_categories(
                report,
                notifier,
                args.categories,
                args.categories_channel_rate,
                f"categories: {args.categories:,} random categories, run {run}",
                log_dir,
            )
        if args.hung_store:
            scenario_hung_store(
                report,
                notifier,
                args.rate,
                args.linger,
                f"hung store: {args.rate:g} req/s, redis SIGSTOP 8 s, run {run}",
                log_dir,
            )
        if args.reclaim:
            scenario_reclaim(
                report,
                notifier,
                args.reclaim_events,
                args.reclaim_rate,
                args.reclaim_seconds,
                f"reclaim: replica a killed holding entries, run {run}",
                log_dir,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report.blocks, indent=2, default=str))
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
