"""The message each outbox entry is posted as: digests, hand-overs, windows, escalations, alerts and replies.

An alert's post shows its record's latest state (``edits.post_of``); a resolution or an
escalation goes in the thread of its alert's message where the destination threads
(``thread_ts``), and is a message of its own elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..destinations.base import Message
from ..gateway_ts import GatewayTs
from ..outbox import DigestEntry, EscalationEntry, EventEntry, HeldEntry, WindowEntry
from ..slack.controls import Offered
from ..slack.messages import digest_message, escalation_message, held_message, reply_message, window_message
from ..slack.templates import Templates
from ..store.client import Store
from ..tasks import until_answered
from .channels import Channels
from .edits import post_of, read_record
from .group import ConsumerGroup, Taken

REPLY_POLL = 0.5  # seconds between two looks at an alert whose post a resolution waits for


class Composer:
    """Builds the message of an entry, as the destination of its channel takes it."""

    def __init__(
        self,
        store: Store,
        group: ConsumerGroup,
        threads: GatewayTs,
        channels: Channels,
        offered: Callable[[], Awaitable[Offered]],
        templates: Templates,
        claim_idle_s: float,
    ) -> None:
        self._store, self._group, self._threads, self._channels = store, group, threads, channels
        self._offered, self._templates, self._claim_idle_s = offered, templates, claim_idle_s

    async def message(self, taken: Taken) -> tuple[Message, int]:
        """The message of an entry, and the version of its alert's record it shows (0: none)."""
        entry = taken.entry
        if isinstance(entry, DigestEntry):
            return digest_message(entry), 0
        if isinstance(entry, HeldEntry):
            return held_message(entry), 0
        if isinstance(entry, WindowEntry):
            return window_message(entry), 0
        if isinstance(entry, EscalationEntry):
            return await self._escalation(entry), 0
        if entry.message is not None:  # a front-door client's message: as sent, in its parent's thread
            threads = self._channels.sink(entry.channel).threads
            return await self._threads.as_sent(entry, entry.message, self._group.holds, threads), 1
        event = {**entry.event, "category": entry.category}
        if entry.reply:
            return await self._resolution(entry, event), 0
        return await post_of(self._store, entry, await self._offered(), self._templates)

    async def _resolution(self, entry: EventEntry, event: dict[str, Any]) -> Message:
        """A resolution's reply, in the thread of its alert's message once that is posted.

        While the alert's post is still in the outbox (any replica may hold it),
        the reply waits for it; if it will never be posted (gone, dead-lettered,
        or not within ``claim_idle``), or the sink cannot thread, the resolution
        is a message of its own.
        """
        give_up = time.monotonic() + self._claim_idle_s
        while self._channels.sink(entry.channel).threads:
            record = await until_answered("reading a record", read_record, self._store, entry.record)
            posted = record.posted if record else None
            if posted is not None and posted.ts:
                return reply_message(posted.channel_id, posted.ts, event, entry.reopened)
            stream_id = record.fields.get("entry", "") if record else ""
            waiting = bool(stream_id) and await until_answered("looking for a post", self._group.holds, stream_id)
            if not waiting or time.monotonic() > give_up:
                break
            await asyncio.sleep(REPLY_POLL)
        return reply_message(entry.channel, None, event, entry.reopened)

    async def _escalation(self, entry: EscalationEntry) -> Message:
        """An escalation step, in the thread of its alert's message (on its own through a webhook)."""
        record = await until_answered("reading a record", read_record, self._store, entry.record)
        posted = record.posted if record and self._channels.sink(entry.channel).threads else None
        alert = record.event_entry if record else None
        event = {**alert.event, "category": alert.category} if alert else None
        if posted is not None and posted.ts:
            return escalation_message(posted.channel_id, posted.ts, entry.text, event)
        return escalation_message(entry.channel, None, entry.text, event)
