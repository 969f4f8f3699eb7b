"""Delivery: every replica consumes the shared outbox and posts each entry to Slack.

* One consumer group for the deployment, one consumer per replica (its
  identity, ``NOTIFIER_REPLICA_ID``, defaults to ``host:port``); an entry is
  acknowledged only once Slack confirmed it, so delivery is at least once.
* On start a replica first resumes the entries still pending under its own
  name, then reads new ones.
* Entries a replica holds are re-claimed every ``claim_idle / 3`` so a live
  replica waiting out a long Slack outage keeps them; entries idle longer than
  ``claim_idle`` belonged to a dead replica and are taken over by another.
* Before each send the channel's leaky bucket in Redis hands out the next
  slot, so all replicas together keep ``NOTIFIER_CHANNEL_RATE``; a 429 sets a
  cooldown there that every replica honours.
* After ``delivery_max_attempts`` failed sends, or at once on a permanent
  Slack error, the entry moves to the dead-letter stream with its reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid

from redis.exceptions import RedisError, ResponseError

from .messages import digest_message, event_message
from .metrics import Metrics
from .settings import Settings
from .slack import Message, Permanent, RateLimited, Transient
from .store import Keys, Scripts, as_text, is_embedded, server_time
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

GROUP = "delivery"
READ_COUNT = 32
MAX_HELD = 512  # entries one replica holds at once; the rest wait in the stream for others
STORE_RETRY = 0.5
# Slots are spaced this much wider than the rate: a send that wakes late (a loaded host,
# a slow network) must not land within one window of the next one's on-time send.
SPACING_MARGIN = 1.1
NO_GROUP = ("NOGROUP", "requires the key to exist")  # Redis's wording, the embedded store's


def _decode(fields: dict) -> dict[str, str]:
    return {as_text(k): as_text(v) for k, v in fields.items()}


def backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter."""
    return random.uniform(0, min(cap, base * 2 ** attempt))


