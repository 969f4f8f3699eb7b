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
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import abba  # noqa: E402
from helpers import Gateway, wait_for  # noqa: E402
from storm import SCENARIOS, need_wrk, pinned_redis, process_cpu, saturate  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--scenario", default="plain", choices=[s for s in SCENARIOS if s != "webhook"])
    args = parser.parse_args()
    need_wrk()
    server = pinned_redis()
    gateways: dict[str, Gateway] = {}
    try:
        for count in COUNTS:
            gateways[f"--workers {count}"] = start(count, server.url)
        before = os.getloadavg()[0]
        print(f"storm ({args.scenario}): {args.rounds} rounds x {args.seconds} s, 64 connections; load {before:.2f}")
        rates, cpu_us = abba.rounds(gateways, args.rounds, args.seconds, SCENARIOS[args.scenario], cpu)
        after = os.getloadavg()[0]
    finally:
        for gateway in gateways.values():
            gateway.stop()
        server.stop()
    one, two = cpu_us.values()
    cpu_line = f"CPU per request: {one:.1f} us with 1 worker, {two:.1f} with 2 (all their processes)"
    abba.report(rates, "ratio", cpu_line, (before, after))


if __name__ == "__main__":
    main()
