"""Send slots shared by the fleet: a sliding log per channel, and one for edits.

Before each send the log in Redis (``lua/pace.lua``) hands out the next free
slot under every rule of the destination's pace (Slack's ``1/1s``, Discord's
``5/2s,30/1m``), so all replicas together keep it; a 429 sets a cooldown there
that every replica honours. Windows are taken a little wider than the rules: a
send that wakes late (a loaded host, a slow network) must not land within one
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
    """One channel's (or edit budget's) slots: its keys (last slots, own cooldown, its destination's) and rules."""

    slot_key: str
    cooldown_key: str
    workspace_cooldown_key: str
    rules: tuple[Rule, ...]
    other: tuple[str, str] | None = None  # the slots and cooldown of the channel's other name (channels.py)

    @property
    def keys(self) -> list[str]:
        return [self.slot_key, self.cooldown_key, self.workspace_cooldown_key, *(self.other or ())]


def widened(rules: tuple[Rule, ...]) -> list[int]:
    """The script's arguments: COUNT, WINDOW_US per rule, each a little wider (see the docstring).

    Each rule COUNT/WINDOW is kept as 1 per WINDOW/COUNT: sends evenly spaced, never a burst,
    as Slack asks ("1 per second") and as a chat that blocks a careless sender (Teams) deserves;
    ``5/2s,30/1m`` is then one send per 2 s, within both.
    """
    return [n for rule in rules for n in (1, int(rule.window_ms * 1000 * SPACING_MARGIN / max(1, rule.count)))]


class Pacer:
    """Hands out the slots of any bucket to every replica."""

    def __init__(self, store: Store, scripts: Scripts) -> None:
        self._store, self._scripts = store, scripts

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
        log.warning("rate limited on %s for %.1fs", bucket.slot_key.partition("slots:")[2], seconds)
        await until_answered("recording a cooldown", self._set_cooldown, bucket, seconds)

    async def _next_slot(self, bucket: Bucket) -> int:
        return int(await self._store.run(self._scripts.pace, bucket.keys, widened(bucket.rules)))

    async def _cooldown_left(self, bucket: Bucket) -> int:
        pipe = self._store.redis.pipeline(transaction=False)
        for key in (bucket.cooldown_key, bucket.workspace_cooldown_key, *(bucket.other or ())[1:]):
            pipe.pttl(key)
        return max(await self._store.call(pipe.execute))  # type: ignore[no-any-return]

    async def _set_cooldown(self, bucket: Bucket, seconds: float) -> None:
        pipe = self._store.redis.pipeline(transaction=False)
        for key in (bucket.cooldown_key, *(bucket.other or ())[1:]):  # under both names: see channels.py
            pipe.set(key, "1", px=max(1, int(seconds * 1000)))
        await self._store.call(pipe.execute)


def backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter: the wait before sending again after ``attempt`` failures."""
    return random.uniform(0, min(cap, base * 2**attempt))
