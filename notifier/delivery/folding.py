"""Folding: after an outage, a channel's stale backlog becomes one message, not an hour of replay.

When the entry a channel's sender is about to post is older than ``NOTIFIER_STALE_AFTER``
(it waited through a Slack outage, or behind a long backlog), every event waiting for that
channel and older than that is folded: one message says how many, over which span, counts
per category and severity, and the latest lines. Alerts among them are posted once each, in
their current state (the post of their record renders it: still firing, or resolved); their
other entries (repeats that reopened, a resolution whose alert is posted now) are folded.
Each folded entry is settled as ``folded`` (``settle.lua``), so ``/v1/stats`` keeps
``accepted = delivered + folded + dead_lettered + waiting``.

Only events fold; digests, hand-overs, windows' messages and escalation steps keep their
own. The folded message is posted before its entries are settled: a crash between the two
folds them again elsewhere (at least once, as every delivery).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import NamedTuple

from ..destinations.base import Message
from ..errors import Permanent, RateLimited, StoreUnavailable, Transient
from ..metrics import Metrics
from ..outbox import EventEntry
from ..slack.messages import BLOCKS, SECTION_TEXT, context, fit, fit_text, section
from ..slack.views import note_view
from ..store.client import Store
from ..store.keys import Keys
from ..tasks import until_answered
from .channels import Channels
from .group import ConsumerGroup, Taken
from .pacing import Pacer, backoff

log = logging.getLogger(__name__)
Queue = asyncio.PriorityQueue[tuple[tuple[int, int], str]]

LATEST = 5  # lines of the latest folded events the message quotes
LINE = 200  # characters of one quoted line
NAMED = 20  # categories named one by one; the rest are summed


class Backlog(NamedTuple):
    """A channel's stale entries, sorted: the ones posted now (an alert each), the ones folded."""

    posted: list[Taken]
    folded: list[Taken]


class Folder:
    """Folds a channel's stale backlog: takes it out of the channel's queue, posts its folded message
    (paced like any post), settles each entry as folded, and answers the alerts to post on their own."""

    def __init__(
        self,
        stale_after_s: float,
        store: Store,
        channels: Channels,
        pacer: Pacer,
        keys: Keys,
        group: ConsumerGroup,
        metrics: Metrics,
    ) -> None:
        self.stale_after_s, self._store = stale_after_s, store
        self._channels, self._pacer, self._keys, self._group, self._metrics = channels, pacer, keys, group, metrics

    async def stale(self, taken: Taken) -> bool:
        """True for an event that waited too long, by the store's clock (the fleet's one clock: a replica
        whose own clock is off folds nothing it should not); False while that clock cannot be read."""
        if not self.stale_after_s or not isinstance(taken.entry, EventEntry):
            return False
        return is_stale(taken, self.stale_after_s, await self._now_ms())

    async def _now_ms(self) -> float:
        store = self._store
        try:
            if not store.clock_known:
                await store.sync_clock(self._keys.outbox)
        except StoreUnavailable:
            return 0.0  # nothing is stale at time 0
        return store.store_time_us(time.monotonic()) / 1000

    def take_stale(self, queue: Queue, held: dict[str, Taken], now_ms: float) -> list[Taken]:
        """The stale entries waiting in ``queue``, taken out of it (the others are put back)."""
        stale, kept = [], []
        while not queue.empty():
            item = queue.get_nowait()
            taken = held.get(item[1])
            if taken is not None and is_stale(taken, self.stale_after_s, now_ms):
                stale.append(taken)
            else:
                kept.append(item)
        for item in kept:
            queue.put_nowait(item)
        return stale

    async def fold(self, first: Taken, queue: Queue, held: dict[str, Taken]) -> Backlog:
        """Fold ``first`` and the stale entries of its channel's ``queue``: post their folded message and
        settle what it sums up. Answers them all, sorted: the alerts to post now, the ones folded.

        While Slack does not take the folded message, entries that turn stale meanwhile join it, so an
        outage ends in one message. One Slack refuses for good leaves every entry to be posted (and
        dead-lettered) on its own, as without folding (all of them answered as to post).
        """
        stale, attempts = [first], 0
        channel = first.entry.channel
        sink = self._channels.sink(channel)
        while True:
            stale += self.take_stale(queue, held, await self._now_ms())
            backlog = sort_backlog(stale)
            if not backlog.folded:
                return backlog
            if sink.paced:
                await self._pacer.wait_for_slot(await self._channels.bucket(channel))
            try:
                await sink.post(folded_message(channel, backlog.folded, len(backlog.posted)))
                break
            except RateLimited as exc:
                await self._pacer.cool_down(await self._channels.bucket(channel), exc.retry_after)
            except Transient as exc:
                attempts += 1
                log.warning("the folded message of %s was not taken (%s); trying again", channel, exc)
                await asyncio.sleep(backoff(attempts))
            except Permanent as exc:
                log.error("the folded message of %s was refused (%s): posting each entry", channel, exc)
                return Backlog(stale, [])
        await self._settle(backlog.folded)
        log.info("folded %d stale entries of %s into one message", len(backlog.folded), channel)
        return backlog

    async def _settle(self, folded: list[Taken]) -> None:
        for taken in folded:
            if await until_answered("folding an entry", self._group.fold, taken.stream_id, taken.entry.id):
                self._metrics.deliveries.labels("folded").inc()
                self._metrics.decisions.count_folded(getattr(taken.entry, "category", ""))


