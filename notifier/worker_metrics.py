"""A worker's counts where every worker's ``/metrics`` reads them (``notifier serve --workers N``).

prometheus_client's multiprocess mode writes the value of each counter, histogram and gauge in
files of ``PROMETHEUS_MULTIPROC_DIR`` (the parent makes the folder), and the worker that answers
a scrape sums them (``metrics.Metrics.scraped``). Two kinds of values are not such metrics: the
decisions, counted in plain ints because every request of a storm passes there
(``metrics.Decisions``), and the store client's failures and failovers. A worker adds them to
counters of the same names, in the shared files, every ``SHARE_EVERY`` seconds, before it answers
a scrape, and once more after it has stopped: a scrape shows the counts of the worker answering as
they are, those of the others as they were at most ``SHARE_EVERY`` ago.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import Counter, Histogram

from .http.state import METRICS
from .metrics import ADMISSION_BUCKETS, ADMISSION_HELP, COUNTED, Metrics
from .tasks import cancel_and_wait, every

SHARE_EVERY = 1.0  # seconds


class Shared:
    """The counters a worker writes its plain counts to, under the names a single process shows."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._counted = {name: Counter(name, text, labels, registry=None) for name, (text, labels) in COUNTED.items()}
        self._admission = Histogram(
            "notifier_admission_seconds", ADMISSION_HELP, buckets=ADMISSION_BUCKETS, registry=None
        )
        self._store_errors = Counter("notifier_store_errors", "Calls to the store that failed", registry=None)
        self._failovers = Counter("notifier_store_failovers", "Times the Sentinels named a new primary", registry=None)
        self._store_seen = (0, 0)  # the store client's counts already written

    def share(self) -> None:
        """Write the counts since the last call to the shared files."""
        decisions = self._metrics.decisions
        for name, labels, count in decisions.samples():
            self._counted[name].labels(*labels).inc(count)
        # The histogram's values are its buckets' own counts (not cumulative) and its sum, as
        # observe() writes them: the counts of Decisions are the same, already bucketed.
        for value, count in zip(self._admission._buckets, decisions.buckets, strict=True):
            if count:
                value.inc(count)
        self._admission._sum.inc(decisions.seconds)
        decisions.reset()
        failures, failovers = self._metrics.store_counts()
        self._store_errors.inc(failures - self._store_seen[0])
        self._failovers.inc(failovers - self._store_seen[1])
        self._store_seen = (failures, failovers)
        self._metrics.socket_mode_connected.set(1.0 if self._metrics.socket_mode_open() else 0.0)


def share_counts(app: web.Application) -> None:
    """With workers, share the app's plain counts: first set up, so last torn down (after delivery stopped)."""
    metrics = app[METRICS]
    if not metrics.shared:
        return
    shared = Shared(metrics)
    metrics.before_scrape = shared.share

    async def step() -> None:
        shared.share()

    async def sharing(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(every("sharing the counts with the other workers", lambda: SHARE_EVERY, step))
        yield
        await cancel_and_wait([task])
        shared.share()

    app.cleanup_ctx.insert(0, sharing)
