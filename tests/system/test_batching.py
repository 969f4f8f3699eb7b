"""Batched admission and local refusals are exact: same answers as one call per event.

Runs against the embedded store (fakeredis) and a real redis-server. No test
asserts how long anything takes; the only sleeps wait out a ``retry_after``.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from builders import build_limiter
from helpers import Gateway

from notifier.admission.limiter import Limiter
from notifier.models import Event
from notifier.settings import load_settings
from notifier.store.keys import Keys, Stat
from notifier.store.topology import connect


@pytest.fixture(params=["embedded", "redis"])
async def make_limiter(request):
    """Build limiters, each under its own key prefix so two runs never share a log."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    shared = connect(None) if url is None else None
    clients = []

    def build(prefix: str, **overrides) -> tuple[Limiter, object, Keys]:
        settings = load_settings(redis_url=url, digest_interval=0, key_prefix=prefix, **overrides)
        limiter, store = build_limiter(settings, shared)
        clients.append(store)
        return limiter, store.redis, Keys(prefix)

    yield build
    for store in set(clients):
        await store.close()


def storm(n: int, seed: int = 6) -> list[Event]:
    """A mixed sequence: 6 categories, some events sharing a dedup key."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        dedup = {"dedup_key": f"k{rng.randrange(8)}"} if rng.random() < 0.15 else {}
        events.append(Event(category=f"c{rng.randrange(6)}", text=f"event {i}", **dedup))
    return events


def answers(decisions, events) -> list[tuple]:
    """What a client sees, with ids replaced by the index of the event that owns them."""
    index = {d.id: i for i, d in enumerate(decisions) if d.outcome == "accepted"}
    return [(d.outcome, d.level, d.rule, index.get(d.id) if d.outcome == "duplicate" else None) for d in decisions]


async def stats(limiter: Limiter, client, keys: Keys) -> dict:
    await limiter.flush()
    counts = {k.decode(): int(v) for k, v in (await client.hgetall(keys.stats)).items()}
    by_category = {name.partition(":")[2]: {} for name in counts if ":" in name}
    for name, value in counts.items():
        outcome, _, category = name.partition(":")
        if category:
            by_category[category][outcome] = value
    return {
        "accepted": counts.get(Stat.ACCEPTED, 0),
        "dropped": counts.get(Stat.DROPPED, 0),
        "dropped_by_limit": {level: counts.get(Stat.dropped_by(level), 0) for level in ("global", "category")},
        "by_category": {
            c: {"accepted": v.get("accepted", 0), "dropped": v.get("dropped", 0)} for c, v in by_category.items()
        },
    }


async def test_batched_equals_sequential(make_limiter):
    # No two levels share a window: when both are full, the level that frees later does
    # not depend on how far apart the events were admitted (one call gives them one time).
    limits = dict(global_limit="30/1h", category_limit="9/50m,6/30m", category_limits={"c0": "2/2h"})
    events = storm(300)
    one_by_one, client, keys_a = make_limiter("seq", **limits)
    sequential = [await one_by_one.admit(e) for e in events]
    batched_limiter, _, keys_b = make_limiter("batch", **limits)
    # All at once: they ride in a few script calls, plus local refusals.
    batched = list(await asyncio.gather(*(batched_limiter.admit(e) for e in events)))
    assert answers(batched, events) == answers(sequential, events)
    # The sequence exercises every path: admitted, duplicate, refused by either level.
    seen = {(d.outcome, d.level) for d in sequential}
    assert {("accepted", ""), ("duplicate", ""), ("dropped", "global"), ("dropped", "category")} <= seen
    assert [d.outcome for d in sequential].count("accepted") == 30
    assert await stats(one_by_one, client, keys_a) == await stats(batched_limiter, client, keys_b)


async def test_local_refusal_never_outlasts_redis(make_limiter):
    limiter, client, keys = make_limiter("short", global_limit="1000/1h", category_limit="3/1s")
    refused = 0
    for _ in range(2):
        decisions = await asyncio.gather(*(limiter.admit(Event(category="a", text="x")) for _ in range(10)))
        outcomes = [d.outcome for d in decisions]
        assert outcomes == ["accepted"] * 3 + ["dropped"] * 7
        refused += 7
        local = await limiter.admit(Event(category="a", text="x"))  # answered from the cache
        assert local.outcome == "dropped" and local.rule == "3/1s"
        refused += 1
        # Once the wait Redis gave has passed, the level has room again: no stale local refusal.
        await asyncio.sleep(max(d.retry_after for d in decisions) + 0.02)
    counted = await stats(limiter, client, keys)
    assert counted["dropped"] == refused
    assert counted["accepted"] == 6
    assert counted["by_category"]["a"] == {"accepted": 6, "dropped": refused}


async def test_level_named_like_redis_when_both_are_full(make_limiter):
    # The category frees later than the global level: both Redis and the cache name it.
    limiter, _, _ = make_limiter("both", global_limit="2/1s", category_limit="2/1h")
    await asyncio.gather(*(limiter.admit(Event(category="a", text="x")) for _ in range(2)))
    first = await limiter.admit(Event(category="a", text="x"))
    cached = await limiter.admit(Event(category="a", text="x"))
    assert (first.level, cached.level) == ("category", "category")


async def test_local_refusals_appear_in_stats(redis_url):
    gateway = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_GLOBAL_LIMIT": "100/1h",
            "NOTIFIER_CATEGORY_LIMIT": "2/1h",
            "NOTIFIER_DIGEST_INTERVAL": "0",
        }
    ).start()
    try:
        statuses = [gateway.post({"category": "db", "text": f"lag {i}"})[0] for i in range(12)]
        assert statuses == [202] * 2 + [429] * 10
        # Asked right away: the refusals decided by the replica itself are already counted.
        status, body, _ = gateway.get("/v1/stats")
        assert status == 200
        assert (body["accepted"], body["dropped"], body["dropped_by_limit"]["category"]) == (2, 10, 10)
        assert body["by_category"]["db"] == {"accepted": 2, "dropped": 10}
    finally:
        gateway.stop()


async def test_refusals_counted_during_a_failed_call_are_all_kept(make_limiter):
    """A flush that fails hands its refusals back, added to those counted meanwhile."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    limiter, client, keys = make_limiter("keep", global_limit="5/1m")
    admit, calls = limiter._scripts.admit, []

    async def failing_once(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            # counted while the call is in flight
            limiter.count_refusal(limiter.policy.route(Event(category="a", text="x"), "anonymous"), 0)
            raise RedisConnectionError("store went away")
        return await admit(**kwargs)

    limiter._scripts.admit = failing_once
    limiter.count_refusal(limiter.policy.route(Event(category="a", text="x"), "anonymous"), 0)
    limiter.count_refusal(limiter.policy.route(Event(category="a", text="x"), "anonymous"), 0)
    await limiter.flush()  # fails: the two come back, next to the third
    await limiter.flush()
    counted = await stats(limiter, client, keys)
    assert len(calls) == 2
    assert (counted["dropped"], counted["dropped_by_limit"]["global"]) == (3, 3)
