"""Scenario 1 of ``bench/hostile.py``, ``--categories [N]``: N events with N random categories
against ``100/30m`` global, ``10/30m`` per category and 2 s digests: gateway memory,
``/metrics``, ``/v1/stats`` and Redis sizes, and whether the digests fit Slack and add up to
the 429s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections import Counter

import redis
from hostile_common import (
    KIB_PER_MIB,
    Report,
    Started,
    fetch,
    log_errors,
    post_concurrently,
    redis_keys,
    redis_sizes,
    rss_kib,
)
from hostile_slack import Received, wait_until_quiet

SUPPRESSED = re.compile(r"Suppressed (\d+)")


# -- scenario 1: many categories ---------------------------------------------------------


def scenario_categories(report: Report, notifier: str, count: int, channel_rate: str, title: str, log_dir: str) -> None:
    """``count`` events, each of a new random category; memory, views, Redis and digests."""
    interval = 2.0
    with Started(notifier, log_dir) as started:
        server = started.redis()
        standin = started.standin()
        gateway = started.gateway(
            {
                "NOTIFIER_REDIS_URL": server.url,
                "NOTIFIER_GLOBAL_LIMIT": "100/30m",
                "NOTIFIER_CATEGORY_LIMIT": "10/30m",
                "NOTIFIER_DIGEST_INTERVAL": f"{interval:g}s",
                "NOTIFIER_SLACK_WEBHOOK_URL": standin.url,
                "NOTIFIER_CHANNEL_RATE": channel_rate,
            }
        )
        client = redis.Redis.from_url(server.url)
        pid = gateway.proc.pid
        report.block(title)
        report.add(
            "settings", f"100/30m global, 10/30m per category, {interval:g}s digests, channel rate {channel_rate}"
        )
        rss_idle = rss_kib(pid)
        bodies = [{"category": uuid.uuid4().hex, "text": f"cat-{n}"} for n in range(count)]
        statuses, seconds = asyncio.run(post_concurrently(gateway.url + "/v1/events", bodies, 64))
        rss_loaded = rss_kib(pid)
        report.add("events posted", count, note=f"{seconds:.1f} s, {count / seconds:.0f} req/s, 64 in flight")
        report.add("answers", " ".join(f"{k}:{v}" for k, v in sorted(statuses.items(), key=str)))
        waited = wait_until_quiet(standin, quiet=3 * interval, at_least=3 * interval, timeout=180)
        report.add(
            "waited after the load for deliveries",
            round(waited, 1),
            "s",
            "until the stand-in got nothing for 3 digest intervals",
        )
        stats = _report_views(report, gateway.url)
        report.add(
            "/v1/stats accepted / dropped vs 202s / 429s",
            f"{stats.get('accepted')} / {stats.get('dropped')} vs {statuses[202]} / {statuses[429]}",
        )
        rss_scraped = rss_kib(pid)
        report.add("gateway RSS idle (after start)", round(rss_idle / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS right after the load", round(rss_loaded / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS after digests and the scrapes", round(rss_scraped / KIB_PER_MIB, 1), "MiB")
        report.add("gateway RSS growth (after scrapes - idle)", round((rss_scraped - rss_idle) / KIB_PER_MIB, 1), "MiB")
        _report_redis(report, client)
        _report_digests(report, standin.snapshot(), statuses.get(429, 0))
        report.add("gateway log lines with ERROR or Traceback", log_errors(gateway))
        report.note(f"gateway log: {gateway.log_path}")
        client.close()


def _report_views(report: Report, base: str) -> dict:
    """Size and time of ``/metrics`` (one scrape), ``/v1/stats`` and ``/v1/limits``."""
    status, raw, seconds = fetch(base + "/metrics")
    lines = raw.decode(errors="replace").splitlines()
    series = sum(1 for line in lines if line.startswith("notifier_events_total{"))
    report.add("/metrics status", status)
    report.add("/metrics size", len(raw), "bytes")
    report.add("/metrics lines", len(lines))
    report.add("/metrics notifier_events_total series", series)
    report.add("/metrics scrape time", round(seconds * 1000, 1), "ms")
    bodies = {}
    for path in ("/v1/stats", "/v1/limits"):
        status, raw, seconds = fetch(base + path)
        with contextlib.suppress(ValueError):
            bodies[path] = json.loads(raw)
        named = bodies.get(path, {}).get("by_category" if path == "/v1/stats" else "categories")
        report.add(f"{path} status", status)
        report.add(f"{path} size", len(raw), "bytes")
        report.add(
            f"{path} categories named",
            None if named is None else len(named),
            note="with (other)" if named and "(other)" in named else "",
        )
        report.add(f"{path} time", round(seconds * 1000, 1), "ms")
    return bodies.get("/v1/stats", {})


def _report_redis(report: Report, client: redis.Redis) -> None:
    """The deployment's keys: every hash and set with its size, the rest summed by type."""
    sizes = redis_sizes(client, redis_keys(client, "notifier:*"))
    report.add("redis keys notifier:*", len(sizes))
    by_type: Counter = Counter()
    for name, (kind, size) in sorted(sizes.items()):
        if kind in ("hash", "set"):
            report.add(f"redis {'HLEN' if kind == 'hash' else 'SCARD'} {name}", size)
        else:
            by_type[kind] += 1
    report.add("redis other keys by type", " ".join(f"{k}:{v}" for k, v in sorted(by_type.items())) or "none")
    report.add("redis used_memory", round(client.info("memory")["used_memory"] / KIB_PER_MIB / KIB_PER_MIB, 2), "MiB")


def _report_digests(report: Report, received: list[Received], dropped: int) -> None:
    """Digests accepted vs refused by the stand-in, and their Suppressed sums vs the 429s."""
    digests = [r for r in received if SUPPRESSED.search(r.text)]
    accepted = [r for r in digests if r.status == 200]
    refused = [r for r in digests if r.status != 200]
    events = [r for r in received if not SUPPRESSED.search(r.text)]
    ok_sum = sum(int(SUPPRESSED.search(r.text).group(1)) for r in accepted)
    refused_sum = sum(int(SUPPRESSED.search(r.text).group(1)) for r in refused)
    report.add("event messages received / refused", f"{len(events)} / {sum(r.status != 200 for r in events)}")
    report.add("digests accepted by the stand-in", len(accepted))
    report.add(
        "digests refused (400 invalid_blocks)",
        len(refused),
        note=", ".join(sorted({r.problem for r in refused}))[:120] or "",
    )
    report.add("largest digest text", max((len(r.text) for r in digests), default=0), "characters")
    report.add("Suppressed N summed, accepted digests", ok_sum)
    report.add("Suppressed N summed, refused digests", refused_sum)
    report.add("429 answers", dropped)
    report.add("accepted digests' sum == 429s", ok_sum == dropped)
    report.add("all digests' sum == 429s", ok_sum + refused_sum == dropped)
