"""The storm against ``notifier serve --workers 2`` and ``--workers 1``, same load, same run.

    python bench/workers.py              # 5 alternating rounds of 5 s each
    python bench/workers.py --rounds 3 --seconds 2
    python bench/workers.py --scenario alerts-5000

Starts its own redis-server and two gateways on it (each with its own key prefix): one with
``--workers 1``, one with ``--workers 2``, the limits ``100/30m`` global and ``10/30m`` per
category filled first (as ``storm.py``: nearly every event is refused). Then loads them in turn
with wrk (``storm.lua``, 64 connections, ABBA order) and prints each round's rates, the ratio of
the medians, and the spread of the per-round ratios. Neither gateway is pinned: the second
worker needs the second core, which wrk and redis-server share (pinned to the last core, as in
``storm.py``): on a 2-core machine the ratio is what a host with both running gets, wrk included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

from helpers import Gateway, RedisServer, wait_for  # noqa: E402
from storm import SCENARIOS, pin, process_cpu, saturate, wrk  # noqa: E402

COUNTS = (1, 2)  # the workers of the two gateways


def start(count: int, redis_url: str) -> Gateway:
    """A gateway with ``count`` workers, its levels full."""
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_GLOBAL_LIMIT": "100/30m",
        "NOTIFIER_CATEGORY_LIMIT": "10/30m",
        "NOTIFIER_KEY_PREFIX": f"workers{count}",
    }
    command = [sys.executable, "-m", "notifier", "serve", "--workers", str(count)]
    gateway = Gateway(env, command=command).start()
    if count > 1:  # every worker serving before the storm, or the first takes every connection
        wait_for(lambda: gateway.output().count("Running on") >= count, 60, what=f"{count} workers serving")
    saturate(gateway)
    return gateway


def cpu(gateway: Gateway) -> float:
    """CPU seconds used so far by the gateway's process and its workers."""
    pid = gateway.proc.pid
    workers = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return process_cpu(pid) + sum(process_cpu(int(worker)) for worker in workers)


def rounds(gateways: dict[int, Gateway], args: argparse.Namespace) -> tuple[dict[int, list[float]], dict[int, float]]:
    """Requests/s of each gateway, round by round, in ABBA order (a drifting load favours neither),
    and the CPU each spent per request (all its processes), in microseconds."""
    rates: dict[int, list[float]] = {count: [] for count in gateways}
    spent, served = dict.fromkeys(gateways, 0.0), dict.fromkeys(gateways, 0)
    for round_ in range(args.rounds):
        order = list(gateways) if round_ % 2 == 0 else list(gateways)[::-1]
        for count in order:
            before = cpu(gateways[count])
            rate, total, refused = wrk(gateways[count].url + "/v1/events", args.seconds, 64, SCENARIOS[args.scenario])
            spent[count] += cpu(gateways[count]) - before
            served[count] += total
            rates[count].append(rate)
            print(f"  --workers {count}  {rate:9.0f} req/s  ({refused} of {total} not 2xx)", flush=True)
    return rates, {count: spent[count] / max(1, served[count]) * 1e6 for count in gateways}


def report(rates: dict[int, list[float]], cpu_us: dict[int, float], load: tuple[float, float]) -> None:
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    per_round = sorted(b / a for a, b in zip(rates[1], rates[2], strict=True))
    print()
    print(f"--workers 1  {one:9.0f} req/s (median; rounds {', '.join(f'{r:.0f}' for r in rates[1])})")
    print(f"--workers 2  {two:9.0f} req/s (median; rounds {', '.join(f'{r:.0f}' for r in rates[2])})")
    print(
        f"ratio {two / one:.2f} (of the medians); per-round ratios {statistics.median(per_round):.2f} median, "
        f"{per_round[0]:.2f}-{per_round[-1]:.2f} spread"
    )
    print(f"CPU per request: {cpu_us[1]:.1f} us with 1 worker, {cpu_us[2]:.1f} us with 2 (all their processes)")
    print(f"load average {load[0]:.2f} before, {load[1]:.2f} after; {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--scenario", default="plain", choices=[s for s in SCENARIOS if s != "webhook"])
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")
    server = RedisServer().start()
    if pin(last := (os.cpu_count() or 1) - 1):
        subprocess.run(["taskset", "-pc", str(last), str(server.proc.pid)], capture_output=True)
    gateways: dict[int, Gateway] = {}
    try:
        for count in COUNTS:
            gateways[count] = start(count, server.url)
        before = os.getloadavg()[0]
        print(f"storm ({args.scenario}): {args.rounds} rounds x {args.seconds} s, 64 connections; load {before:.2f}")
        rates, cpu_us = rounds(gateways, args)
        after = os.getloadavg()[0]
    finally:
        for gateway in gateways.values():
            gateway.stop()
        server.stop()
    report(rates, cpu_us, (before, after))


if __name__ == "__main__":
    main()
