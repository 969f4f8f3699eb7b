"""Send slots shared by the fleet: a leaky bucket per channel, and one for edits.

Before each send the bucket in Redis (``lua/pace.lua``) hands out the next free
slot, so all replicas together keep the rate; a 429 sets a cooldown there that
every replica honours. Slots are spaced a little wider than the rate: a send
that wakes late (a loaded host, a slow network) must not land within one
window of the next one's on-time send.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import NamedTuple

from ..rules import Rule
from ..store.client import Store
from ..store.scripts import Scripts
from ..tasks import until_answered

log = logging.getLogger(__name__)

SPACING_MARGIN = 1.1


class Bucket(NamedTuple):
    """The keys of one leaky bucket: its last slot, its own cooldown, the workspace's."""

    slot_key: str
    cooldown_key: str
    workspace_cooldown_key: str


class Pacer:
    """Hands out slots of one rate (``1/1s`` per channel, or the edit budget) to every replica."""

    def __init__(self, store: Store, scripts: Scripts, rate: Rule) -> None:
        self._store, self._scripts = store, scripts
        self._spacing_us = int(rate.window_ms * 1000 * SPACING_MARGIN / rate.count)

    async def wait_for_slot(self, bucket: Bucket) -> float:
        """Wait for the bucket's next slot, then make sure no cooldown began meanwhile.

        Another replica may learn of a 429 while this one sleeps towards a slot
        computed before it; so the cooldown is checked again right before the
        call. Returns the seconds waited.
        """
        waited = 0.0
        while True:
            wait_us = await until_answered("pacing", self._next_slot, bucket)
            if wait_us > 0:
                await asyncio.sleep(wait_us / 1e6)
                waited += wait_us / 1e6
            if await until_answered("checking the cooldown", self._cooldown_left, bucket) <= 0:
                return waited

    async def cool_down(self, bucket: Bucket, seconds: float) -> None:
        """Slack answered 429: no replica sends on this bucket for ``seconds``."""
        log.warning("Slack rate limited %s for %.1fs", bucket.slot_key.rpartition(":")[2], seconds)
        await until_answered("recording a cooldown", self._set_cooldown, bucket, seconds)

    async def _next_slot(self, bucket: Bucket) -> int:
        return int(await self._store.run(self._scripts.pace, list(bucket), [self._spacing_us]))

    async def _cooldown_left(self, bucket: Bucket) -> int:
        pipe = self._store.redis.pipeline(transaction=False)
        pipe.pttl(bucket.cooldown_key)
        pipe.pttl(bucket.workspace_cooldown_key)
        return max(await self._store.call(pipe.execute))  # type: ignore[no-any-return]

    async def _set_cooldown(self, bucket: Bucket, seconds: float) -> None:
        await self._store.call(self._store.redis.set, bucket.cooldown_key, "1", px=max(1, int(seconds * 1000)))


def backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter: the wait before sending again after ``attempt`` failures."""
    return random.uniform(0, min(cap, base * 2**attempt))
