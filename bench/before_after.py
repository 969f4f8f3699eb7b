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
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import abba  # noqa: E402
from helpers import Gateway  # noqa: E402
from storm import SCENARIOS, need_wrk, pin, pinned_redis, process_cpu, saturate  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the command of the build before (CMD serve is run)")
    parser.add_argument("--after", default="notifier", help="the command of the build after (default: notifier)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--scenario", default="plain", choices=CHOICES)
    args = parser.parse_args()
    need_wrk()
    server = pinned_redis()
    gateways: dict[str, Gateway] = {}
    try:
        for build, command in zip(BUILDS, (args.before, args.after), strict=True):
            gateways[build] = start(build, command, server.url, args.scenario)
        load = os.getloadavg()[0]
        print(f"storm ({args.scenario}): {args.rounds} rounds x {args.seconds} s, 64 connections; load {load:.2f}")
        cpu = lambda gateway: process_cpu(gateway.proc.pid)  # noqa: E731
        rates, cpu_us = abba.rounds(gateways, args.rounds, args.seconds, SCENARIOS[args.scenario], cpu)
    finally:
        for gateway in gateways.values():
            gateway.stop()
        server.stop()
    cpu_line = f"CPU per request: {cpu_us['before']:.1f} us before, {cpu_us['after']:.1f} us after"
    abba.report(rates, "after / before", cpu_line, (load, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
