"""The outbox's consumer group: reading entries, keeping and reclaiming claims, settling.

* One consumer group for the deployment, one consumer per replica (its
  identity, ``NOTIFIER_REPLICA_ID``, defaults to ``host:port``); an entry is
  acknowledged only once Slack confirmed it, so delivery is at least once.
* Entries a replica holds are re-claimed regularly so a live replica waiting out
  a long Slack outage keeps them; entries idle longer than ``claim_idle``
  belonged to a dead replica and are taken over by another.
* With ``NOTIFIER_REDIS_MIN_REPLICAS=N``, a read is followed on its connection by a
  ``WAIT`` (``Store.call_replicated``): entries are handed out only once N
  replicas hold them, so nothing is posted that a failover could lose and a
  client's retry of its ``503 not replicated`` admit again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from redis.exceptions import ResponseError

from ..destinations.base import Posted
from ..errors import StoreUnavailable
from ..escalation import Step
from ..outbox import Entry, EventEntry, decode
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts

GROUP = "delivery"
READ_COUNT = 32
NO_GROUP = ("NOGROUP", "requires the key to exist")  # Redis's wording, the embedded store's


class Escalate(NamedTuple):
    """Start an alert's escalation when its post (or reopening reply) is settled."""

    first_step_us: int  # the first step's offset
    since: str  # "post" (counts from now) or "reopen" (from the reopening)


def first_step(escalation: Mapping[str, tuple[Step, ...]], entry: EventEntry) -> Escalate | None:
    """The start of an alert's escalation, for its post or its reopening reply (None: no steps)."""
    steps = escalation.get(str(entry.event.get("severity", "info")))
    if not steps or not entry.record or (entry.reply and not entry.reopened) or entry.message is not None:
        return None
    return Escalate(steps[0].after_ms * 1000, "reopen" if entry.reopened else "post")


class Backlog(NamedTuple):
    """The outbox as the gauges show it."""

    pending: int  # entries claimed, not yet settled
    length: int  # entries in the stream
    dead: int  # dead letters
    oldest_seconds: float  # age of the oldest entry not yet settled (0: none)


class Taken(NamedTuple):
    """An outbox entry this replica now holds: its stream id, what it says, its raw fields."""

    stream_id: str
    entry: Entry
    fields: dict[Any, Any]  # as read, copied unchanged into a dead letter


