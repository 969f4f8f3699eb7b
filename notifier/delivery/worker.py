"""The delivery worker of one replica: read the outbox, hold entries, send them per channel.

* On start a replica first resumes the entries still pending under its own
  name, then reads new ones.
* Each channel has one sender, so at most one send per channel is in flight
  per replica; before each send the channel's slot comes from the fleet's
  leaky bucket (``pacing``). A channel's entries go in admission order (their
  stream ids), entries reclaimed from a dead replica included: they are older
  than what this replica read since, so they go first.
* An alert's post shows its latest state and records where Slack put it, so
  any replica can edit it (``edits``) or reply in its thread; the reply of a
  resolution waits while the alert's post is still in the outbox.
* A replica never posts an entry it knows it posted (``Sent``): a settle whose
  answer was lost, or a read of its own pending entries whose reply was
  overtaken by a settle, brings such an entry back; it is settled again (or,
  if the read was sent before the settle was answered, left alone), not posted.
* 429s are retried after the cooldown and do not count as attempts; 5xx,
  timeouts and broken connections are retried with backoff; after
  ``delivery_max_attempts`` failed sends, or at once on a permanent Slack
  error, the entry moves to the dead letters with its reason.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from ..destinations.base import Posted
from ..destinations.registry import Scoped, Sinks
from ..errors import Permanent, RateLimited, StoreUnavailable, Transient
from ..gateway_ts import GatewayTs
from ..metrics import Metrics
from ..outbox import EscalationEntry, EventEntry
from ..policy import Policy
from ..settings import Settings
from ..slack.templates import Templates
from ..store.client import Store
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..store.secret import ControlKey
from ..tasks import answered_within, cancel_and_wait, every, until_answered
from .channels import Channels
from .compose import Composer
from .digests import Digests
from .edits import Editor, Offer
from .folding import Folder
from .group import READ_COUNT, ConsumerGroup, Taken, first_step, take
from .pacing import Pacer, backoff
from .timers import Timers

log = logging.getLogger(__name__)

MAX_HELD = 512  # entries one replica holds at once; the rest wait in the stream for others
GONE_AFTER_MS = 86_400_000  # a consumer that held nothing and read nothing for a day is a replica gone
MAX_SENT = 4096  # stream ids remembered as sent: more than any read can bring back at once
STORE_ATTEMPTS = 5  # tries of an entry whose steps before the post the store failed (2-4 s): a blip, a failover


class Sent(NamedTuple):
    """What this replica did with an entry it sent (or dead-lettered), to settle it, not send it, again."""

    settled_at: float | None  # time.monotonic() when its settle was answered; None: not yet
    dead_reason: str | None
    posted: Posted | None
    shown: int


class Delivery:
    """The delivery worker of one replica."""

    def __init__(
        self,
        store: Store,
        scripts: Scripts,
        keys: Keys,
        settings: Settings,
        sinks: Sinks,
        metrics: Metrics,
        policy: Callable[[], Policy],
        templates: Templates,
        control_key: ControlKey,
        clicks: bool,
    ) -> None:
        self._store, self._keys, self._settings = store, keys, settings
        self._sinks, self._metrics, self._templates = sinks, metrics, templates
        self._channels = Channels(store, keys, sinks)
        # Block for half the socket timeout: a block as long as the timeout makes every idle
        # read end in a TimeoutError (and, on a cluster client, a slot-map refresh).
        block_ms = None if store.embedded else max(1, min(1000, settings.redis_timeout // 2))
        self._group = ConsumerGroup(store, scripts, keys, settings.consumer_name, block_ms, settings.dead_letters_max)
        self._pacer = Pacer(store, scripts)
        self._digests = Digests(store, scripts, keys)
        self._policy, self._control_key = policy, control_key
        self._offered = Offer(settings.mute_choices, self._controls(sinks, clicks))
        channels = self._channels
        self._editor = Editor(store, scripts, keys, settings.update_rate, channels, metrics, self._offered, templates)
        self._folder = Folder(settings.stale_after / 1000, store, channels, self._pacer, keys, self._group, metrics)
        self._timers = Timers(store, scripts, keys, settings.escalation, policy)  # policy: windows' hand-overs
        threads = GatewayTs(store, scripts, keys)  # where the parents of front-door replies are
        idle_s = settings.claim_idle / 1000
        self._composer = Composer(store, self._group, threads, channels, self._offered, templates, idle_s)
        self._queues: dict[str, asyncio.PriorityQueue[tuple[tuple[int, int], str]]] = {}
        self._held: dict[str, Taken] = {}
        self._sent: OrderedDict[str, Sent] = OrderedDict()  # stream id -> what was done, oldest first
        self._sending: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._senders: list[asyncio.Task[None]] = []
        self._stopping = False
        self._editing = False  # the editor's loop runs (a destination edits its messages)

    def _controls(self, sinks: Sinks, clicks: bool) -> ControlKey | None:
        """The key messages' controls are sealed with; None when no click could reach the gateway."""
        controls = clicks and any(s.edits and s.threads and s.paced for s in sinks)  # a Slack workspace's clicks
        controls = controls and self._policy().mute_target("") is not None  # a tree of the root alone: no mutes
        return self._control_key if controls else None

    def reconfigure(self, sinks: Sinks, clicks: bool) -> None:
        """A reloaded configuration's destinations, from the next message on (entries held meanwhile
        go to the destination their channel names in the new one; see ``destinations.registry``)."""
        self._sinks = self._channels.sinks = sinks
        self._offered.offer(self._controls(sinks, clicks))
        if sinks.any_edits and not self._editing:
            self._editing = True
            self._tasks.append(asyncio.create_task(self._editor.run()))

    async def start(self) -> None:
        """Spawn the reader, the claim keeper, the reclaimer, the gauges and the digest clock."""
        idle = self._settings.claim_idle / 1000
        loops = [
            self._read_loop(),
            every("keeping claims", lambda: idle / 3, lambda: self._group.keep(list(self._held))),
            every("reclaiming", lambda: idle / 2 * random.uniform(0.8, 1.2), self._reclaim),
            every("updating gauges", lambda: 2.0, self._update_gauges),
        ]
        if self._settings.digest_interval:
            loops.append(every("claiming digests", lambda: random.uniform(0.5, 1.0), self._claim_digests))
        self._editing = self._sinks.any_edits
        if self._editing:
            loops.append(self._editor.run())
        loops.append(self._timers.run())
        self._tasks = [asyncio.create_task(loop) for loop in loops]

    async def stop(self, grace: float = 5.0) -> None:
        """Stop reading; let sends in progress finish for ``grace`` seconds; hand back the rest.

        Entries not sent stay pending under this replica's name: a restart with
        the same identity resumes them, otherwise another replica reclaims them.
        """
        self._stopping = True  # senders take no further entry from their queues
        await cancel_and_wait(self._tasks)
        deadline = time.monotonic() + grace
        while self._sending and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await cancel_and_wait(self._senders)

    # -- reading ---------------------------------------------------------------

    async def _read_loop(self) -> None:
        resume_from: str | None = "0"  # first our own pending entries, then new ones
        while True:
            if len(self._held) >= MAX_HELD:
                await asyncio.sleep(0.05)
                continue
            try:
                read_at = time.monotonic()
                read = await self._group.read(resume_from or ">")
                if read is None:  # not yet held by NOTIFIER_REDIS_MIN_REPLICAS replicas: read them again
                    log.info("outbox entries not yet held by enough replicas: not sending them yet")
                    resume_from = "0"
                    await asyncio.sleep(random.uniform(0.05, 0.1))
                    continue
                entries = read
                for stream_id, fields in entries:
                    await self._take(stream_id, fields, read_at)
            except Exception as exc:  # whatever it was, this replica's deliveries must not stop for good
                if isinstance(exc, StoreUnavailable):
                    log.warning("store unavailable while reading the outbox: %s", exc)
                else:
                    log.exception("reading the outbox failed; reading again")
                await asyncio.sleep(0.5 + random.uniform(0, 0.5))
                # A read the store served while its reply was lost left entries pending under
                # this replica's name that it never saw: read its own pending entries again first.
                resume_from = "0"
                continue
            if resume_from is not None:
                resume_from = entries[-1][0] if len(entries) == READ_COUNT else None
            if not entries and self._store.embedded:
                await asyncio.sleep(0.05)  # the embedded store cannot block on reads

    async def _take(self, stream_id: str, fields: dict[Any, Any] | None, read_at: float) -> None:
        """Hold an entry read at ``read_at`` (``time.monotonic()`` when the read was sent) for sending."""
        if stream_id in self._held:
            return
        if not fields:  # deleted after another replica delivered it
            await self._group.ack_gone(stream_id)
            return
        taken = take(stream_id, fields)
        sent = self._sent.get(stream_id)
        if sent is not None and not isinstance(taken, str):
            await self._settle_again(taken, sent, read_at)
            return
        if isinstance(taken, str):
            await self._group.settle(stream_id, stream_id, taken, fields)
            return
        self._held[stream_id] = taken
        channel = taken.entry.channel
        if channel not in self._queues:
            self._queues[channel] = asyncio.PriorityQueue()
            self._senders.append(asyncio.create_task(self._send_loop(self._queues[channel])))
        ms, _, seq = stream_id.partition("-")
        self._queues[channel].put_nowait(((int(ms), int(seq or 0)), stream_id))

    async def _reclaim(self) -> None:
        if await self._group.prune(GONE_AFTER_MS):
            log.info("forgot the delivery consumers idle over %d h with nothing pending", GONE_AFTER_MS // 3_600_000)
        cursor = "0-0"
        while len(self._held) < MAX_HELD:
            read_at = time.monotonic()
            cursor, entries = await self._group.reclaim(self._settings.claim_idle, cursor)
            if entries and not await self._group.replicated():
                return  # claimed, not yet held by enough replicas: taken over again after claim_idle
            for stream_id, fields in entries:
                log.info("reclaimed %s from a replica that stopped answering", stream_id)
                self._metrics.deliveries.labels("reclaimed").inc()
                await self._take(stream_id, fields, read_at)
            if cursor == "0-0":
                return

    # -- sending ---------------------------------------------------------------

    async def _send_loop(self, queue: asyncio.PriorityQueue[tuple[tuple[int, int], str]]) -> None:
        while True:
            _, stream_id = await queue.get()
            if self._stopping:
                return  # left pending under our name: a restart resumes it
            self._sending.add(stream_id)
            try:
                taken = self._held[stream_id]
                # A store failure in _deliver comes before the post (each step after one waits for the store
                # itself): tried again now, not left for claim_idle; bounded, so a refused entry holds no channel.
                delivering = f"delivering {stream_id}"
                if not await answered_within(STORE_ATTEMPTS, delivering, self._deliver, taken):  # stale: fold
                    backlog = await self._folder.fold(taken, queue, self._held)
                    for alert in backlog.posted:  # each alert once, as it stands now
                        await self._deliver(alert, fold=False)
                    for each in (*backlog.posted, *backlog.folded):
                        self._held.pop(each.stream_id, None)
            except Exception:  # one bad entry must not stop the channel
                # Left pending and no longer kept claimed: reclaimed after claim_idle.
                log.exception("delivering outbox entry %s failed", stream_id)
            finally:
                self._sending.discard(stream_id)
                self._held.pop(stream_id, None)

    async def _deliver(self, taken: Taken, fold: bool = True) -> bool:
        """Post an entry (or settle it as failed); False, having done nothing, when it is stale by the time
        it could be posted (``fold``: it is then folded with its channel's backlog)."""
        message, shown = await self._composer.message(taken)
        channel = taken.entry.channel  # the pace is the configured channel's, whatever id a reply names
        sink = self._channels.sink(channel)
        if _shown_by_edit(taken, sink):
            await self._settle(taken)
            return True
        while True:
            if sink.paced:  # the console is not a chat: nothing to pace there
                await self._pacer.wait_for_slot(await self._channels.bucket(channel))
            if fold and await self._folder.stale(taken):
                return False
            if sink.paced and shown:  # an alert's post shows its state as of now, not as of before the wait
                message, shown = await self._composer.message(taken)
            started = time.perf_counter()
            try:
                posted = await sink.post(message)
            except RateLimited as exc:
                self._metrics.deliveries.labels("rate_limited").inc()
                await self._pacer.cool_down(await self._channels.bucket(channel), exc.retry_after)
                await until_answered("noting a pause", self._channels.paused, channel, exc.retry_after)
                continue
            except Transient as exc:
                self._metrics.deliveries.labels("failed").inc()
                self._metrics.attempts.inc()
                attempts = await until_answered("counting an attempt", self._group.count_attempt, taken.entry.id)
                if attempts >= self._settings.delivery_max_attempts:
                    await self._settle(taken, f"gave up after {attempts} attempts: {exc}")
                    return True
                await asyncio.sleep(backoff(attempts))
                continue
            except Permanent as exc:
                if self._templates.refused(taken.entry, message, str(exc)):  # the built-in shape, then
                    message, shown = await self._composer.message(taken)
                    continue
                await self._settle(taken, str(exc))
                return True
            finally:
                self._metrics.slack_seconds.observe(time.perf_counter() - started)
            # Settled first: nothing may come between a post and its settle (an error there would send it twice).
            await self._settle(taken, posted=posted, shown=shown)
            await self._channels.learn(channel, posted)
            if isinstance(taken.entry, EscalationEntry) or (isinstance(taken.entry, EventEntry) and taken.entry.reply):
                self._metrics.replies.inc()
            return True

    async def _settle_again(self, taken: Taken, sent: Sent, read_at: float) -> None:
        """An entry this replica sent came back from a read: settle it, never send it twice.

        A read sent before the settle was answered may list the entry although the
        settle has removed it since: nothing to do. Otherwise the store lost the settle
        (or never got it): settle it now, as it was settled the first time.
        """
        self._metrics.deliveries.labels("not_sent_again").inc()
        if sent.settled_at is not None and sent.settled_at > read_at:
            log.info("%s was listed by a read older than its settle: not sent again", taken.stream_id)
            return
        log.warning("%s came back after it was sent: settling it again, not sending it", taken.stream_id)
        await self._record(taken, sent.dead_reason, sent.posted, sent.shown)

    def _remember(self, stream_id: str, sent: Sent) -> None:
        self._sent[stream_id] = sent
        self._sent.move_to_end(stream_id)
        while len(self._sent) > MAX_SENT:
            self._sent.popitem(last=False)

    async def _settle(
        self, taken: Taken, dead_reason: str | None = None, posted: Posted | None = None, shown: int = 0
    ) -> None:
        if dead_reason:
            log.error("dead-lettered %s: %s", taken.entry.id, dead_reason)
        acked = await self._record(taken, dead_reason, posted, shown)
        if dead_reason and not acked:
            return  # another replica settled it meanwhile: nothing was dead-lettered
        outcome = "dead_lettered" if dead_reason else ("delivered" if acked else "duplicate")
        self._metrics.deliveries.labels(outcome).inc()
        if acked:
            counted = "dead" if dead_reason else "delivered"
            await until_answered("counting a delivery", self._channels.count, taken.entry.channel, counted)
        if not dead_reason and isinstance(taken.entry, (EventEntry, EscalationEntry)):
            self._metrics.delivery_seconds.observe(max(0.0, time.time() - taken.entry.received_at))

    async def _record(self, taken: Taken, dead_reason: str | None, posted: Posted | None, shown: int) -> bool:
        """Settle an entry in the store, remembered as sent before and after; True if this call settled it."""
        self._remember(taken.stream_id, Sent(None, dead_reason, posted, shown))
        entry = taken.entry
        steps = self._settings.escalation
        escalate = first_step(steps, entry) if isinstance(entry, EventEntry) and not dead_reason else None
        record = entry.record if isinstance(entry, EventEntry) and (shown or escalate) else ""
        acked = await until_answered(
            "recording a delivery",
            self._group.settle,
            taken.stream_id,
            taken.entry.id,
            dead_reason,
            taken.fields if dead_reason else None,
            posted,
            shown,
            record,
            self._channels.sink(entry.channel).edits,
            escalate,
        )
        self._remember(taken.stream_id, Sent(time.monotonic(), dead_reason, posted, shown))
        return acked

    # -- gauges and digests ------------------------------------------------------

    async def _update_gauges(self) -> None:
        backlog, metrics = await self._group.backlog(), self._metrics
        metrics.outbox_pending.set(backlog.pending)
        metrics.outbox_length.set(backlog.length)
        metrics.dead_letters.set(backlog.dead)
        metrics.oldest_pending_seconds.set(backlog.oldest_seconds)

    async def _claim_digests(self) -> None:
        claimed = await self._digests.claim_due()
        if claimed:
            self._metrics.digests.inc(claimed)


def _shown_by_edit(taken: Taken, sink: Scoped) -> bool:
    """True for a resolution where the chat edits and has no threads (Discord): the alert's edit shows it."""
    entry = taken.entry
    return isinstance(entry, EventEntry) and entry.reply and not entry.reopened and sink.edits and not sink.threads