class Delivery:
    """The delivery worker of one replica."""

    def __init__(self, client, scripts: Scripts, keys: Keys, settings: Settings, sink,
                 metrics: Metrics) -> None:
        self._client, self._scripts, self._keys = client, scripts, keys
        self._settings, self._sink, self._metrics = settings, sink, metrics
        self._consumer = settings.consumer_name
        self._spacing_us = settings.channel_rate[0].window_ms * 1000 * SPACING_MARGIN / settings.channel_rate[0].count
        self._queues: dict[str, asyncio.Queue] = {}
        self._held: dict[str, dict[str, str]] = {}
        self._sending: set[str] = set()
        self._tasks: list[asyncio.Task] = []
        self._senders: list[asyncio.Task] = []
        self._embedded = is_embedded(client)
        self._stopping = False

    async def start(self) -> None:
        """Spawn the reader, the claim keeper, the reclaimer and the digest clock."""
        idle = self._settings.claim_idle / 1000
        loops = [self._read_loop(),
                 self._every("keeping claims", lambda: idle / 3, self._keep_claims),
                 self._every("reclaiming", lambda: idle / 2 * random.uniform(0.8, 1.2), self._reclaim),
                 self._every("updating gauges", lambda: 2.0, self._update_gauges)]
        if self._settings.digest_interval:
            loops.append(self._every("claiming digests", lambda: random.uniform(0.5, 1.0),
                                     self._claim_digests))
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

    async def _ensure_group(self) -> None:
        try:
            await self._client.xgroup_create(self._keys.outbox, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _read_loop(self) -> None:
        resume_from: str | None = "0"  # first our own pending entries, then new ones
        while True:
            if len(self._held) >= MAX_HELD:
                await asyncio.sleep(0.05)
                continue
            try:
                entries = await self._read(resume_from or ">")
                for entry_id, fields in entries:
                    await self._take(as_text(entry_id), fields)  # may ack a deleted entry
            except (RedisError, OSError) as exc:
                await self._store_trouble("reading the outbox", exc)
                continue
            if resume_from is not None:
                resume_from = entries[-1][0] if len(entries) == READ_COUNT else None
            if not entries and self._embedded:
                await asyncio.sleep(0.05)  # the embedded store cannot block on reads

    async def _read(self, start: str) -> list:
        # Block for half the socket timeout: a block as long as the timeout makes every idle
        # read end in a TimeoutError (and, on a cluster client, a slot-map refresh).
        block = None if self._embedded or start != ">" else max(1, min(1000, self._settings.redis_timeout // 2))
        try:
            reply = await self._client.xreadgroup(GROUP, self._consumer, {self._keys.outbox: start},
                                                  count=READ_COUNT, block=block)
        except ResponseError as exc:
            if not any(marker in str(exc) for marker in NO_GROUP):
                raise
            await self._ensure_group()  # first start, or Redis came back empty
            return []
        return reply[0][1] if reply else []

    async def _take(self, entry_id: str, fields: dict | None) -> None:
        if entry_id in self._held:
            return
        if not fields:  # deleted after another replica delivered it
            await self._client.xack(self._keys.outbox, GROUP, entry_id)
            return
        fields = _decode(fields)
        self._held[entry_id] = fields
        channel = fields["channel"]
        if channel not in self._queues:
            self._queues[channel] = asyncio.Queue()
            self._senders.append(asyncio.create_task(self._send_loop(channel, self._queues[channel])))
        self._queues[channel].put_nowait(entry_id)

    async def _store_trouble(self, doing: str, exc: BaseException, pause: float = STORE_RETRY) -> None:
        self._metrics.store_errors.inc()
        log.warning("store unavailable while %s: %s", doing, exc)
        await asyncio.sleep(pause + random.uniform(0, pause))

    # -- sending ---------------------------------------------------------------

    async def _send_loop(self, channel: str, queue: asyncio.Queue) -> None:
        while True:
            entry_id = await queue.get()
            if self._stopping:
                return  # left pending under our name: a restart resumes it
            self._sending.add(entry_id)
            try:
                await self._deliver(channel, entry_id, self._held[entry_id])
            except Exception:  # noqa: BLE001 - one bad entry must not stop the channel
                # Left pending and no longer kept claimed: reclaimed after claim_idle.
                log.exception("delivering outbox entry %s failed", entry_id)
            finally:
                self._sending.discard(entry_id)
                self._held.pop(entry_id, None)

    async def _deliver(self, channel: str, entry_id: str, fields: dict[str, str]) -> None:
        message = self._message(channel, fields)
        while True:
            await self._wait_for_slot(channel)
            started = time.perf_counter()
            try:
                await self._sink.send(message)
            except RateLimited as exc:
                self._metrics.deliveries.labels("rate_limited").inc()
                await self._cool_down(channel, exc.retry_after)
                continue
            except Transient as exc:
                self._metrics.deliveries.labels("failed").inc()
                attempts = await self._count_attempt(fields["id"])
                if attempts >= self._settings.delivery_max_attempts:
                    await self._settle(entry_id, fields, f"gave up after {attempts} attempts: {exc}")
                    return
                await asyncio.sleep(backoff(attempts))
                continue
            except Permanent as exc:
                await self._settle(entry_id, fields, str(exc))
                return
            finally:
                self._metrics.slack_seconds.observe(time.perf_counter() - started)
            await self._settle(entry_id, fields)
            return

    def _message(self, channel: str, fields: dict[str, str]) -> Message:
        if "digest" in fields:
            words = fields["digest"].split(" ")
            counts = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
            return digest_message(channel, counts, int(fields["since"]), int(fields["until"]))
        return event_message(channel, json.loads(fields["payload"]))

    async def _wait_for_slot(self, channel: str) -> None:
        """Wait for the channel's next slot, then make sure no cooldown began meanwhile.

        Another replica may learn of a 429 while this one sleeps towards a slot
        computed before it; so the cooldown is checked again right before the call.
        The console sink is not Slack: nothing to pace there.
        """
        while self._sink.paced:
            wait_us = await self._next_slot(channel)
            if wait_us > 0:
                await asyncio.sleep(wait_us / 1e6)
            if await self._cooldown_left(channel) <= 0:
                return

    async def _next_slot(self, channel: str) -> int:
        keys = [self._keys.pace(channel), self._keys.cooldown(channel), self._keys.cooldown_all]
        while True:
            try:
                return int(await self._scripts.pace(keys=keys, args=[int(self._spacing_us)]))
            except (RedisError, OSError) as exc:
                await self._store_trouble("pacing", exc)

    async def _cooldown_left(self, channel: str) -> int:
        """Milliseconds left of the channel's or workspace's cooldown; 1 if the store fails."""
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.pttl(self._keys.cooldown(channel))
            pipe.pttl(self._keys.cooldown_all)
            return max(await pipe.execute())
        except (RedisError, OSError) as exc:
            await self._store_trouble("checking the cooldown", exc)
            return 1  # unknown: ask pace.lua again rather than risk a call during a cooldown

    async def _cool_down(self, channel: str, seconds: float) -> None:
        log.warning("Slack rate limited channel %s for %.1fs", channel, seconds)
        await self._store_call(self._client.set, self._keys.cooldown(channel), "1",
                               px=max(1, int(seconds * 1000)))

    async def _count_attempt(self, event_id: str) -> int:
        self._metrics.attempts.inc()
        return int(await self._store_call(self._client.hincrby, self._keys.attempts, event_id, 1))

    async def _settle(self, entry_id: str, fields: dict[str, str], dead_reason: str | None = None) -> None:
        keys = [self._keys.outbox, self._keys.dead, self._keys.attempts, self._keys.stats]
        args = [GROUP, entry_id, fields["id"], "dead" if dead_reason else "delivered"]
        if dead_reason:
            log.error("dead-lettered %s: %s", fields["id"], dead_reason)
            args += [dead_reason] + [x for kv in fields.items() for x in kv]
        acked = await self._store_call(self._scripts.settle, keys=keys, args=args)
        if dead_reason and not acked:
            return  # another replica settled it meanwhile: nothing was dead-lettered
        outcome = "dead_lettered" if dead_reason else ("delivered" if acked else "duplicate")
        self._metrics.deliveries.labels(outcome).inc()
        if not dead_reason and "received_at" in fields.get("payload", ""):
            received = json.loads(fields["payload"]).get("received_at")
            if received:
                self._metrics.delivery_seconds.observe(max(0.0, time.time() - received))

    async def _store_call(self, func, *args, **kwargs):
        """Call the store until it answers: what Slack already took must be recorded."""
        while True:
            try:
                return await func(*args, **kwargs)
            except (RedisError, OSError) as exc:
                await self._store_trouble("recording a delivery", exc)

    # -- keeping and reclaiming entries ----------------------------------------

    async def _every(self, doing: str, pause, step) -> None:
        """Run ``step`` forever, ``pause()`` seconds apart; a failure is logged, never fatal."""
        while True:
            await asyncio.sleep(pause())
            try:
                await step()
            except (RedisError, OSError) as exc:
                await self._store_trouble(doing, exc)
            except Exception:  # noqa: BLE001 - a bug here must not silently stop the loop
                log.exception("%s failed; trying again", doing)

    async def _keep_claims(self) -> None:
        """Re-claim what this replica holds, so no other replica takes it over."""
        held = list(self._held)
        if held:
            await self._client.xclaim(self._keys.outbox, GROUP, self._consumer, 0, held, justid=True)

    async def _reclaim(self) -> None:
        cursor = "0-0"
        while len(self._held) < MAX_HELD:
            reply = await self._client.xautoclaim(self._keys.outbox, GROUP, self._consumer,
                                                  self._settings.claim_idle, cursor, count=READ_COUNT)
            cursor, entries = as_text(reply[0]), reply[1]
            for entry_id, fields in entries:
                log.info("reclaimed %s from a replica that stopped answering", as_text(entry_id))
                self._metrics.deliveries.labels("reclaimed").inc()
                await self._take(as_text(entry_id), fields)
            for entry_id in (reply[2] if len(reply) > 2 else []):
                await self._client.xack(self._keys.outbox, GROUP, entry_id)
            if cursor == "0-0":
                return

    async def _update_gauges(self) -> None:
        summary = await self._client.xpending(self._keys.outbox, GROUP)
        self._metrics.outbox_pending.set(summary["pending"])
        self._metrics.outbox_length.set(await self._client.xlen(self._keys.outbox))
        self._metrics.dead_letters.set(await self._client.xlen(self._keys.dead))
        # Settled entries are deleted, so the stream's first entry is the oldest undelivered one,
        # claimed or not yet read (XPENDING's min would miss a backlog nobody has read).
        first = await self._client.xrange(self._keys.outbox, "-", "+", count=1)
        if first:
            ms = int(as_text(first[0][0]).split("-")[0])
            seconds, micros = await server_time(self._client, self._keys.outbox)
            self._metrics.oldest_pending_seconds.set(max(0.0, seconds + micros / 1e6 - ms / 1000))
        else:
            self._metrics.oldest_pending_seconds.set(0)

    # -- digests ---------------------------------------------------------------

    async def _claim_digests(self) -> None:
        seconds, micros = await server_time(self._client, self._keys.outbox)
        due = await self._client.zrangebyscore(self._keys.digest_due, "-inf", seconds * 1_000_000 + micros)
        for channel in map(as_text, due):
            keys = [self._keys.digest_due, self._keys.suppressed(channel), self._keys.outbox]
            claimed = await self._scripts.digest(keys=keys, args=[channel, "digest-" + uuid.uuid4().hex])
            if claimed:
                self._metrics.digests.inc()