class ConsumerGroup:
    """One replica's view of the outbox consumer group."""

    def __init__(
        self, store: Store, scripts: Scripts, keys: Keys, consumer: str, block_ms: int | None, max_dead: int = 10_000
    ) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self.consumer = consumer
        self._max_dead = max_dead  # dead letters kept (NOTIFIER_DEAD_LETTERS_MAX): the oldest go first
        self._block_ms = block_ms  # None: the embedded store cannot block on reads

    async def read(self, start: str) -> list[tuple[str, dict[Any, Any] | None]] | None:
        """Entries from ``start`` ("0" = our own pending ones, ">" = new ones); raw stream replies.

        None when entries were read but fewer than ``NOTIFIER_REDIS_MIN_REPLICAS``
        replicas hold them yet: they stay pending under this replica's name.
        """
        block = self._block_ms if start == ">" else None
        try:
            if self._store.min_replicas:
                written = await self._store.call_replicated(
                    [self._read_command(start, block)], self._keys.replicated, self._store.timeout
                )
                reply = written.replies[0]
                if reply and written.replicas < self._store.min_replicas:
                    return None
            else:
                reply = await self._store.call(
                    self._store.redis.xreadgroup,
                    GROUP,
                    self.consumer,
                    {self._keys.outbox: start},
                    count=READ_COUNT,
                    block=block,
                )
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, ResponseError) or not any(m in str(exc) for m in NO_GROUP):
                raise
            await self._ensure()  # first start, or Redis came back empty
            return []
        return [(as_text(stream_id), fields) for stream_id, fields in (reply[0][1] if reply else [])]

    def _read_command(self, start: str, block: int | None) -> tuple[Any, ...]:
        blocking = ("BLOCK", block) if block is not None else ()
        return (
            "XREADGROUP",
            "GROUP",
            GROUP,
            self.consumer,
            "COUNT",
            READ_COUNT,
            *blocking,
            "STREAMS",
            self._keys.outbox,
            start,
        )

    async def _ensure(self) -> None:
        try:
            await self._store.call(self._store.redis.xgroup_create, self._keys.outbox, GROUP, id="0", mkstream=True)
        except StoreUnavailable as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def ack_gone(self, stream_id: str) -> None:
        """Acknowledge an entry deleted after another replica delivered it."""
        await self._store.call(self._store.redis.xack, self._keys.outbox, GROUP, stream_id)

    async def keep(self, stream_ids: list[str]) -> None:
        """Re-claim what this replica holds, so no other replica takes it over."""
        if stream_ids:
            await self._store.call(
                self._store.redis.xclaim, self._keys.outbox, GROUP, self.consumer, 0, stream_ids, justid=True
            )

    async def reclaim(self, idle_ms: int, cursor: str) -> tuple[str, list[tuple[str, dict[Any, Any]]]]:
        """Take over entries idle longer than ``idle_ms``; returns the next cursor ("0-0" = done)."""
        reply = await self._store.call(
            self._store.redis.xautoclaim, self._keys.outbox, GROUP, self.consumer, idle_ms, cursor, count=READ_COUNT
        )
        for stream_id in reply[2] if len(reply) > 2 else []:  # deleted meanwhile
            await self.ack_gone(as_text(stream_id))
        return as_text(reply[0]), [(as_text(i), f) for i, f in reply[1]]

    async def prune(self, idle_ms: int) -> int:
        """Forget the consumers that hold nothing and have not read for ``idle_ms`` (replicas gone: each
        pod of each rollout has a name of its own, and the group would keep them all); how many.

        A replica that is only quiet is forgotten too, harmlessly: its next read names it again.
        """
        redis, outbox = self._store.redis, self._keys.outbox
        consumers = await self._store.call(redis.xinfo_consumers, outbox, GROUP)
        gone = [
            as_text(c["name"])
            for c in consumers
            if int(c["pending"]) == 0
            and int(c.get("inactive", c["idle"])) > idle_ms
            and as_text(c["name"]) != self.consumer
        ]
        for name in gone:
            await self._store.call(redis.xgroup_delconsumer, outbox, GROUP, name)
        return len(gone)

    async def replicated(self) -> bool:
        """True once ``NOTIFIER_REDIS_MIN_REPLICAS`` replicas hold all the primary has now (marker, WAIT)."""
        if not self._store.min_replicas:
            return True
        written = await self._store.call_replicated([], self._keys.replicated, self._store.timeout)
        return written.replicas >= self._store.min_replicas

    async def settle(
        self,
        stream_id: str,
        event_id: str,
        dead_reason: str | None = None,
        fields: dict[Any, Any] | None = None,
        posted: Posted | None = None,
        shown: int = 0,
        record: str = "",
        edits: bool = False,
        escalation: Escalate | None = None,
    ) -> bool:
        """Acknowledge and delete an entry, or move it (``fields``) to the dead letters.

        A delivered alert's post records where Slack put it (``posted``) and the
        version of its record it shows, and starts the alert's escalation
        (``escalation``: its first step). False when the entry was already settled
        (another replica delivered it too).
        """
        keys = [
            self._keys.outbox,
            self._keys.dead,
            self._keys.attempts,
            self._keys.stats,
            self._keys.edits,
            record or self._keys.edits,
            self._keys.timers,
        ]
        args: list[Any] = [GROUP, stream_id, event_id]
        if dead_reason:
            args += ["dead", dead_reason, self._max_dead] + [x for kv in (fields or {}).items() for x in kv]
        else:
            args += [
                "delivered",
                posted.channel_id if posted else "",
                posted.ts if posted else "",
                shown if record else 0,
                int(edits),
                escalation.first_step_us if escalation and record else 0,
                escalation.since if escalation else "",
            ]
        return bool(await self._store.run(self._scripts.settle, keys, args))

    async def fold(self, stream_id: str, event_id: str) -> bool:
        """Settle an entry summed up in its channel's folded message (counted as ``folded``)."""
        keys = [self._keys.outbox, self._keys.dead, self._keys.attempts, self._keys.stats]
        keys += [self._keys.edits, self._keys.edits, self._keys.timers]
        return bool(await self._store.run(self._scripts.settle, keys, [GROUP, stream_id, event_id, "folded"]))

    async def backlog(self) -> Backlog:
        """How much waits in the outbox, and for how long."""
        store, keys = self._store, self._keys
        pending = (await store.call(store.redis.xpending, keys.outbox, GROUP))["pending"]
        length, dead = await store.call(store.redis.xlen, keys.outbox), await store.call(store.redis.xlen, keys.dead)
        # Settled entries are deleted, so the stream's first entry is the oldest undelivered one,
        # claimed or not yet read (XPENDING's min would miss a backlog nobody has read).
        first = await store.call(store.redis.xrange, keys.outbox, "-", "+", count=1)
        if not first:
            return Backlog(pending, length, dead, 0.0)
        ms = int(as_text(first[0][0]).split("-")[0])
        now = await store.server_time_us(keys.outbox) / 1e6
        return Backlog(pending, length, dead, max(0.0, now - ms / 1000))

    async def holds(self, stream_id: str) -> bool:
        """True while the outbox still has this entry (not yet delivered nor dead-lettered)."""
        return bool(await self._store.call(self._store.redis.xrange, self._keys.outbox, stream_id, stream_id))

    async def count_attempt(self, event_id: str) -> int:
        """One more failed send of ``event_id``; how many so far."""
        return int(await self._store.call(self._store.redis.hincrby, self._keys.attempts, event_id, 1))


def take(stream_id: str, fields: dict[Any, Any]) -> Taken | str:
    """The entry of a stream entry, or why it cannot be read (no version of the gateway wrote it)."""
    try:
        return Taken(stream_id, decode(fields), fields)
    except (ValueError, KeyError, TypeError) as exc:
        return f"unreadable outbox entry: {type(exc).__name__}: {exc}"
