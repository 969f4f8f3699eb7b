"""The queue of edits stays as small as the records it names: an entry whose alert record expired is
dropped when a claim meets it, never handed out, so it costs no slot of the edit budget (a soak showed
the queue growing for as long as alerts changed faster than the budget, most slots spent on the dead)."""

from __future__ import annotations

import redis

from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect

LEASE_MS = 30_000


async def test_a_claim_drops_the_entries_of_expired_records_and_hands_out_a_live_one(redis_url):
    keys, sync = Keys("edits-test"), redis.Redis.from_url(redis_url)
    store = connect(redis_url, False, 5.0)
    scripts = Scripts(store.redis)
    try:
        dead = [keys.record_of("db", f"{n:032x}") for n in range(100)]
        live = keys.record_of("db", "f" * 32)
        sync.hset(live, mapping={"ver": 2, "shown": 1, "ts": "1.2"})
        sync.zadd(keys.edits, {**{record: n for n, record in enumerate(dead)}, live: 1000})

        async def claim() -> str | None:
            found = await store.run(scripts.edits, [keys.edits, keys.edits_claimed], ["claim", LEASE_MS])
            return found.decode() if isinstance(found, bytes) else found

        assert await claim() is None  # 64 of the dead looked at and dropped: none handed out
        assert await claim() == live  # the other 36, then the live one
        assert sync.zcard(keys.edits) == 0 and sync.zrange(keys.edits_claimed, 0, -1) == [live.encode()]
    finally:
        await store.close()
        sync.close()
