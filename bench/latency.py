"""Answer times at half the sustained rate: p50, p99 and p99.9 of the plain and the alert storm.

    python bench/latency.py                 # 20 s at half the rate, per storm
    python bench/latency.py --seconds 10

For each storm of ``bench/storm.py`` (``plain``: 20 categories; ``alerts``: 5,000 dedup keys), on
a gateway whose levels are full (nearly every event refused, as in a storm): wrk first measures
the sustained rate (5 s, 64 connections), then sends at half of it for ``--seconds``: each of the
64 connections pauses between its requests (``latency.lua``, wrk's ``delay()``) so that together
they keep that pace, and wrk's own histogram gives the percentiles. wrk is an efficient client
on a core of its own (with Redis), so the answer times are the gateway's, not the client's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import storm  # noqa: E402
from helpers import Gateway, RedisServer  # noqa: E402

CONNECTIONS = 64


def paced(url: str, sustained: float, script: list[str], seconds: float) -> tuple[float, str]:
    """(the rate reached, wrk's percentiles line) at half of ``sustained``, a pause between requests."""
    pause_ms = max(1, round(CONNECTIONS * 1000 / (sustained / 2)))
    core = (os.cpu_count() or 1) - 1
    lua = ["-s", str(HERE / "latency.lua"), url, "--", str(pause_ms), *script]
    wrk = [*storm.pin(core), "wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", *lua]
    out = subprocess.run(wrk, capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, re.search(r"percentiles (.*)", out).group(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    storm.need_wrk()
    server = RedisServer(extra=[]).start()
    limits = {"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_GLOBAL_LIMIT": "100/30m", "NOTIFIER_CATEGORY_LIMIT": "10/30m"}
    gateway = Gateway(limits, wrapper=storm.pin(0)).start()
    try:
        storm.admit_alerts(gateway)
        storm.saturate(gateway)
        print(f"latency at half the sustained rate; load {os.getloadavg()[0]:.2f}", flush=True)
        for kind, script in (("plain", []), ("alerts", ["5000"])):
            sustained = storm.wrk(gateway.url + "/v1/events", 5, CONNECTIONS, script)[0]
            rate, shown = paced(gateway.url + "/v1/events", sustained, script, args.seconds)
            print(f"  {kind:7} sustained {sustained:7.0f} req/s; at {rate:7.0f} req/s: {shown}", flush=True)
    finally:
        gateway.stop()
        server.stop()


if __name__ == "__main__":
    main()
