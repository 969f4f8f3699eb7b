"""Edits of posted messages: an alert's repeats and resolution, a mute from Slack.

Each message that needs an edit is one entry of a queue in the store
(``lua/edits.lua``), so edits coalesce: however often an alert repeats while its
edit waits, one edit shows its latest state. Every replica's edits take a slot
of one budget in the store (``NOTIFIER_UPDATE_RATE``, a leaky bucket like a
channel's pace), because Slack limits ``chat.update`` per workspace; a 429 on an
edit stops every replica's edits for its ``Retry-After``. A message Slack no
longer knows is dropped (counted), never retried.

The message is rendered from its record when the edit is made:
an alert's record holds its first event and what changed since (repeats,
resolution, a mute banner); a message clicked in Slack has a record of its own,
made from the message as Slack showed it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import orjson

from ..destinations.base import Message, Posted
from ..errors import MessageGone, Permanent, RateLimited, Transient
from ..metrics import Metrics
from ..outbox import EventEntry, decode
from ..rules import Rules
from ..slack.as_sent import as_updated
from ..slack.controls import ACK, MUTE, NO_CONTROLS, UNACK, Offered
from ..slack.messages import (
    MessageState,
    acknowledged_line,
    edited_message,
    escape,
)
from ..slack.templates import Templates
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..store.secret import ControlKey
from ..tasks import until_answered
from .channels import Channels
from .pacing import Bucket, Pacer, backoff

log = logging.getLogger(__name__)

POLL = 0.25  # seconds between two looks at an empty queue
LEASE_MS = 30_000  # how long a claimed edit is this replica's (a Slack call times out after 10 s)
RETRY_MS = 2_000  # a failed edit (5xx, timeout) is tried again after this, and up to 30 s


@dataclass(frozen=True)
class Record:
    """A message's record, as read from the store."""

    key: str
    fields: Mapping[str, str]

    @property
    def posted(self) -> Posted | None:
        """Where the message is in Slack, once it was posted."""
        cid, ts = self.fields.get("cid"), self.fields.get("ts")
        return Posted(cid, ts) if cid and ts else None

    @property
    def version(self) -> int:
        return int(self.fields.get("ver", 0))

    @property
    def open(self) -> bool:
        """An alert firing, not resolved (within its window, since the record exists)."""
        return self.fields.get("fired") == "1" and self.fields.get("resolved") != "1" and "e" in self.fields

    @property
    def acknowledged_by(self) -> str | None:
        """Who acknowledged the alert, as the API shows it (``<@U1>``, a name or the author)."""
        return self.fields.get("ack_by") or None

    @property
    def acknowledged_via(self) -> str | None:
        """Where the acknowledgement came from: ``slack``, ``api``, ``console`` or ``cli``."""
        return self.fields.get("ack_src") or None if self.acknowledged_by else None

    @property
    def acknowledged_at_us(self) -> int | None:
        at = self.fields.get("ack_at")
        return int(at) if at else None

    def acknowledged_line(self) -> str:
        """The message's line for the acknowledgement: a click's mention as is, any other name escaped."""
        by, at = self.acknowledged_by, self.acknowledged_at_us
        if by is None or at is None:
            return ""
        return acknowledged_line(by if self.fields.get("ack_src") == "slack" else escape(by), at)

    @property
    def event_entry(self) -> EventEntry | None:
        """The alert's first event (None for a record of a clicked message)."""
        entry = decode(self.fields) if "e" in self.fields else None
        return entry if isinstance(entry, EventEntry) else None

    def state(self, offered: Offered) -> MessageState:
        """Repeats, resolution and banner, and the controls the message should carry.

        ``offered``: the mute durations the gateway offers and the key sealing them; none
        when its messages carry no controls (no signing secret, or a sink that cannot edit).
        """
        fields, choices = self.fields, offered.choices
        button = fields.get("button") or MUTE
        return MessageState(
            seen=int(fields.get("n", 1)),
            last_us=int(fields.get("last", 0)),
            resolved=fields.get("resolved") == "1",
            banner=fields.get("banner", ""),
            button=button if choices else "",
            record=self.key if "e" in fields else "",
            choices=choices,
            reopened=int(fields.get("reopened", 0)),
            acknowledged=self.acknowledged_line(),
            ack=(UNACK if self.acknowledged_by else ACK) if choices and self.open else "",
            key=offered.key,
        )

    async def message(self, offered: Offered, templates: Templates) -> Message | None:
        """The message as it should read now, or None when the record cannot say (``offered``: see :meth:`state`).

        An alert's message is made again from its first event, in its template's shape.
        """
        posted, entry = self.posted, self.event_entry
        if posted is None:
            return None
        if "m" in self.fields:  # a front-door client's update of its message: as sent
            return as_updated(posted.channel_id, orjson.loads(self.fields["m"]))
        if entry is not None:
            return await templates.message(entry, posted.channel_id, self.state(offered))
        base = json.loads(self.fields.get("base", "[]"))
        category = self.fields.get("category", "")
        return edited_message(posted.channel_id, base, self.fields.get("text", ""), self.state(offered), category)


