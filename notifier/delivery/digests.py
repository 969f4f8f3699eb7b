"""Digests of suppressed events: claimed by exactly one replica when due, then sent like any message.

``admit.lua`` counts every drop per channel and category and schedules the
channel's digest one ``NOTIFIER_DIGEST_INTERVAL`` after the first drop since the
last one; ``digest.lua`` takes and clears the counts and appends the digest to
the outbox in one atomic step, so every drop is in exactly one digest.
"""

from __future__ import annotations

import uuid

from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts

NAMED = 100  # categories a digest entry names; the message names as many as fit, sums the rest


class Digests:
    """Claims the digests that are due."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys

    async def claim_due(self) -> int:
        """Append every due digest to the outbox; how many this replica claimed."""
        now_us = await self._store.server_time_us(self._keys.outbox)
        due = await self._store.call(self._store.redis.zrangebyscore, self._keys.digest_due, "-inf", now_us)
        claimed = 0
        for channel in map(as_text, due):
            keys = [self._keys.digest_due, self._keys.suppressed(channel), self._keys.outbox]
            args = [channel, "digest-" + uuid.uuid4().hex, NAMED]
            claimed += int(await self._store.run(self._scripts.digest, keys, args)) > 0
        return claimed
