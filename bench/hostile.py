"""Hostile-load figures: what many categories, a hung store and a dead replica do to the gateway.

    python bench/hostile.py                          # all three scenarios, default sizes
    python bench/hostile.py --categories 30000       # one scenario (the flags combine)
    python bench/hostile.py --hung-store --rate 600 --repeat 2
    python bench/hostile.py --reclaim --notifier /path/to/venv/bin/notifier --json out.json

It measures and prints numbers, it asserts nothing: run it before and after a change and
compare. The gateway is a black box: the ``notifier serve`` console script (the first on
PATH, or ``--notifier``), its environment settings, HTTP, and the Redis keys it leaves
(found with SCAN). Each scenario starts its own redis-server on a free port, and where
Slack is needed a local incoming-webhook stand-in that enforces Block Kit's size limits.

* ``--categories [N]``: N events with N random categories against ``100/30m`` global,
  ``10/30m`` per category and 2 s digests: gateway memory, ``/metrics``, ``/v1/stats`` and
  Redis sizes, and whether the digests fit Slack and add up to the 429s.
* ``--hung-store``: an open-loop load of ``--rate`` requests/s while redis-server is
  frozen with SIGSTOP for 8 s: outstanding requests, latency, 503s, memory, recovery,
  and how many events answered 503 were delivered or queued all the same.
* ``--reclaim``: two replicas, Slack answering in 0.5 s; one replica is killed while it
  holds entries: how late its entries arrive and whether newer events overtake them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The test helpers live in tests/ today and in tests/support/ later: try that first.
sys.path[:0] = [str(HERE), str(REPO), str(REPO / "tests" / "support"), str(REPO / "tests")]

from hostile_categories import scenario_categories  # noqa: E402
from hostile_common import Report, find_notifier  # noqa: E402
from hostile_hung import scenario_hung_store  # noqa: E402
from hostile_reclaim import scenario_reclaim  # noqa: E402

# -- main --------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notifier", help="the notifier console script (default: the first on PATH)")
    parser.add_argument(
        "--categories",
        type=int,
        nargs="?",
        const=30_000,
        metavar="N",
        help="scenario 1 with N random categories (default 30,000)",
    )
    parser.add_argument(
        "--categories-channel-rate",
        default="100/1s",
        help="NOTIFIER_CHANNEL_RATE of scenario 1, so the admitted events and the "
        "digests reach the stand-in within the wait (default 100/1s)",
    )
    parser.add_argument("--hung-store", action="store_true", help="scenario 2: SIGSTOP redis-server under load")
    parser.add_argument("--rate", type=float, default=600, help="requests/s of scenario 2 (default 600)")
    parser.add_argument(
        "--linger",
        type=float,
        default=5,
        help="seconds scenario 2 waits for delivery to drain before counting (default 5)",
    )
    parser.add_argument("--reclaim", action="store_true", help="scenario 3: kill a replica holding entries")
    parser.add_argument("--reclaim-events", type=int, default=20, help="events posted to replica a (default 20)")
    parser.add_argument("--reclaim-rate", type=float, default=2, help="events/s posted to b after the kill")
    parser.add_argument("--reclaim-seconds", type=float, default=15, help="how long to post to b (default 15)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each selected scenario (default 1)")
    parser.add_argument("--json", help="also write every figure to this JSON file")
    args = parser.parse_args()
    if args.categories is None and not args.hung_store and not args.reclaim:
        args.categories, args.hung_store, args.reclaim = 30_000, True, True
    return args


def raise_fd_limit() -> None:
    """Open loads hold thousands of sockets: lift the soft limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))


def main() -> None:
    args = parse_args()
    notifier = find_notifier(args.notifier)
    raise_fd_limit()
    log_dir = tempfile.mkdtemp(prefix="hostile-")
    report = Report()
    print(
        f"hostile: {notifier}; logs in {log_dir}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True
    )
    for run in range(1, args.repeat + 1):
        if args.categories:
            scenario_categories(
                report,
                notifier,
                args.categories,
                args.categories_channel_rate,
                f"categories: {args.categories:,} random categories, run {run}",
                log_dir,
            )
        if args.hung_store:
            scenario_hung_store(
                report,
                notifier,
                args.rate,
                args.linger,
                f"hung store: {args.rate:g} req/s, redis SIGSTOP 8 s, run {run}",
                log_dir,
            )
        if args.reclaim:
            scenario_reclaim(
                report,
                notifier,
                args.reclaim_events,
                args.reclaim_rate,
                args.reclaim_seconds,
                f"reclaim: replica a killed holding entries, run {run}",
                log_dir,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report.blocks, indent=2, default=str))
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
