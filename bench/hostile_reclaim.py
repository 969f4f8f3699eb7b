"""Scenario 3 of ``bench/hostile.py``, ``--reclaim``: two replicas, Slack answering in 0.5 s;
one replica is killed while it holds entries: how late its entries arrive and whether newer
events overtake them.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import statistics
import time
from collections import Counter

import aiohttp
import redis
from hostile_common import (
    Report,
    Started,
    log_errors,
    post_concurrently,
    redis_keys,
)
from hostile_slack import Received, SlackStandIn

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
        report.add("gateway b log lines with ERROR or Traceback", log_errors(gw_b))
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
