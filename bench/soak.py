"""A soak: a steady mix for N minutes against two gateway processes, memory read as it goes.

It starts its own redis-server, a Slack stand-in (default limits) as the bot's API and two
``notifier serve`` processes on one store, then sends at a fixed rate, alternating between the
two gateways: plain events, alerts (dedup keys from a bounded pool, about a third resolved) and
messages through the incoming-webhook door. The limits are realistic (600/1m overall, 60/1m per
category, digests every 60 s), so the windows fill and most of the traffic is refused, as in a
storm that lasts. At start, every 5 minutes and at the end it prints each gateway's RSS, Redis's
``used_memory`` and ``DBSIZE``, and the counts of ``/v1/stats``. From the first reading after
``--warmup`` minutes (the windows full), every 5 minutes and at the end it also prints Redis's memory
by key pattern (every key SCANned, ``MEMORY USAGE`` each, the variable parts of its name replaced by
``*``), and at the end the patterns that grew most since that first full-window reading. No
tracemalloc: the gateways' memory is their RSS (``VmRSS``). All traffic goes to 127.0.0.1.

    .venv-test/bin/python bench/soak.py --minutes 40 --rate 100 --warmup 10
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from helpers import Gateway, RedisServer, slack_env
from slack_standin import SlackStandin

CATEGORIES = ["deploy", "db", "auth", "billing", "web", "batch", "queue", "cache"]
ALERTS = 200  # the pool of dedup keys
SEVERITIES = ["info", "warning", "error", "critical"]
LIMITS = {
    "NOTIFIER_GLOBAL_LIMIT": "600/1m",
    "NOTIFIER_CATEGORY_LIMIT": "60/1m",
    "NOTIFIER_DIGEST_INTERVAL": "60s",
    # Delivery keeps up with what the global limit admits (10/s, all to one channel): at Slack's
    # 1/s the outbox would grow by 9 entries a second and hide any other growth.
    "NOTIFIER_CHANNEL_RATE": "20/1s",
}


PATTERN_TOP = 15  # patterns printed per reading, by bytes
# Parts of a key name that vary: numbers, ids and digests, the soak's categories and channel.
_VARIABLE = re.compile(
    r"^(?:-?\d+(?:[.-]\d+)*|~?[0-9a-f]{8,}|[A-Z][A-Z0-9]{5,}|alert-\d+|#.*|" + "|".join(CATEGORIES) + r")$"
)
HEADER = (
    "| minute | RSS gw1 MiB | RSS gw2 MiB | used_memory MiB | of it, dataset / overhead MiB | clients | DBSIZE"
    " | accepted | dropped | delivered | folded |"
)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def request(number: int, rng: random.Random) -> tuple[str, dict[str, object]]:
    """The path and body of the ``number``-th request: 50% plain, 30% alerts, 20% the webhook door."""
    kind = number % 10
    category = rng.choice(CATEGORIES)
    if kind < 5:
        return "/v1/events", {"category": category, "text": f"event {number} in {category}"}
    if kind < 8:
        key = f"alert-{rng.randrange(ALERTS)}"
        status = "resolved" if rng.random() < 0.33 else "firing"
        body = {"category": category, "text": f"{key} {status}", "dedup_key": key, "status": status}
        return "/v1/events", {**body, "severity": rng.choice(SEVERITIES)}
    return "/services/T0/B0/soak", {"text": f"webhook message {number}"}


async def send(session: aiohttp.ClientSession, urls: list[str], rate: float, seconds: float, tally: dict) -> None:
    """Send at ``rate`` requests per second for ``seconds``, on a fixed schedule (no catching up in bursts)."""
    rng = random.Random(7)
    start = time.monotonic()
    pending: set[asyncio.Task[None]] = set()
    for number in itertools.count():
        due = start + number / rate
        if due - start >= seconds:
            break
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if len(pending) > 200:  # the gateways are behind: skip rather than pile up
            tally["skipped"] += 1
            continue
        path, body = request(number, rng)
        task = asyncio.create_task(one(session, urls[number % len(urls)] + path, body, tally))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)


async def one(session: aiohttp.ClientSession, url: str, body: dict[str, object], tally: dict) -> None:
    try:
        async with session.post(url, json=body) as response:
            await response.read()
            tally[response.status] = tally.get(response.status, 0) + 1
    except (aiohttp.ClientError, asyncio.TimeoutError):
        tally["errors"] += 1


def pattern_of(key: str) -> str:
    """A key's name with its variable parts (between ``:`` and ``|``) replaced by ``*``."""
    parts = re.split(r"([:|])", key)
    return "".join("*" if _VARIABLE.match(part) else part for part in parts)


