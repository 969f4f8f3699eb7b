"""Each channel value's sink and pace: its destination's sink, and one pace for a Slack channel's name and id.

Slack takes ``#alerts`` and ``C0123ABCD`` for the same channel, and limits the
channel, not the spelling. When Slack answers a post with the channel's id, the
name -> id pair is kept in the store (a capped hash, fleet-wide), and from then on
every replica paces the name under the id's bucket: two senders (one per spelling)
share one pace. Until a post has taught it, a name is paced on its own; after, a
send under the id also keeps clear of the name's slots and cooldown, and writes its
slot there too (``pace.lua`` KEYS[4], KEYS[5]), as a replica that has not learnt the
id yet still paces under the name alone. One gap is left: a send given by the id does not
know the names that lead to it, so it does not see the slots a name took before its id was
learnt: the teaching post itself, which the next send by id may follow at once.
"""

from __future__ import annotations

import contextlib
import re
import time

from ..destinations.base import Posted
from ..destinations.registry import Scoped, Sinks
from ..errors import StoreFull, StoreUnavailable
from ..rules import Rule
from ..store.client import Store, as_text
from ..store.keys import Keys
from .pacing import Bucket

_ID = re.compile(r"[CGD][A-Z0-9]{8,}")  # a Slack channel id: nothing to learn
MAX_IDS = 10_000  # channel names whose id the fleet keeps: names come from clients


class Channels:
    """Where a channel value's messages go, and the bucket that paces them."""

    def __init__(self, store: Store, keys: Keys, sinks: Sinks) -> None:
        self._store, self._keys, self.sinks = store, keys, sinks
        self._ids: dict[str, str] = {}  # channel value -> the id value it is paced as

    def sink(self, channel: str) -> Scoped:
        return self.sinks.of(channel)

    async def bucket(self, channel: str) -> Bucket:
        """The pace of ``channel``: its destination's rules, under its id's keys once known."""
        sink = self.sinks.of(channel)
        paced_as = await self._paced_as(channel)
        keys = self._keys
        whole = keys.cooldown_of(sink.destination) if self.sinks.named else keys.cooldown_all
        other = (keys.pace(channel), keys.cooldown(channel)) if paced_as != channel else None
        return Bucket(keys.pace(paced_as), keys.cooldown(paced_as), whole, sink.rate, other)

    async def edit_bucket(self, posted: Posted, update_rate: tuple[Rule, ...]) -> Bucket:
        """The budget an edit of ``posted`` takes its slot from, among several destinations.

        A Slack workspace limits edits apart from posts (``update_rate``, per workspace);
        a chat that limits its webhook as a whole (Discord) counts an edit as a post.
        """
        sink, keys = self.sinks.of(posted.channel_id), self._keys
        if not sink.threads:
            return await self.bucket(posted.channel_id)
        name = sink.destination
        return Bucket(keys.update_pace_of(name), f"{keys.update_cooldown}:{name}", keys.cooldown_of(name), update_rate)

    async def count(self, channel: str, outcome: str) -> None:
        """Count a delivery's ``outcome`` (``delivered``, ``dead``) under its destination, for the stats.

        Apart from the settle's own counters (one call more per delivery, never on the admission
        path): a replica that dies between the two, or a store full at that moment (it refuses the
        write, and delivery must go on), leaves one delivery uncounted here only.
        """
        name = self.sinks.of(channel).destination
        with contextlib.suppress(StoreFull):  # refused over maxmemory: lost, rather than hold delivery up
            await self._store.call(self._store.redis.hincrby, self._keys.stats, f"destination:{name}:{outcome}", 1)

    async def paused(self, channel: str, seconds: float) -> None:
        """Note until when (unix ms) the channel's destination was last paused by a 429, for the stats."""
        store = self._store  # the fleet's clock where known (a replica's own may be off)
        now_ms = store.store_time_us(time.monotonic()) / 1000 if store.clock_known else time.time() * 1000
        name, until = self.sinks.of(channel).destination, int(now_ms + seconds * 1000)
        with contextlib.suppress(StoreFull):  # as count: a full store must not hold delivery up
            await self._store.call(self._store.redis.hset, self._keys.stats, f"destination:{name}:paused_until", until)

    async def learn(self, channel: str, posted: Posted) -> None:
        """Keep the id Slack answered for a channel named otherwise (``#alerts`` -> ``C0123``).

        Called once the post is settled, and never raises: a store error here leaves the name to be
        learnt at its next post (the post must never be taken for unsent: it would be sent twice).
        """
        if not posted.channel_id or posted.channel_id == channel or self._ids.get(channel) == posted.channel_id:
            return
        redis, keys = self._store.redis, self._keys
        try:
            if await self._store.call(redis.hlen, keys.channel_ids()) < MAX_IDS:
                await self._store.call(redis.hset, keys.channel_ids(), channel, posted.channel_id)
        except StoreUnavailable:
            return
        self._ids[channel] = posted.channel_id

    async def _paced_as(self, channel: str) -> str:
        known = self._ids.get(channel)
        if known is not None or not self._may_have_id(channel):
            return known or channel
        # Asked each time until found: another replica may learn it at any moment (a pace
        # or a cooldown kept under the name after that would not be the fleet's).
        found = await self._store.call(self._store.redis.hget, self._keys.channel_ids(), channel)
        if found is None:
            return channel
        if len(self._ids) < MAX_IDS:
            self._ids[channel] = as_text(found)
        return as_text(found)

    def _may_have_id(self, channel: str) -> bool:
        """True for a Slack channel given by name (a destination whose posts answer the channel's id)."""
        sink = self.sinks.of(channel)
        return sink.threads and sink.paced and not _ID.fullmatch(sink.bare(channel))
