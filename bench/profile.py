"""Profile one ``notifier serve`` under the storm with py-spy (``pip install py-spy``).

    python bench/profile.py [seconds] [--reserves] [--scenario NAME]   # a scenario of storm.py

Prints the functions with the largest share of samples, inclusive and self. An alert scenario's
keys are learnt in a 3 s storm before sampling (as in storm.py's later rounds); ``alerts-links``
runs on its own gateway (``storm_links.py``: its settings and a Slack stand-in).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import tempfile
import time

import storm
import storm_links
from helpers import Gateway, RedisServer


def top(raw: str, n: int = 20) -> None:
    """Inclusive and self shares per function from py-spy's raw (collapsed) output."""
    inclusive, own, total = collections.Counter(), collections.Counter(), 0
    with open(raw) as lines:
        samples = [line.rstrip().rpartition(" ") for line in lines]
    for stack, _, count in samples:
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/", 1)[-1] + ")" if " (" in f else f
            for f in stack.split(";")
        ]
        total += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
        own[frames[-1]] += int(count)
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"-- {title} ({total} samples)")
        for frame, count in counter.most_common(n):
            print(f"{count / total:6.1%} {frame}")


def main() -> None:
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    seconds = int(numbers[0]) if numbers else 5
    reserves = storm.RESERVES if "--reserves" in sys.argv else {}  # the gateway with storm.py's reserves
    scenario = sys.argv[sys.argv.index("--scenario") + 1] if "--scenario" in sys.argv else "plain"
    server = RedisServer().start()
    limits = {"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_GLOBAL_LIMIT": "100/30m", "NOTIFIER_CATEGORY_LIMIT": "10/30m"}
    slack = None
    if scenario == "alerts-links":  # its own gateway: the settings, a Slack stand-in
        slack, gateway = storm_links.start(limits, [], None)
    else:
        gateway = Gateway({**limits, **reserves}).start()
    raw = tempfile.mktemp(suffix=".txt")
    try:
        storm.admit_alerts(gateway)
        storm.saturate(gateway, storm_links.CATEGORIES if slack else storm.CATEGORIES)
        if storm.SCENARIOS[scenario]:  # an alert storm: its keys learnt first, as in storm.py's later rounds
            storm.wrk(gateway.url + "/v1/events", 3, 64, storm.SCENARIOS[scenario])
        spy = subprocess.Popen(
            [
                "py-spy",
                "record",
                "-p",
                str(gateway.proc.pid),
                "-d",
                str(seconds + 1),
                "-f",
                "raw",
                "-o",
                raw,
                "--nonblocking",
                "--rate",
                "1000",
            ]
        )
        time.sleep(0.5)
        rate = storm.wrk(gateway.url + "/v1/events", seconds, 64, storm.SCENARIOS[scenario])[0]
        spy.wait()
    finally:
        gateway.stop()
        if slack:
            slack.stop()
        server.stop()
    print(f"storm ({scenario}) while profiling: {rate:.0f} req/s")
    top(raw)


if __name__ == "__main__":
    main()