def memory_by_pattern(store: redis.Redis) -> dict[str, tuple[int, int]]:
    """Every key's ``MEMORY USAGE`` (``SAMPLES 0``: every element counted), summed by pattern: bytes, keys."""
    keys = [key.decode(errors="replace") for key in store.scan_iter(count=1000)]
    pipe = store.pipeline(transaction=False)
    for key in keys:
        pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    totals: dict[str, tuple[int, int]] = {}
    for key, used in zip(keys, pipe.execute(), strict=True):
        if used is None:  # expired between SCAN and MEMORY USAGE
            continue
        pattern = pattern_of(key)
        size, count = totals.get(pattern, (0, 0))
        totals[pattern] = (size + used, count + 1)
    return totals


def print_patterns(minute: float, totals: dict[str, tuple[int, int]]) -> None:
    size = sum(bytes_ for bytes_, _ in totals.values())
    count = sum(keys for _, keys in totals.values())
    print(f"\nkey patterns at minute {minute:.1f}: {count} keys, {size / 1024:.1f} KiB in all")
    print("| pattern | keys | KiB |\n|---|---|---|")
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])
    for pattern, (bytes_, keys) in ranked[:PATTERN_TOP]:
        print(f"| `{pattern}` | {keys} | {bytes_ / 1024:.1f} |")
    rest = ranked[PATTERN_TOP:]
    if rest:
        rest_bytes, rest_keys = sum(b for _, (b, _) in rest), sum(k for _, (_, k) in rest)
        print(f"| ({len(rest)} other patterns) | {rest_keys} | {rest_bytes / 1024:.1f} |")
    print(flush=True)


def print_growth(first: tuple[float, dict], last: tuple[float, dict]) -> None:
    """The patterns whose bytes changed most between the first full-window reading and the last."""
    (m0, before), (m1, after) = first, last
    print(f"\ngrowth by pattern, minute {m0:.1f} -> {m1:.1f} (largest changes first)")
    print("| pattern | keys before | keys after | KiB before | KiB after | change KiB |\n|---|---|---|---|---|---|")
    changes = []
    for pattern in set(before) | set(after):
        (b0, k0), (b1, k1) = before.get(pattern, (0, 0)), after.get(pattern, (0, 0))
        changes.append((b1 - b0, pattern, k0, k1, b0, b1))
    changes.sort(key=lambda change: -abs(change[0]))
    for delta, pattern, k0, k1, b0, b1 in changes[:PATTERN_TOP]:
        print(f"| `{pattern}` | {k0} | {k1} | {b0 / 1024:.1f} | {b1 / 1024:.1f} | {delta / 1024:+.1f} |")
    total0, total1 = sum(b for b, _ in before.values()), sum(b for b, _ in after.values())
    print(
        f"| all | {sum(k for _, k in before.values())} | {sum(k for _, k in after.values())} | "
        f"{total0 / 1024:.1f} | {total1 / 1024:.1f} | {(total1 - total0) / 1024:+.1f} |",
        flush=True,
    )


