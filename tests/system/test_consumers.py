"""The delivery group forgets replicas gone: a consumer that holds nothing and has not read for a while is
deleted (each pod of each rollout has a name of its own; the group would otherwise keep them all)."""

from __future__ import annotations

import asyncio

import redis

from notifier.delivery.group import GROUP, ConsumerGroup
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect


async def test_consumers_gone_are_forgotten_and_those_holding_entries_kept(redis_url):
    keys, sync = Keys("group-test"), redis.Redis.from_url(redis_url)
    store = connect(redis_url, False, 5.0)
    try:
        sync.xgroup_create(keys.outbox, GROUP, id="0", mkstream=True)
        for name in ("pod-a-old", "pod-b-old", "pod-c-holding"):
            sync.xadd(keys.outbox, {"e": name})
            [[_, [(stream_id, _)]]] = sync.xreadgroup(GROUP, name, {keys.outbox: ">"}, count=1)
            if name != "pod-c-holding":
                sync.xack(keys.outbox, GROUP, stream_id)
        await asyncio.sleep(0.3)
        group = ConsumerGroup(store, Scripts(store.redis), keys, "pod-d-me", None, 100)
        assert await group.prune(200) == 2
        names = {c["name"].decode() for c in sync.xinfo_consumers(keys.outbox, GROUP)}
        assert names == {"pod-c-holding"}  # holds an entry: kept until it is reclaimed
        assert await group.prune(60_000) == 0  # none idle that long
    finally:
        await store.close()
        sync.close()
