"""What ``bench/storm.py`` reads from Redis and ``/proc``: EVALSHA calls and time, the events
decided in the store, Redis and process CPU (a round's cost is the difference before and after
it), admit.lua with a batch of 1 against a plain PING, and the memory of the sliding logs.

Every name here is re-exported by ``storm``: other benchmarks use them as ``storm.NAME``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import redis
import yaml
from storm_bodies import CATEGORIES, TREE


def evalsha_stats(client: redis.Redis) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return stats.get("calls", 0), stats.get("usec", 0)


def keyed_in_store(client: redis.Redis) -> int:
    """How many events with a dedup_key the store decided so far (``admit.lua`` reads each one's record)."""
    return client.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) used so far by process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def counters(client: redis.Redis, pid: int) -> dict[str, float]:
    """What a round spends is the difference of these before and after it."""
    calls, usec = evalsha_stats(client)
    return dict(calls=calls, usec=usec, cpu=redis_cpu(client), own=process_cpu(pid), keyed=keyed_in_store(client))


async def script_vs_ping(
    url: str, prefix: str, limit: str, n: int, prefill: int = 1, tree: bool = False, **extra: str
) -> dict:
    """Latency of admit.lua with a batch of 1 (as built by the Limiter) vs PING, sequentially.

    The first ``limit``'s worth of events fill the levels before the timing starts. ``tree``:
    the four levels of ``bench/tree.yaml``, every rule ``limit``.
    """
    from builders import build_limiter

    from notifier.admission.batch import Pending
    from notifier.config import EMPTY, parse_config
    from notifier.models import Event
    from notifier.settings import load_settings

    config = EMPTY
    if tree:
        raw = yaml.safe_load(TREE.read_text())
        for level in raw["levels"]:
            level["rules"] = limit
        config = parse_config(raw)
        settings = load_settings(redis_url=url, key_prefix=prefix, digest_interval=0, **extra)
    else:
        settings = load_settings(
            redis_url=url, key_prefix=prefix, global_limit=limit, category_limit=limit, digest_interval=0, **extra
        )
    limiter, store = build_limiter(settings, config=config)
    client = store.redis
    sync = redis.Redis.from_url(url)
    result = {}

    def pending(i: int) -> Pending:
        event = Event(category=CATEGORIES[i % 20], text="bench")
        return Pending(event, f"{prefix}-{i}", time.monotonic() + 5, limiter.policy.route(event, "anonymous"))

    for label, call in (
        ("ping", lambda i: client.ping()),
        ("admit", lambda i: limiter._ask([pending(i)], {}, {}, limiter._protocol, time.monotonic())),
    ):
        for i in range(prefill if label == "admit" else 1):
            await call(i)  # warm up; fill the levels of a refusing run
        before = evalsha_stats(sync)
        started = time.perf_counter()
        for i in range(n):
            await call(i)
        result[label] = (time.perf_counter() - started) / n * 1e6
        after = evalsha_stats(sync)
        if label == "admit":
            result["usec_per_call"] = (after[1] - before[1]) / max(1, after[0] - before[0])
    await client.aclose()
    sync.close()
    return result


def memory_per_event(client: redis.Redis, prefix: str) -> float:
    """Bytes in the sliding logs per admitted event (both logs, all categories)."""
    keys = [k for k in client.scan_iter(match=f"{prefix}:*log:*")]
    events = client.zcard(f"{prefix}:{{{prefix}}}:log:global")
    total = sum(client.memory_usage(k, samples=0) or 0 for k in keys)
    return total / max(1, events), events