async def reading(session: aiohttp.ClientSession, gateways: list[Gateway], store: redis.Redis, start: float) -> str:
    async with session.get(gateways[0].url + "/v1/stats") as response:
        stats = await response.json()
    rss = " | ".join(f"{rss_kib(g.proc.pid) / 1024:.1f}" for g in gateways)  # type: ignore[union-attr]
    memory, mib = store.info("memory"), 1024 * 1024
    # The dataset is the keys; the overhead is Redis's own (clients' buffers, the replication
    # backlog, the scripts' cache): a rise there is not a key without a bound.
    split = f"{memory['used_memory_dataset'] / mib:.2f} / {memory['used_memory_overhead'] / mib:.2f}"
    clients = store.info("clients")["connected_clients"]
    minute = (time.monotonic() - start) / 60
    counts = f"{stats['accepted']} | {stats['dropped']} | {stats['delivered']} | {stats.get('folded', '-')}"
    used = memory["used_memory"] / mib
    return f"| {minute:5.1f} | {rss} | {used:.2f} | {split} | {clients} | {store.dbsize()} | {counts} |"


class Readings:
    """The rows of the table and the per-pattern readings from the first full-window one on."""

    def __init__(self, gateways: list[Gateway], store: redis.Redis, start: float, warmup: float) -> None:
        self.gateways, self.store, self.start, self.warmup = gateways, store, start, warmup
        self.rows: list[str] = []
        self.patterns: list[tuple[float, dict]] = []

    async def take(self, session: aiohttp.ClientSession) -> None:
        row = await reading(session, self.gateways, self.store, self.start)
        self.rows.append(row)
        print(row, flush=True)
        minute = (time.monotonic() - self.start) / 60
        if minute >= self.warmup - 0.5:  # a reading due at the warm-up's end may come a little early
            totals = memory_by_pattern(self.store)
            self.patterns.append((minute, totals))
            print_patterns(minute, totals)

    def summary(self) -> None:
        print("\n" + HEADER)
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(self.rows))
        if len(self.patterns) >= 2:
            print_growth(self.patterns[0], self.patterns[-1])


async def soak(gateways: list[Gateway], store: redis.Redis, minutes: float, rate: float, warmup: float) -> dict:
    tally: dict = {"errors": 0, "skipped": 0}
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        start = time.monotonic()
        readings = Readings(gateways, store, start, warmup)
        print(HEADER)
        print("|---|---|---|---|---|---|---|---|---|")
        await readings.take(session)
        sender = asyncio.create_task(send(session, [g.url for g in gateways], rate, minutes * 60, tally))
        end = start + minutes * 60
        while not sender.done():
            next_at = start + 300 * (1 + int((time.monotonic() - start) // 300))
            # A reading due with the end is the end's, taken once the last answers are in.
            wait = None if next_at >= end - 1 else max(0.0, next_at - time.monotonic())
            await asyncio.wait({sender}, timeout=wait)
            if not sender.done():
                await readings.take(session)
        await sender
        await asyncio.sleep(2)  # the last answers' deliveries
        await readings.take(session)
        readings.summary()
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second, both gateways together")
    parser.add_argument(
        "--warmup", type=float, default=5.0, help="minutes before the windows are full: key patterns from then on"
    )
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="notifier-soak-")
    # The gateways are the `notifier` command installed beside this Python.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    server, slack = RedisServer(), SlackStandin()
    gateways: list[Gateway] = []
    try:
        server.start()
        slack.start()
        env = {**slack_env(server.url, slack), **LIMITS}
        for name in ("a", "b"):
            gateways.append(Gateway({**env, "NOTIFIER_REPLICA_ID": name}, log_dir=folder).start())
        print(f"soak: {args.minutes} min at {args.rate}/s on {[g.url for g in gateways]}, logs in {folder}")
        store = redis.Redis.from_url(server.url)
        tally = asyncio.run(soak(gateways, store, args.minutes, args.rate, args.warmup))
        print("answers:", dict(sorted(tally.items(), key=str)))
        print(f"stand-in: {len(slack.messages)} posted, {len(slack.updates)} edited, {len(slack.throttled)} throttled")
        store.close()
    finally:
        for gateway in gateways:
            gateway.stop()
        slack.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
