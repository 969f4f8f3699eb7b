"""The cost of ``NOTIFIER_REDIS_MIN_REPLICAS=1`` against 0, in the same run, on the same Redis.

    python bench/replication.py            # 5 rounds of 5 s, ABBA order
    python bench/replication.py --quick    # 3 rounds of 2 s

Starts a Redis primary with one replica, two gateways on them (N = 0 and N = 1, each
with its own key prefix) and the bare aiohttp baseline of ``storm.py``. Each round
loads them in turn with wrk (``apt-get install -y wrk``):

* admitted: ``storm.lua -- admitted``, every event admitted (logged, queued, and with N = 1
  waited for): requests/s and the latency of a 202 (wrk's p50, p99);
* storm: ``storm.lua`` with the 20 storm categories full (``10/30m`` each), so nearly
  every event is refused by the replica itself and never waits: requests/s, and its
  ratio to the baseline's.

Gateways and baseline are pinned to core 0, wrk and Redis to the last core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
from helpers import Gateway, wait_for  # noqa: E402
from storm import CATEGORIES, need_wrk, pin, saturate, start_baseline, wrk_output  # noqa: E402  (puts tests/support on the path)
from topology import Replicated  # noqa: E402


def wrk(url: str, seconds: int, connections: int, script_args: list[str]) -> dict[str, float]:
    """One wrk run of ``storm.lua`` with ``script_args``: requests/s, non-2xx answers, latency p50/p99 in ms."""
    out = wrk_output(url, seconds, connections, script_args, "--latency")
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rate": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
        "p50": _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1)),
        "p99": _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1)),
    }


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(\w+)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def gateways(url: str) -> dict[str, Gateway]:
    storm_limits = json.dumps({c: "10/30m" for c in CATEGORIES})
    env = {
        "NOTIFIER_REDIS_URL": url,
        "NOTIFIER_GLOBAL_LIMIT": "1000000000/1s",  # storm.lua -- admitted: never full; storm: the categories are
        "NOTIFIER_CATEGORY_LIMIT": "1000000000/1s",
        "NOTIFIER_CATEGORY_LIMITS": storm_limits,
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }
    return {
        f"N={n}": Gateway(
            {**env, "NOTIFIER_REDIS_MIN_REPLICAS": str(n), "NOTIFIER_KEY_PREFIX": f"n{n}"}, wrapper=pin(0)
        )
        for n in (0, 1)
    }


def drained(client: redis.Redis) -> None:
    """Wait until both gateways delivered what they admitted: a backlog would slow the next run."""
    outboxes = [f"n{n}:{{n{n}}}:outbox" for n in (0, 1)]
    wait_for(lambda: sum(client.xlen(key) for key in outboxes) == 0, 120, 0.2, what="outboxes drained")


def rounds(
    servers: dict[str, str], baseline: str, client: redis.Redis, args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    seen: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        order = list(servers) if r % 2 == 0 else list(reversed(servers))
        for kind, script_args in (("admitted", ["admitted"]), ("storm", [])):
            for name in order:
                drained(client)
                run = wrk(servers[name], args.seconds, args.connections, script_args)
                seen.setdefault(f"{kind} {name}", []).append(run)
        seen.setdefault("storm baseline", []).append(wrk(baseline, args.seconds, args.connections, []))
    return seen


def report(seen: dict[str, list[dict[str, float]]]) -> None:
    base = statistics.median(run["rate"] for run in seen["storm baseline"])
    for name, runs in seen.items():
        rate = statistics.median(run["rate"] for run in runs)
        p50 = statistics.median(run["p50"] for run in runs)
        p99 = statistics.median(run["p99"] for run in runs)
        non2xx = sum(run["non2xx"] for run in runs)
        ratio = f", ratio to baseline {rate / base:.2f}" if name.startswith("storm N") else ""
        print(f"{name:18} {rate:8,.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:7.2f} ms  ({non2xx} not 2xx){ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 3, 2
    need_wrk()
    nodes = Replicated(replicas=1).start()
    last = (os.cpu_count() or 1) - 1
    for node in nodes.nodes if pin(last) else ():
        subprocess.run(["taskset", "-pc", str(last), str(node.proc.pid)], capture_output=True)
    started = {name: gateway.start() for name, gateway in gateways(nodes.primary.url).items()}
    baseline, baseline_url = start_baseline()
    try:
        for gateway in started.values():
            saturate(gateway)
        print(
            f"replication: {args.rounds} rounds x {args.seconds} s, {args.connections} connections, "
            f"one replica; load: {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        client = redis.Redis.from_url(nodes.primary.url)
        report(rounds({name: g.url for name, g in started.items()}, baseline_url, client, args))
    finally:
        baseline.terminate()
        for gateway in started.values():
            gateway.stop()
        nodes.stop()


if __name__ == "__main__":
    main()
