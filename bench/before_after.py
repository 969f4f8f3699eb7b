"""Two builds of the gateway under the same storm, same run: a before/after of a change.

    python bench/before_after.py --before /old/venv/bin/notifier --after notifier
    python bench/before_after.py --before ./base-notifier --scenario alerts-links --rounds 9

``--before`` and ``--after`` are commands that start a build's CLI (``CMD serve`` is run; a
wrapper script that sets ``PYTHONPATH`` to a checkout will do). Starts its own redis-server and
one gateway of each build on it (each its own key prefix), both pinned to the first core as in
``storm.py``, with the ``alerts-links`` storm's settings (``storm_links.SETTINGS``: reserves,
escalation, mute choices) and the limits ``100/30m`` global and ``10/30m`` per category filled
first. Then loads them in turn with wrk (``storm.lua``, 64 connections, ABBA order, so a load
that drifts favours neither) and prints each round's rates, the ratio of the medians (after over
before), the spread of the per-round ratios and each build's CPU per request. On a noisy machine
the per-round ratios say more than any single rate.
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

from helpers import Gateway, RedisServer  # noqa: E402
from storm import SCENARIOS, pin, process_cpu, saturate, wrk  # noqa: E402
from storm_links import CATEGORIES as LINKED  # noqa: E402
from storm_links import SETTINGS  # noqa: E402

BUILDS = ("before", "after")
# Storms whose events meet levels filled first (the 50-key ones need their keys admitted: storm.py).
CHOICES = ("plain", "alerts-5000", "alerts-critical", "alerts-links")


def start(build: str, command: str, redis_url: str, scenario: str) -> Gateway:
    """A gateway of one build, its levels full (the storm's categories)."""
    env = {
        **SETTINGS,
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_GLOBAL_LIMIT": "100/30m",
        "NOTIFIER_CATEGORY_LIMIT": "10/30m",
        "NOTIFIER_KEY_PREFIX": build,
    }
    gateway = Gateway(env, wrapper=pin(0), command=[command, "serve"]).start()
    if scenario == "alerts-links":
        saturate(gateway, LINKED)
    else:
        saturate(gateway)
    return gateway


def rounds(gateways: dict[str, Gateway], args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Requests/s of each build round by round (ABBA), and the CPU each spent per request in us."""
    rates: dict[str, list[float]] = {build: [] for build in gateways}
    spent, served = dict.fromkeys(gateways, 0.0), dict.fromkeys(gateways, 0)
    for round_ in range(args.rounds):
        for build in BUILDS if round_ % 2 == 0 else BUILDS[::-1]:
            pid = gateways[build].proc.pid
            before = process_cpu(pid)
            rate, total, _ = wrk(gateways[build].url + "/v1/events", args.seconds, 64, SCENARIOS[args.scenario])
            spent[build] += process_cpu(pid) - before
            served[build] += total
            rates[build].append(rate)
            print(f"  {build:6}  {rate:9.0f} req/s", flush=True)
    return rates, {build: spent[build] / max(1, served[build]) * 1e6 for build in gateways}


def report(rates: dict[str, list[float]], cpu_us: dict[str, float], load: tuple[float, float]) -> None:
    before, after = statistics.median(rates["before"]), statistics.median(rates["after"])
    per_round = sorted(b / a for a, b in zip(rates["before"], rates["after"], strict=True))
    print()
    for build in BUILDS:
        median = statistics.median(rates[build])
        print(f"{build:6}  {median:9.0f} req/s (median; rounds {', '.join(f'{r:.0f}' for r in rates[build])})")
    print(
        f"after / before {after / before:.2f} (of the medians); per-round ratios {statistics.median(per_round):.2f} "
        f"median, {per_round[0]:.2f}-{per_round[-1]:.2f} spread"
    )
    print(f"CPU per request: {cpu_us['before']:.1f} us before, {cpu_us['after']:.1f} us after")
    print(f"load average {load[0]:.2f} before, {load[1]:.2f} after; {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the command of the build before (CMD serve is run)")
    parser.add_argument("--after", default="notifier", help="the command of the build after (default: notifier)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--scenario", default="plain", choices=CHOICES)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")
    server = RedisServer().start()
    if pin(last := (os.cpu_count() or 1) - 1):
        subprocess.run(["taskset", "-pc", str(last), str(server.proc.pid)], capture_output=True)
    gateways: dict[str, Gateway] = {}
    try:
        for build, command in zip(BUILDS, (args.before, args.after), strict=True):
            gateways[build] = start(build, command, server.url, args.scenario)
        load = os.getloadavg()[0]
        print(f"storm ({args.scenario}): {args.rounds} rounds x {args.seconds} s, 64 connections; load {load:.2f}")
        rates, cpu_us = rounds(gateways, args)
    finally:
        for gateway in gateways.values():
            gateway.stop()
        server.stop()
    report(rates, cpu_us, (load, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
