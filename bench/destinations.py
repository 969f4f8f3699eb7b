"""Destinations cost nothing at admission, and what one shard takes by depth of tree.

    python bench/destinations.py            # 5 alternating rounds of 5 s each
    python bench/destinations.py --quick    # 3 rounds of 2 s

1. The plain storm of ``bench/storm.py`` (20 categories, levels full, nearly every event
   refused) against the bare aiohttp app and three gateways with the same tree (global
   100/30m, a ``destination`` level 60/30m, category 10/30m): ``slack-routed`` (one Slack
   workspace, a stand-in), ``two-destinations`` (that workspace and a Discord webhook, half the
   categories routed to each: channel values become ``DESTINATION:CHANNEL``) and
   ``discord-routed`` (a Discord webhook alone). Ratios are medians of each gateway's rounds over
   the baseline's, measured in the same run, alternating (ABBA).
2. The store's CPU per admission (``admit.lua``'s usec per call in ``INFO commandstats``) for
   trees of 2, 4 and 8 levels, every event admitted (so every level is written): a tree is one
   hash slot, so ``1e6 / usec`` is about what one shard can admit each second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
import storm  # noqa: E402
import yaml  # noqa: E402
from discord_standin import DiscordStandin  # noqa: E402
from helpers import Gateway, RedisServer  # noqa: E402
from slack_standin import TOKEN, SlackStandin  # noqa: E402

LEVELS = [
    {"name": "global", "rules": "100/30m"},
    {"name": "destination", "key": "destination", "rules": "60/30m"},
    {"name": "category", "key": "category", "rules": "10/30m"},
]


def config_file(folder: Path, name: str, destinations: dict, routes: list) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"destinations": destinations, "levels": LEVELS, "routes": routes}))
    return str(path)


def gateways(server: RedisServer, slack: SlackStandin, discord: DiscordStandin, folder: Path) -> dict[str, Gateway]:
    """The three gateways of part 1, started, their levels full."""
    acme = {"kind": "slack", "bot_token": "${ACME_BOT}", "channel": "#storm", "api_url": slack.api_url}
    gaming = {"kind": "discord", "url": "${GAMING_HOOK}"}
    half = [{"match": {"category": "storm-(1?[02468])"}, "destination": "gaming"}]
    files = {
        "slack-routed": config_file(folder, "slack", {"acme": acme}, []),
        "two-destinations": config_file(folder, "two", {"acme": acme, "gaming": gaming}, half),
        "discord-routed": config_file(folder, "discord", {"gaming": gaming}, []),
    }
    env = {"NOTIFIER_REDIS_URL": server.url, "ACME_BOT": TOKEN, "GAMING_HOOK": discord.webhook_url}
    started = {}
    for name, path in files.items():
        own = {**env, "NOTIFIER_CONFIG": path, "NOTIFIER_KEY_PREFIX": name}
        started[name] = Gateway(own, wrapper=storm.pin(0)).start()
        storm.saturate(started[name])
    return started


def rounds(servers: dict[str, str], args: argparse.Namespace) -> dict[str, list[float]]:
    """Requests/s of each server's rounds of the plain storm, in ABBA order."""
    rates: dict[str, list[float]] = {name: [] for name in servers}
    names = list(servers)
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            rate, total, non2xx = storm.wrk(servers[name] + "/v1/events", args.seconds, args.connections, [])
            rates[name].append(rate)
            print(f"  {name:18} {rate:9.0f} req/s  ({non2xx} of {total} not 2xx)", flush=True)
    return rates


async def usec_per_admission(url: str, depth: int, n: int) -> float:
    """admit.lua's usec per call with every event admitted through ``depth`` levels."""
    from builders import build_limiter

    from notifier.admission.batch import Pending
    from notifier.config import parse_config
    from notifier.models import Event
    from notifier.settings import load_settings

    levels = [{"name": "root", "rules": "1000000/1h"}] + [
        {"name": f"l{i}", "key": f"field:k{i}", "rules": "1000000/1h"} for i in range(1, depth)
    ]
    settings = load_settings(redis_url=url, key_prefix=f"depth{depth}", digest_interval=0)
    limiter, store = build_limiter(settings, config=parse_config({"levels": levels}))
    sync = redis.Redis.from_url(url)

    def pending(i: int) -> Pending:
        fields = {f"k{k}": f"v{(i + k) % 7}" for k in range(1, depth)}
        event = Event(category=storm.CATEGORIES[i % 20], text="bench", fields=fields)
        return Pending(event, f"d{depth}-{i}", time.monotonic() + 5, limiter.policy.route(event, "anonymous"))

    for i in range(50):  # warm up
        await limiter._ask([pending(i)], {}, {}, limiter._protocol, time.monotonic())
    before = storm.evalsha_stats(sync)
    for i in range(n):
        await limiter._ask([pending(i)], {}, {}, limiter._protocol, time.monotonic())
    after = storm.evalsha_stats(sync)
    await store.redis.aclose()
    sync.close()
    return (after[1] - before[1]) / max(1, after[0] - before[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 3, 2
    storm.need_wrk()
    server = RedisServer(extra=[]).start()
    slack, discord = SlackStandin().start(), DiscordStandin().start()
    baseline, baseline_url = storm.start_baseline()
    started: dict[str, Gateway] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            started = gateways(server, slack, discord, Path(folder))
            print(f"destinations: {args.rounds} rounds x {args.seconds} s; load {os.getloadavg()[0]:.2f}", flush=True)
            rates = rounds({"baseline": baseline_url, **{n: g.url for n, g in started.items()}}, args)
        depths = {d: asyncio.run(usec_per_admission(server.url, d, 3000)) for d in (2, 4, 8)}
    finally:
        for gateway in started.values():
            gateway.stop()
        baseline.terminate()
        slack.stop()
        discord.stop()
        server.stop()
    report(rates, depths)


def report(rates: dict[str, list[float]], depths: dict[int, float]) -> None:
    base = statistics.median(rates["baseline"])
    print(f"\nbaseline {base:9.0f} req/s (median)")
    for name, each in rates.items():
        if name != "baseline":
            spread = f"{min(each) / base:.2f}-{max(each) / base:.2f}"
            print(f"{name:18} {statistics.median(each) / base:.2f} of the baseline (rounds {spread})")
    print("\nstore CPU per admission, every level written (admit.lua, INFO commandstats):")
    for depth, usec in depths.items():
        print(f"  {depth} levels: {usec:6.1f} us  -> about {1e6 / usec:,.0f} admissions/s on one shard")


if __name__ == "__main__":
    main()
