"""Dead letters: outbox entries Slack refused for good or that failed too often.

They wait in a stream of their own with their reason. ``requeue.lua`` moves all
of them, or the given ones, back into the outbox in one atomic step, where they
are delivered as new. A requeue is recorded in the audit log here, where it is applied.
"""

from __future__ import annotations

from typing import Any

from ..outbox import EventEntry, decode
from ..store.audit import Audit, Change
from ..store.client import Store, as_text
from ..store.keys import Keys, Stat
from ..store.scripts import Scripts

MAX_LIST = 1000
AUDITED_IDS = 100  # event ids an audit entry names, at most (the count says how many moved)
# delivered_again: settled a second time, after a crash or a reclaim (a duplicate in Slack)
COUNTERS = (Stat.DELIVERED, Stat.DELIVERED_AGAIN, Stat.DEAD_LETTERED, Stat.REQUEUED)


class DeadLetters:
    """The dead-letter stream of one deployment."""

    def __init__(self, store: Store, scripts: Scripts, keys: Keys, audit: Audit) -> None:
        self._store, self._scripts, self._keys, self._audit = store, scripts, keys, audit

    async def count(self) -> int:
        return int(await self._store.call(self._store.redis.xlen, self._keys.dead))

    async def oldest(self, limit: int = MAX_LIST) -> list[dict[str, Any]]:
        """The oldest ``limit`` dead letters: event id, category, channel, reason, when, and an event's text."""
        entries = await self._store.call(self._store.redis.xrange, self._keys.dead, "-", "+", count=limit)
        return [_shown(as_text(dead_id), fields) for dead_id, fields in entries]

    async def requeue(self, ids: list[str] | None, by: str, via: str = "api") -> list[str]:
        """Move dead letters (all, or those with these event ids) back into the outbox."""
        keys = [self._keys.outbox, self._keys.dead, self._keys.stats]
        moved = [as_text(event_id) for event_id in await self._store.run(self._scripts.requeue, keys, list(ids or []))]
        if moved:  # a requeue that moved nothing changed nothing
            target = {"dead_letters": len(moved), "asked": "all" if ids is None else len(ids)}
            await self._audit.record(Change("requeue", target, by, via, after={"ids": moved[:AUDITED_IDS]}))
        return moved

    async def counters(self) -> dict[str, int]:
        """Fleet-wide delivery counters from the stats hash (``/v1/stats`` shows only some)."""
        values = await self._store.call(self._store.redis.hmget, self._keys.stats, COUNTERS)
        return {name: int(value or 0) for name, value in zip(COUNTERS, values, strict=True)}


def _shown(dead_id: str, fields: dict[Any, Any]) -> dict[str, Any]:
    text = {as_text(k): as_text(v) for k, v in fields.items()}
    item: dict[str, Any] = {"id": text.get("id", ""), "category": "", "channel": "", "reason": text.get("reason", "")}
    try:
        entry = decode(fields)
    except (ValueError, KeyError, TypeError):
        pass  # unreadable: shown with its reason alone
    else:
        item.update(id=entry.id, channel=entry.channel, category=getattr(entry, "category", ""))
        if isinstance(entry, EventEntry):  # what was not delivered, for the operator deciding to requeue
            item["text"] = str(entry.event.get("text", ""))
    item["dead_id"] = dead_id
    item["dead_at_ms"] = int(dead_id.split("-")[0])
    return item
