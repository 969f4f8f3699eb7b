"""Scenario 2 of ``bench/hostile.py``, ``--hung-store``: an open-loop load of ``--rate``
requests/s while redis-server is frozen with SIGSTOP for 8 s: outstanding requests, latency,
503s, memory, recovery, and how many events answered 503 were delivered or queued all the same.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import time
from collections import Counter

import redis
from helpers import Gateway
from hostile_common import (
    KIB_PER_MIB,
    Report,
    Request,
    RssSampler,
    Started,
    log_errors,
    max_outstanding,
    open_loop,
    percentile,
    redis_keys,
    stream_texts,
)

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
        report.add("gateway log lines with ERROR or Traceback", log_errors(gateway))
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