async def post_of(store: Store, entry: EventEntry, offered: Offered, templates: Templates) -> tuple[Message, int]:
    """An event's post, and the version of its alert's record it shows (0: not an alert, or its record is gone).

    An alert's post shows the state its record holds now (``offered``: see :meth:`Record.state`).
    """
    record = await until_answered("reading a record", read_record, store, entry.record) if entry.record else None
    if record is None or record.fields.get("id") != entry.id:
        state = MessageState(button=MUTE if offered.choices else "", choices=offered.choices, key=offered.key)
        return await templates.message(entry, entry.channel, state), 0
    return await templates.message(entry, entry.channel, record.state(offered)), record.version


async def read_record(store: Store, key: str) -> Record | None:
    """The record at ``key``, or None when it is gone (expired with its window)."""
    raw = await store.call(store.redis.hgetall, key)
    return Record(key, {as_text(k): as_text(v) for k, v in raw.items()}) if raw else None


class Offer:
    """The controls messages carry now: the mute choices, sealed with the fleet's key (read when first needed)."""

    def __init__(self, choices: tuple[str, ...], key: ControlKey | None) -> None:
        self._choices, self._key = choices, key

    def offer(self, key: ControlKey | None) -> None:
        """Controls sealed with ``key`` from now on (None: none), as a reloaded configuration says."""
        self._key = key

    async def __call__(self) -> Offered:
        if self._key is None:  # messages carry no controls
            return NO_CONTROLS
        return Offered(self._choices, await until_answered("reading the control key", self._key.get))


class Editor:
    """Makes the edits that are due, within the fleet's edit budget."""

    def __init__(
        self,
        store: Store,
        scripts: Scripts,
        keys: Keys,
        update_rate: Rules,
        channels: Channels,
        metrics: Metrics,
        offered: Callable[[], Awaitable[Offered]],
        templates: Templates,
    ) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self._channels, self._metrics, self._offered = channels, metrics, offered
        self._templates, self._update_rate = templates, update_rate
        self._pacer = Pacer(store, scripts)
        # The fleet's edit budget; among several destinations each has its own (taken once an edit is claimed).
        self._bucket = Bucket(keys.update_pace, keys.update_cooldown, keys.cooldown_all, update_rate)
        self._failures: dict[str, int] = {}

    async def run(self) -> None:
        """Edit whatever is due, forever."""
        while True:
            if not await until_answered("looking for edits", self._any_due):
                await asyncio.sleep(POLL)
                continue
            # Every sink's edits keep the budget, the console's too: it shows what Slack would
            # (in an alert storm each flush of repeats makes every alert's edit due again; unpaced,
            # the console printed ~75 edits a second, and bench/storm.py's 50-alert storm ran at
            # 0.94 of the bare app with the editor stopped against 0.89: bench/RESULTS.md).
            if not self._channels.sinks.named:
                self._metrics.edit_wait.observe(await self._pacer.wait_for_slot(self._bucket))
            key = await until_answered("claiming an edit", self._claim)
            if key is not None:
                await self._edit(key)

    async def _any_due(self) -> bool:
        if not self._store.clock_known:
            await self._store.sync_clock(self._keys.edits)
        now_us = self._store.store_time_us(time.monotonic())
        return bool(await self._store.call(self._store.redis.zcount, self._keys.edits, "-inf", now_us))

    async def _claim(self) -> str | None:
        key = await self._store.run(
            self._scripts.edits, [self._keys.edits, self._keys.edits_claimed], ["claim", LEASE_MS]
        )
        return as_text(key) if key else None

    async def _edit(self, key: str) -> None:
        record = await until_answered("reading a record", read_record, self._store, key)
        message = await record.message(await self._offered(), self._templates) if record else None
        if record is None or message is None or record.posted is None:
            await self._done(key, "drop")
            return
        bucket = self._bucket
        if self._channels.sinks.named:
            bucket = await self._channels.edit_bucket(record.posted, self._update_rate)
            self._metrics.edit_wait.observe(await self._pacer.wait_for_slot(bucket))
        try:
            await self._channels.sinks.update(record.posted, message)
        except RateLimited as exc:
            self._metrics.edits.labels("rate_limited").inc()
            await self._pacer.cool_down(bucket, exc.retry_after)
            await self._done(key, "retry", 0)
        except MessageGone as exc:
            self._metrics.edits.labels("gone").inc()
            log.warning("edit of %s dropped: Slack no longer knows the message (%s)", key, exc)
            await self._done(key, "drop")
        except Transient as exc:
            self._metrics.edits.labels("failed").inc()
            attempts = self._failures[key] = self._failures.get(key, 0) + 1
            log.warning("edit of %s failed (%s); trying again", key, exc)
            await self._done(key, "retry", backoff(attempts, RETRY_MS, 30_000))
        except Permanent as exc:
            self._metrics.edits.labels("refused").inc()
            log.error("edit of %s refused by Slack: %s", key, exc)
            await self._done(key, "drop")
        else:
            self._metrics.edits.labels("edited").inc()
            self._failures.pop(key, None)
            await self._done(key, "shown", record.version)

    async def _done(self, key: str, outcome: str, value: float = 0) -> None:
        keys = [self._keys.edits, self._keys.edits_claimed, key]
        await until_answered(
            "recording an edit", self._store.run, self._scripts.edits, keys, ["done", outcome, int(value)]
        )
        if outcome != "retry":
            self._failures.pop(key, None)
