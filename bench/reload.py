"""A storm with a reload every 5 seconds: no request lost, and the speed of the bare app kept.

    python bench/reload.py            # 5 alternating rounds of 6 s each
    python bench/reload.py --quick    # 3 rounds of 6 s

The plain storm of ``bench/storm.py`` (20 categories, levels full, nearly every event refused)
against the bare aiohttp app and a gateway running the four-level tree of ``bench/tree.yaml``
from a file, in rounds with reloads and rounds without (``steady``: the same gateway, the cost
of the reloads apart from the machine's). During a reloading round a thread changes the file (a category's rules,
10/30m <-> 11/30m) and asks ``POST /v1/reload`` every 5 seconds. Lost requests: those wrk sent
that the gateway did not decide (``/v1/stats``: accepted + dropped, before and after each
round), and wrk's socket errors. The ratio is the median of the gateway's rounds over the
baseline's, measured in the same run, alternating.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import storm  # noqa: E402
import yaml  # noqa: E402
from helpers import Gateway, RedisServer, http  # noqa: E402

EVERY = 5.0  # seconds between two reloads
ROUND = 6  # seconds of a round: at least one reload in each
SETTLE = 1.5  # seconds for a replica's local refusals to reach /v1/stats


class Reloads(threading.Thread):
    """Changes the file and asks the gateway to read it, every ``EVERY`` seconds, until stopped."""

    def __init__(self, gateway: Gateway, path: Path, tree: dict) -> None:
        super().__init__(daemon=True)
        self.gateway, self.path, self.tree = gateway, path, tree
        self.done, self.failed, self.stopped = 0, 0, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(EVERY):
            self.tree["levels"][-1]["rules"] = "11/30m" if self.done % 2 == 0 else "10/30m"
            self.path.write_text(yaml.safe_dump(self.tree))
            status = http("POST", self.gateway.url + "/v1/reload", {}, timeout=30)[0]
            self.done, self.failed = self.done + (status == 200), self.failed + (status != 200)


def decided(gateway: Gateway) -> int:
    stats = http("GET", gateway.url + "/v1/stats")[1]
    return int(stats["accepted"]) + int(stats["dropped"])


def gateway_round(
    gateway: Gateway, path: Path, tree: dict, connections: int, reloading: bool
) -> tuple[float, int, int, int]:
    """(requests/s, requests, lost, reloads) of one round of the storm, with reloads running if ``reloading``.

    Lost: requests wrk had answered that the gateway did not decide, and wrk's socket errors. (The
    gateway decides up to ``connections`` more than wrk counts: those in flight when wrk stops.)
    """
    reloads = Reloads(gateway, path, tree)
    before = decided(gateway)
    if reloading:
        reloads.start()
    out = storm.wrk_output(gateway.url + "/v1/events", ROUND, connections, [])
    reloads.stopped.set()
    if reloading:
        reloads.join()
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    time.sleep(SETTLE)  # refusals decided here reach the store's counters a moment later
    lost = max(0, total - (decided(gateway) - before)) + errors
    assert reloads.failed == 0, f"{reloads.failed} reloads failed"
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), total, lost, reloads.done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    args.rounds = 3 if args.quick else args.rounds
    storm.need_wrk()
    server = RedisServer(extra=[]).start()
    baseline, baseline_url = storm.start_baseline()
    folder = Path(tempfile.mkdtemp(prefix="notifier-reload-"))
    tree = yaml.safe_load(storm.TREE.read_text())
    path = folder / "notifier.yaml"
    path.write_text(yaml.safe_dump(tree))
    gateway = Gateway({"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_CONFIG": str(path)}, wrapper=storm.pin(0)).start()
    rates: dict[str, list[float]] = {"baseline": [], "reloading": [], "steady": []}
    lost = reloads = 0
    try:
        storm.saturate(gateway)
        for round_ in range(args.rounds):
            for name in list(rates) if round_ % 2 == 0 else list(rates)[::-1]:
                if name == "baseline":
                    rates[name].append(storm.wrk(baseline_url + "/v1/events", ROUND, args.connections, [])[0])
                    continue
                rate, total, missing, done = gateway_round(gateway, path, tree, args.connections, name == "reloading")
                rates[name].append(rate)
                lost, reloads = lost + missing, reloads + done
                print(f"  {name:9} {rate:9.0f} req/s  {total} requests, {missing} lost, {done} reloads", flush=True)
    finally:
        gateway.stop()
        baseline.terminate()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    base = statistics.median(rates["baseline"])
    print(f"\nbaseline {base:9.0f} req/s (median)")
    for name in ("reloading", "steady"):
        own, spread = statistics.median(rates[name]), f"{min(rates[name]) / base:.2f}-{max(rates[name]) / base:.2f}"
        print(f"gateway, {name:9} {own:9.0f} req/s: {own / base:.2f} of the baseline (rounds {spread})")
    print(f"{reloads} reloads during the storm, {lost} requests lost")


if __name__ == "__main__":
    main()
