"""The gateway's own ``ts`` for messages of the front doors, and what each one became.

A client of the Web API door gets a ``ts`` at once, before its message is posted:
a value of the gateway's own, unique in the fleet (``lua/ts.lua``: microseconds of
the store's clock, never given twice), written like Slack's (``"<10 digits>.<6
digits>"``). Each replica takes values in blocks, so one store call serves many
messages; a block older than ``BLOCK_AGE`` seconds is left, so a value stays close
to the time it was given.

The ts's record lives in the store beside message identities (``Keys.sent``), for
``SENT_LIFE_US``: ``note.lua`` who sent it and to which channel, ``admit.lua`` what
became of the message (admitted with its outbox entry, held by a window, or refused
by a level), ``settle.lua`` where Slack put it, ``update.lua`` a client's latest update. So a reply naming the ts
waits for its parent, an update edits it once posted, and both are refused with a
refused parent, on any replica and across restarts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import orjson

from .admission.batch import SENT_LIFE_US
from .destinations.base import Message, Posted
from .outbox import EventEntry
from .slack.as_sent import as_sent
from .store.client import Store, as_text
from .store.keys import Keys
from .store.scripts import Scripts
from .tasks import until_answered

BLOCK = 64  # values one store call gives a replica
BLOCK_AGE = 1.0  # seconds a block is used at most
PARENT_POLL = 0.5  # seconds between two looks at a parent a reply waits for


def ts_text(micros: int) -> str:
    """``1712345678.123456``: a value in microseconds, written as Slack writes a ``ts``."""
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds:010d}.{fraction:06d}"


class Fate(NamedTuple):
    """What became of a message known by a ts (its record), as a reply or an update needs it."""

    known: bool  # False: no record (a real Slack ts, or a gateway ts past its life)
    refused_by: str = ""  # the level that refused it, when it was refused
    posted: Posted | None = None  # where Slack put it, once posted
    entry: str = ""  # its outbox entry's stream id while it waits to be posted
    held: bool = False  # a window held it: it is only told in the window's hand-over
    sender: str = ""  # the token that sent it ("" for a record older than the sender's note)
    channel: str = ""  # the channel it went to, as routed


def fate_of(fields: dict[str, str]) -> Fate:
    """The fate a record's fields tell (an empty record: not known)."""
    if not fields:
        return Fate(False)
    cid, ts = fields.get("cid", ""), fields.get("ts", "")
    posted = Posted(cid, ts) if cid and ts else None
    held, sender, channel = "held" in fields, fields.get("by", ""), fields.get("ch", "")
    return Fate(True, fields.get("r", ""), posted, fields.get("entry", ""), held, sender, channel)


class GatewayTs:
    """Gives gateway ts values and reads and updates the records of front-door messages."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self._next, self._end, self._taken_at = 0, 0, 0.0
        self._lock = asyncio.Lock()

    async def issue(self) -> str:
        """A new gateway ts, unique in the fleet; raises ``StoreUnavailable`` when a block cannot be had."""
        async with self._lock:
            if self._next >= self._end or time.monotonic() - self._taken_at > BLOCK_AGE:
                first = int(as_text(await self._store.run(self._scripts.ts, [self._keys.sent_last], [BLOCK])))
                self._next, self._end, self._taken_at = first, first + BLOCK, time.monotonic()
            value, self._next = self._next, self._next + 1
        return ts_text(value)

    async def own(self, ts: str, sender: str, channel: str) -> None:
        """Note in the record of ``ts``, before its client knows it, that the token ``sender`` sent it to
        ``channel``: a reply goes to that channel, an update is its sender's (``Fate.sender``)."""
        await self._note(ts, "by", sender, "ch", channel)

    async def refused(self, ts: str, level: str) -> None:
        """Record that the message ``ts`` was refused by ``level`` (as its parent was) without reaching
        the limits: a reply to it, or an update of it, is then refused too."""
        await self._note(ts, "r", level)

    async def _note(self, ts: str, *fields: str) -> None:
        await self._store.run(self._scripts.note, [self._keys.sent(ts)], [SENT_LIFE_US // 1000, *fields])

    async def fate(self, ts: str) -> Fate:
        """What became of the message a client knows by ``ts``."""
        raw = await self._store.call(self._store.redis.hgetall, self._keys.sent(ts))
        return fate_of({as_text(k): as_text(v) for k, v in raw.items()})

    async def as_sent(
        self, entry: EventEntry, message: dict[str, Any], queued: Callable[[str], Awaitable[bool]], threads: bool
    ) -> Message:
        """A front-door message as its client sent it, in its parent's thread (see :meth:`thread`)."""
        parent = str(message.get("thread_ts") or "")
        thread = await self.thread(parent, queued, threads) if parent else None
        channel, thread_ts = (thread.channel_id or entry.channel, thread.ts) if thread else (entry.channel, None)
        return as_sent(channel, message, str(entry.event["text"]), thread_ts)

    async def thread(self, parent: str, queued: Callable[[str], Awaitable[bool]], threads: bool) -> Posted | None:
        """Where a reply naming the ``thread_ts`` ``parent`` goes: its parent's channel id and ts in Slack
        (a channel id "" for a real Slack ts: the reply's own channel), or None: a message of its own.

        While the parent waits in the outbox (``queued`` of its entry; any replica may hold it) the
        reply waits for it. A parent that will never be posted (held by a window, dead-lettered,
        past its record's life) or a sink that cannot thread (``threads`` False) leaves the reply
        a message of its own.
        """
        while True:
            fate = await until_answered("reading a record", self.fate, parent)
            if not fate.known:
                return Posted("", parent)  # Slack's own ts: it passes through
            if fate.posted is not None:
                return fate.posted
            if fate.refused_by or fate.held or not fate.entry or not threads:
                return None
            if not await until_answered("looking for a post", queued, fate.entry):
                return None
            await asyncio.sleep(PARENT_POLL)

    async def update(self, ts: str, message: dict[str, Any]) -> str | None:
        """Make ``message`` the latest content of the message ``ts`` (edited once posted, coalesced).

        Returns the refusing level's name when that message was refused (nothing is changed),
        None when the gateway knows no message by ``ts`` (nothing is written), else "".
        """
        keys = [self._keys.sent(ts), self._keys.edits]
        outcome, level = await self._store.run(
            self._scripts.update, keys, [orjson.dumps(message), SENT_LIFE_US // 1000]
        )
        return None if as_text(outcome) == "unknown" else as_text(level)