def is_stale(taken: Taken, stale_after_s: float, now_ms: float) -> bool:
    """True for an event that waited longer than ``stale_after_s`` (0: never) at ``now_ms``, the store's
    clock: its outbox entry's id is the store's time when it was admitted."""
    if not stale_after_s or not isinstance(taken.entry, EventEntry):
        return False
    return now_ms - admitted_ms(taken) > stale_after_s * 1000


def admitted_ms(taken: Taken) -> int:
    """When an entry was admitted: its stream id's first part, the store's clock in ms."""
    return int(taken.stream_id.partition("-")[0])


def sort_backlog(stale: list[Taken]) -> Backlog:
    """One entry to post per alert (its post if waiting, else its latest entry); everything else folds."""
    kept: dict[str, Taken] = {}
    folded: list[Taken] = []
    for taken in stale:
        entry = taken.entry
        if not isinstance(entry, EventEntry) or not entry.record or entry.message is not None:
            folded.append(taken)
            continue
        before = kept.get(entry.record)
        if before is None or (_is_reply(before) and not _is_reply(taken)):
            kept[entry.record] = taken
            folded += [before] if before is not None else []
        else:
            folded.append(taken)
    return Backlog(list(kept.values()), folded)


def _is_reply(taken: Taken) -> bool:
    return isinstance(taken.entry, EventEntry) and taken.entry.reply


def folded_message(channel: str, folded: list[Taken], posted: int) -> Message:
    """``Folded 43 messages from 14:02 to 14:41 UTC``: counts per category and severity, the latest lines."""
    entries = [t.entry for t in folded if isinstance(t.entry, EventEntry)]
    first, last = min(map(admitted_ms, folded)) / 1000, max(map(admitted_ms, folded)) / 1000
    head = (
        f":package: *Folded {len(entries)} {'message' if len(entries) == 1 else 'messages'}* that waited "
        f"from {_clock(first)} to {_clock(last)} UTC (posting them one by one would bury what matters now)"
        + (f"; {posted} {'alert is' if posted == 1 else 'alerts are'} shown on {'its' if posted == 1 else 'their'}"
           " own, as they stand now" if posted else "")
    )  # fmt: skip
    counts, latest = _counts(entries), _latest_lines(folded)
    blocks = [
        section(fit(head, SECTION_TEXT)),
        context(counts),
        section(fit("Latest:\n" + "\n".join(latest), SECTION_TEXT)),
    ]
    text = fit_text(f"Folded {len(entries)} messages from {_clock(first)} to {_clock(last)} UTC")
    # The view: the same sentence without Slack's bold and emoji; the counts; the latest lines, one each.
    view = note_view(head.replace(":package: ", "").replace("*", ""), counts, [fit(line, LINE * 2) for line in latest])
    return Message(channel, text, blocks[:BLOCKS], view=view)


def _counts(entries: list[EventEntry]) -> str:
    categories = Counter(e.category for e in entries).most_common()
    severities = Counter(str(e.event.get("severity") or "info") for e in entries).most_common()
    named = ", ".join(f"{c} {n}" for c, n in categories[:NAMED])
    rest = sum(n for _, n in categories[NAMED:])
    named += f", and {len(categories) - NAMED} more categories: {rest}" if rest else ""
    by_severity = ", ".join(f"{s} {n}" for s, n in severities)
    return fit(f"By category: {named}. By severity: {by_severity}.", SECTION_TEXT)  # escaped by fit


def _latest_lines(folded: list[Taken]) -> list[str]:
    """The latest folded events, one line each (raw: ``fit`` escapes them, so no event mentions anyone)."""
    latest = sorted(folded, key=admitted_ms)[-LATEST:]
    return [f"{_clock(admitted_ms(t) / 1000)} {_line(t)}" for t in latest]


def _line(taken: Taken) -> str:
    entry = taken.entry
    return f"{entry.category}: {str(entry.event.get('text', ''))[:LINE]}" if isinstance(entry, EventEntry) else ""


def _clock(at: float) -> str:
    return time.strftime("%H:%M", time.gmtime(at))
