"""The hierarchical limiter, on the embedded store and on a real redis-server."""

import asyncio

import pytest
import redis.asyncio as aioredis
from builders import build_limiter

from notifier.errors import StoreUnavailable
from notifier.models import Event
from notifier.outbox import decode
from notifier.settings import load_settings
from notifier.store.keys import Keys
from notifier.store.topology import connect


@pytest.fixture(params=["embedded", "redis"])
async def make_limiter(request):
    """Build limiters sharing one store; several of them act like several replicas."""
    clients = []
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    shared = connect(None) if url is None else None

    def build(**overrides):
        settings = load_settings(redis_url=url, digest_interval=0, **overrides)
        limiter, store = build_limiter(settings, shared)
        clients.append(store)
        return limiter, store.redis

    yield build
    for store in set(clients):
        await store.close()


def ev(category: str, text: str = "x", **kw) -> Event:
    return Event(category=category, text=text, **kw)


async def outcomes(limiter, events):
    return [d.outcome for d in await asyncio.gather(*(limiter.admit(e) for e in events))]


async def test_hierarchy_global_then_category(make_limiter):
    limiter, _ = make_limiter(global_limit="5/1m", category_limit="3/1m")
    assert await outcomes(limiter, [ev("a")] * 4) == ["accepted"] * 3 + ["dropped"]
    refused = await limiter.admit(ev("a"))
    assert (refused.level, refused.rule) == ("category", "3/1m")
    assert await outcomes(limiter, [ev("b")] * 3) == ["accepted", "accepted", "dropped"]
    refused = await limiter.admit(ev("c"))
    assert (refused.outcome, refused.level, refused.rule) == ("dropped", "global", "5/1m")
    assert 0 < refused.retry_after <= 60


async def test_shadow_mode_never_refuses_locally(make_limiter):
    """Levels reported full in shadow mode are remembered, yet every event is still admitted."""
    limiter, _ = make_limiter(global_limit="1/1m", category_limit="1/1m", shadow=True)
    assert await outcomes(limiter, [ev("a")]) == ["accepted"]
    for _ in range(5):  # both levels full: a replica refusing by itself would answer "dropped"
        assert await outcomes(limiter, [ev("a")]) == ["shadow"]


async def test_a_zero_rule_mutes_its_category(make_limiter):
    limiter, _ = make_limiter(global_limit="5/1m", category_limits={"debug": "0/1h"})
    assert await outcomes(limiter, [ev("debug")] * 3 + [ev("db")]) == ["dropped"] * 3 + ["accepted"]
    refused = await limiter.admit(ev("debug"))  # refused here now: the level is known full
    assert (refused.level, refused.rule) == ("category", "0/1h")
    assert 3599 < refused.retry_after <= 3600  # nothing ever frees a slot: a full window


async def test_refused_events_never_consume_quota(make_limiter):
    limiter, client = make_limiter(global_limit="10/1m", category_limit="2/1m")
    keys = Keys("notifier")
    await outcomes(limiter, [ev("noisy")] * 50)  # 2 admitted, 48 refused at the category level
    assert await client.zcard(keys.bucket_log("category", "noisy")) == 2
    assert await client.zcard(keys.bucket_log("global", "")) == 2
    # The global level still has exactly 8 slots for the others.
    results = await outcomes(limiter, [ev(f"c{i % 5}") for i in range(20)])
    assert results.count("accepted") == 8


async def test_several_rules_per_level(make_limiter):
    limiter, _ = make_limiter(global_limit="100/1m", category_limit="2/300ms,3/1m")
    assert await outcomes(limiter, [ev("a")] * 3) == ["accepted", "accepted", "dropped"]
    refused = await limiter.admit(ev("a"))
    assert refused.rule == "2/300ms" and 0 < refused.retry_after <= 0.3
    await asyncio.sleep(refused.retry_after + 0.05)
    assert await outcomes(limiter, [ev("a")] * 2) == ["accepted", "dropped"]
    refused = await limiter.admit(ev("a"))
    assert refused.rule == "3/1m" and refused.retry_after > 50


async def test_window_slides(make_limiter):
    limiter, _ = make_limiter(global_limit="100/1m", category_limit="2/400ms")
    assert await outcomes(limiter, [ev("a")] * 3) == ["accepted", "accepted", "dropped"]
    await asyncio.sleep(0.45)
    assert await outcomes(limiter, [ev("a")] * 3) == ["accepted", "accepted", "dropped"]


async def test_events_admitted_at_the_same_instant_are_all_counted(make_limiter):
    limiter, client = make_limiter(global_limit="40/1m", category_limit="40/1m")
    results = await outcomes(limiter, [ev("a")] * 40)  # one script call, one TIME for all
    assert results == ["accepted"] * 40
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 40
    assert (await limiter.admit(ev("a"))).outcome == "dropped"


async def test_admission_and_queueing_are_one_step(make_limiter):
    limiter, client = make_limiter(global_limit="3/1m", category_limit="10/1m")
    decisions = await asyncio.gather(*(limiter.admit(ev("a", f"text {i}")) for i in range(5)))
    entries = [decode(fields) for _, fields in await client.xrange(Keys("notifier").outbox)]
    assert [e.id for e in entries] == [d.id for d in decisions if d.outcome == "accepted"]
    assert [e.event["text"] for e in entries] == [f"text {i}" for i in range(3)]


