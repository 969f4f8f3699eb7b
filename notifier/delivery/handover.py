"""Hand-overs of what windows held, and maintenance windows' announcements: due later, taken once.

Part of the timers' turn (``timers.py``): every look, a replica reads the set of
(channel, window) pairs that hold anything and asks its policy snapshot whether each
pair's window is still in force; when not, it runs ``lua/handover.lua``, which checks
the end again by the store's clock and, in one atomic call, appends the summary and
each still-firing held alert to the outbox and clears the pair (a second caller finds
nothing). A window that ended while the store was down is handed over once it answers.

Announcements: a maintenance window's start and end, once each (``lua/announce.lua``
sets the window's flag in the call that appends them).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..policy import Policy
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..windows import MaintenanceWindow

log = logging.getLogger(__name__)

NAMED = 100  # categories a hand-over entry names; the message names as many as fit, sums the rest


class Handover:
    """Hands over the pairs whose window ended, and announces maintenance windows."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys, policy: Callable[[], Policy]) -> None:
        self._store, self._scripts, self._keys, self._policy = store, scripts, keys, policy

    async def turn(self) -> None:
        """One look: announcements due, then hand-overs due (a window's end is said before what it held)."""
        now_us = await self._store.server_time_us(self._keys.held_pairs)
        await self.announce(now_us)
        await self.hand_over(now_us)

    async def hand_over(self, now_us: int) -> int:
        """Hand over every pair whose window is no longer in force; how many this replica handed over."""
        pairs = await self._store.call(self._store.redis.smembers, self._keys.held_pairs)
        done = 0
        for pair in map(as_text, pairs):
            done += await self._hand_over_pair(pair, now_us)
        return done

    async def _hand_over_pair(self, pair: str, now_us: int) -> int:
        """1 when this call handed ``pair`` over, 0 when its window is in force or another replica did."""
        summary = self._keys.held(pair)
        raw = await self._store.call(self._store.redis.hmget, summary[0], ["window", "channel", "start"])
        window, channel, start = (as_text(value or "") for value in raw)
        end_us = self._policy().window_end(channel, window, int(start or 0), now_us)
        if end_us > now_us:
            return 0
        keys = [self._keys.held_pairs, self._keys.outbox, *self._keys.alert_keys, *summary]
        posted = int(
            await self._store.run(self._scripts.handover, keys, [pair, end_us, f"held-{uuid.uuid4().hex}", NAMED])
        )
        if posted < 0:  # -1: handed over already, -2: still in force by the store's clock
            return 0
        log.info("handed over what %s held in %s (%d alert(s) still firing)", window, channel, posted)
        return 1

    async def announce(self, now_us: int) -> int:
        """Announce every maintenance window's start and end that is due and not yet announced."""
        raw = await self._store.call(self._store.redis.hgetall, self._keys.windows)
        made = 0
        for name, value in raw.items():
            body = _body(as_text(value))
            for phase, flag, at in (("start", "as", "start"), ("end", "ae", "end")):
                if body and not body.get(flag) and int(body.get(at) or 0) <= now_us:
                    made += await self._announce(as_text(name), phase, body)
        return made

    async def _announce(self, name: str, phase: str, body: dict[str, Any]) -> int:
        window = MaintenanceWindow(name, 0, 0, tuple(body.get("categories") or ()), tuple(body.get("channels") or ()))
        channels = self._policy().window_channels(window)
        args = [name, phase, f"window-{uuid.uuid4().hex}", *channels]
        return int(await self._store.run(self._scripts.announce, [self._keys.windows, self._keys.outbox], args))


def _body(value: str) -> dict[str, Any] | None:
    try:
        body = json.loads(value)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