async def test_shared_counters(make_limiter):
    limiter, client = make_limiter(global_limit="4/1m", category_limit="3/1m")
    await outcomes(limiter, [ev("a")] * 5 + [ev("b")] * 3)
    await limiter.flush()
    stats = {k.decode(): int(v) for k, v in (await client.hgetall(Keys("notifier").stats)).items()}
    assert stats["accepted"] == 4 and stats["dropped"] == 4
    assert stats["accepted:a"] == 3 and stats["accepted:b"] == 1
    assert stats["dropped_category"] + stats["dropped_global"] == 4


async def test_local_refusals_skip_the_round_trip_but_are_counted(make_limiter, monkeypatch):
    limiter, client = make_limiter(global_limit="2/1m", category_limit="10/1m")
    await outcomes(limiter, [ev("a")] * 3)  # the third makes the global level known full
    calls = []
    store = limiter._store
    real_run = store.run
    monkeypatch.setattr(store, "run", lambda *a: calls.append(a) or real_run(*a))
    for _ in range(20):
        decision = await limiter.admit(ev("b"))
        assert (decision.outcome, decision.level, decision.rule) == ("dropped", "global", "2/1m")
    # Only the first "b" went to the store: the replica knew nothing of that category's level
    # (had it been full for longer, the store would have named it). The other 19 were decided here.
    assert len(calls) == 1
    await limiter.flush()
    assert len(calls) == 2  # then written in one call
    stats = {k.decode(): int(v) for k, v in (await client.hgetall(Keys("notifier").stats)).items()}
    assert stats["dropped"] == 21 and stats["dropped:b"] == 20


async def test_dedup_key_is_not_counted_twice(make_limiter):
    limiter, client = make_limiter(global_limit="10/1m", category_limit="10/1m")
    first = await limiter.admit(ev("a", dedup_key="disk-full"))
    again = await limiter.admit(ev("a", dedup_key="disk-full"))
    other = await limiter.admit(ev("b", dedup_key="disk-full"))
    assert (again.outcome, again.id) == ("duplicate", first.id)
    assert other.outcome == "accepted"
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 2


async def test_every_key_shares_one_hash_tag(make_limiter):
    limiter, client = make_limiter(global_limit="1/1m", category_limit="5/1m", key_prefix="team-a")
    await outcomes(limiter, [ev("a", dedup_key="k"), ev("b")])
    await limiter.flush()
    keys = [k.decode() for k in await client.keys("*")]
    assert keys and all(k.startswith("team-a:{team-a}:") for k in keys), keys


async def test_many_concurrent_replicas_admit_exactly_the_budget(redis_url):
    """Ten limiters (as ten replicas, each with its own connection) race for one budget."""
    settings = load_settings(redis_url=redis_url, global_limit="60/1m", category_limit="15/1m", digest_interval=0)
    replicas = [build_limiter(settings)[0] for _ in range(10)]
    events = [(replicas[i % 10], ev(f"cat{i % 6}", f"event {i}")) for i in range(1200)]
    decisions = await asyncio.gather(*(r.admit(e) for r, e in events))
    admitted = [e for (r, e), d in zip(events, decisions, strict=True) if d.outcome == "accepted"]
    assert len(admitted) == 60
    per_category = {c: sum(e.category == c for e in admitted) for c in {e.category for e in admitted}}
    assert max(per_category.values()) <= 15
    client = aioredis.Redis.from_url(redis_url)
    keys = Keys("notifier")
    assert await client.zcard(keys.bucket_log("global", "")) == 60
    for category, n in per_category.items():
        assert await client.zcard(keys.bucket_log("category", category)) == n
    assert await client.xlen(keys.outbox) == 60
    for replica in replicas:
        await replica.flush()
    stats = await client.hgetall(keys.stats)
    assert int(stats[b"accepted"]) == 60 and int(stats[b"dropped"]) == 1140
    await client.aclose()


async def test_store_down_raises_store_unavailable():
    from helpers import free_port

    settings = load_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0", redis_timeout="300ms")
    limiter, _ = build_limiter(settings)
    with pytest.raises(StoreUnavailable):
        await limiter.admit(ev("a"))


class FlakyScript:
    """Stands in for admit.lua: fails while ``down``, then counts what it was sent."""

    def __init__(self) -> None:
        self.calls, self.down, self.forced = 0, True, []

    async def __call__(self, keys, args, client=None):  # as redis-py's AsyncScript
        from redis.exceptions import ConnectionError as RedisConnectionError

        self.calls += 1
        if self.down:
            raise RedisConnectionError("store down")
        self.forced.append(args)
        return [0]  # no events: only the alert epoch


async def test_refusal_counts_wait_for_a_store_that_is_down_without_hammering_it():
    settings = load_settings(digest_interval=0)
    script = FlakyScript()
    limiter, _ = build_limiter(settings)
    limiter._scripts = type("S", (), {"admit": script})()
    limiter.count_refusal(limiter.policy.route(Event(category="db", text="x"), "anonymous"), 1)
    for _ in range(100):  # the first attempt comes within FLUSH_DELAY
        if script.calls:
            break
        await asyncio.sleep(0.02)
    for _ in range(5):  # more refusals while down must not bring the next attempt forward
        limiter.count_refusal(limiter.policy.route(Event(category="db", text="x"), "anonymous"), 1)
        await asyncio.sleep(0.08)
    assert script.calls == 1
    script.down = False
    await limiter.flush()
    # Nothing was lost: all six refusals go in the next call, as one count.
    assert script.calls == 2 and "db" in script.forced[0] and 6 in script.forced[0]
