"""Prometheus metrics of one replica, in a registry of its own."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .models import Outcome

OTHER = "(other)"  # the label of categories past the cap: no category can have this name
ADMISSION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
FIRST_BUCKET = ADMISSION_BUCKETS[0]


class Decisions(Collector):
    """``notifier_events_total`` and ``notifier_admission_seconds``, counted in plain ints.

    Every request of an alert storm is counted here, so this is the cheap path:
    a dict and a list, no locks (one event loop), turned into Prometheus
    samples only when ``/metrics`` is scraped.

    Categories come from clients: past ``max_categories`` label values (None: no
    cap, ``NOTIFIER_CATEGORIES`` bounds them), the rest are counted under
    ``(other)``, so the totals stay exact and the scrape stays bounded.
    """

    def __init__(self, registry: CollectorRegistry, max_categories: int | None = None) -> None:
        self.events: dict[tuple[str, Outcome, str], int] = {}  # (category, outcome, level) -> events
        self.critical: dict[tuple[str, Outcome, str], int] = {}  # the events counted above of severity critical
        self.classes: Classes | None = None  # with reserves: how to tell an event's class
        self.buckets = [0] * (len(ADMISSION_BUCKETS) + 1)  # the last one is +Inf
        self.seconds = 0.0
        self._named: set[str] = set()
        self._cap = max_categories
        registry.register(self)

    def label(self, category: str) -> str:
        """The label value of ``category``: itself, or ``(other)`` past the cap."""
        if category in self._named:
            return category
        if self._cap is None or len(self._named) < self._cap:
            self._named.add(category)
            return category
        return OTHER

    def count(self, category: str, outcome: Outcome, level: str, seconds: float) -> None:
        """Count one decided event and the time it took to decide."""
        key = (category, outcome, level)
        count = self.events.get(key)  # a plain dict: half a Counter's cost
        if count is None:  # a new label set: within the cap?
            key = (self.label(category), outcome, level)
            count = self.events.get(key, 0)
        self.events[key] = count + 1
        # A decision made on the replica takes a microsecond or two: the first bucket, without a search.
        self.buckets[0 if seconds <= FIRST_BUCKET else bisect.bisect_left(ADMISSION_BUCKETS, seconds)] += 1
        self.seconds += seconds

    def count_critical(self, category: str, outcome: Outcome, level: str) -> None:
        """Count, besides :meth:`count`, one decided event of severity critical (its class may differ)."""
        key = (self.label(category), outcome, level)
        self.critical[key] = self.critical.get(key, 0) + 1

    def classes_of(self, classes: Classes) -> None:
        """Count per class of the global level too; its categories are named, whatever the cap."""
        self.classes = classes
        self._named.update(classes.categories)

    def _by_class(self) -> dict[tuple[str, str], int]:
        """Decisions per class and outcome label, from the counts per category (at scrape time: a
        storm's requests pay nothing for it but the check for severity critical)."""
        counts: dict[tuple[str, str], int] = {}
        if self.classes is None:
            return counts
        for (category, outcome, level), count in self.events.items():
            if outcome is Outcome.DUPLICATE or outcome is Outcome.RESOLVED:
                continue
            critical = self.critical.get((category, outcome, level), 0)
            for severity, n in (("info", count - critical), ("critical", critical)):
                if n:
                    key = (self.classes.name_of(category, severity), outcome_label(outcome, level))
                    counts[key] = counts.get(key, 0) + n
        return counts

    def collect(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "notifier_events",
            "Events decided, by category and outcome "
            "(accepted, dropped_global, dropped_category; shadow_* in shadow mode)",
            labels=["category", "outcome"],
        )
        # A duplicate or a resolution is neither admitted nor dropped: the contract keeps them
        # out of notifier_events.
        apart = {
            Outcome.DUPLICATE: CounterMetricFamily(
                "notifier_duplicates",
                "Events answered as duplicates of an admitted one, by category",
                labels=["category"],
            ),
            Outcome.RESOLVED: CounterMetricFamily(
                "notifier_resolved", "Resolutions of admitted alerts (no limit spent), by category", labels=["category"]
            ),
        }
        for (category, outcome, level), count in sorted(self.events.items()):
            if outcome in apart:
                apart[outcome].add_metric([category], count)
            else:
                events.add_metric([category, outcome_label(outcome, level)], count)
        classes = CounterMetricFamily(
            "notifier_class_events",
            "Events decided, by class of the global level (a reserve's category, critical, or none) and outcome",
            labels=["class", "outcome"],
        )
        for (name, label), count in sorted(self._by_class().items()):
            classes.add_metric([name, label], count)
        yield from (events, *apart.values(), classes)
        cumulative, total = [], 0
        for bound, count in zip((*map(floatToGoString, ADMISSION_BUCKETS), "+Inf"), self.buckets, strict=True):
            total += count
            cumulative.append((bound, total))
        yield HistogramMetricFamily(
            "notifier_admission_seconds", "Time to decide one event", buckets=cumulative, sum_value=self.seconds
        )


class Classes(NamedTuple):
    """How the admission tells an event's class: its names, and the categories that have one."""

    class_of: Callable[[str, str], int]  # (category, severity) -> index; 0 = none
    names: tuple[str, ...]  # index -> name
    categories: frozenset[str]

    def name_of(self, category: str, severity: str) -> str:
        return self.names[self.class_of(category, severity)]


class Metrics:
    """Every metric the gateway exports on ``/metrics``."""

    def __init__(self, max_categories: int | None = None) -> None:
        self.registry = r = CollectorRegistry()
        self.decisions = Decisions(r, max_categories)
        self.rejected = Counter(
            "notifier_requests_rejected", "Requests refused before any decision, by HTTP status", ["status"], registry=r
        )
        self._delivery_metrics(r)
        self._level_metrics(r)
        self._edit_metrics(r)
        self._store_failures: Callable[[], int] = lambda: 0
        self._store_failovers: Callable[[], int] = lambda: 0
        r.register(
            _Callback(
                lambda: [
                    _counter("notifier_store_errors", "Calls to the store that failed", self._store_failures()),
                    _counter(
                        "notifier_store_failovers", "Times the Sentinels named a new primary", self._store_failovers()
                    ),
                ]
            )
        )
        self._replication_metrics(r)

    def _replication_metrics(self, r: CollectorRegistry) -> None:
        self.not_replicated = Counter(
            "notifier_not_replicated",
            "Answers 503 not replicated (NOTIFIER_REDIS_MIN_REPLICAS not reached)",
            registry=r,
        )
        self.outcome_unknown = Counter(
            "notifier_outcome_unknown",
            "Answers 503 outcome unknown: the admission was sent, its reply did not come in time (one per event)",
            registry=r,
        )
        self.replication_wait = Histogram(
            "notifier_replication_wait_seconds",
            "A write and its WAIT for NOTIFIER_REDIS_MIN_REPLICAS replicas, one pipeline",
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )

    def _delivery_metrics(self, r: CollectorRegistry) -> None:
        self.deliveries = Counter(
            "notifier_deliveries",
            "Slack sends by outcome (delivered, duplicate, rate_limited, failed, dead_lettered, reclaimed, "
            "not_sent_again)",
            ["outcome"],
            registry=r,
        )
        self.attempts = Counter(
            "notifier_delivery_failed_attempts", "Failed sends counted against an event", registry=r
        )
        self.slack_seconds = Histogram("notifier_slack_request_seconds", "Latency of one Slack call", registry=r)
        self.delivery_seconds = Histogram(
            "notifier_delivery_seconds",
            "From admission to Slack's confirmation",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
        )
        self.outbox_pending = Gauge(
            "notifier_outbox_pending", "Outbox entries claimed but not yet delivered", registry=r
        )
        self.outbox_length = Gauge("notifier_outbox_length", "Entries in the outbox stream", registry=r)
        self.oldest_pending_seconds = Gauge(
            "notifier_outbox_oldest_pending_seconds", "Age of the oldest undelivered outbox entry", registry=r
        )
        self.dead_letters = Gauge("notifier_dead_letters", "Entries in the dead-letter stream", registry=r)
        self.digests = Counter("notifier_digests", "Digests of suppressed events claimed by this replica", registry=r)
        self.replies = Counter(
            "notifier_replies", "Resolutions posted (in their alert's thread where the sink can)", registry=r
        )

    def _level_metrics(self, r: CollectorRegistry) -> None:
        self.global_used = Gauge(
            "notifier_global_slots",
            "Events in the window of each global rule (used) and its count (limit)",
            ["rule", "state"],
            registry=r,
        )
        self.shared_slots = Gauge(
            "notifier_shared_slots",
            "Shared slots of each global rule with reserves: "
            "slots, and used (admissions beyond what the reserves cover)",
            ["rule", "state"],
            registry=r,
        )
        self.reserved_slots = Gauge(
            "notifier_reserved_slots",
            "Reserved slots of each class under each global rule: slots, and used",
            ["rule", "class", "state"],
            registry=r,
        )
        self.overrides = Counter(
            "notifier_override_changes",
            "Overrides put or removed through this replica, by action (put, delete) and source (api, slack)",
            ["action", "source"],
            registry=r,
        )

    def _edit_metrics(self, r: CollectorRegistry) -> None:
        self.edits = Counter(
            "notifier_edits",
            "Edits of posted messages by outcome (edited, rate_limited, failed, gone, refused)",
            ["outcome"],
            registry=r,
        )
        self.edit_wait = Histogram(
            "notifier_edit_budget_wait_seconds",
            "Time an edit waited for the fleet's edit budget (NOTIFIER_UPDATE_RATE)",
            registry=r,
            buckets=(0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300),
        )

    def watch_store(self, store: _HasFailures) -> None:
        """Export the failed calls and failovers counted by ``store``, and time its replication waits."""
        self._store_failures = lambda: store.failures
        self._store_failovers = lambda: store.failovers
        store.on_wait = self.replication_wait.observe


class _HasFailures(Protocol):
    failures: int
    failovers: int
    on_wait: Callable[[float], None]


class _Callback(Collector):
    """Metrics computed when ``/metrics`` is scraped."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation)
    family.add_metric([], value)
    return family


def outcome_label(outcome: Outcome, level: str) -> str:
    """The ``outcome`` label of ``notifier_events_total``, e.g. ``dropped_global``."""
    if outcome is Outcome.DROPPED:
        return f"dropped_{level}"
    if outcome is Outcome.SHADOW:
        return f"shadow_dropped_{level}"
    if outcome is Outcome.REOPENED:  # admitted by the limits like a new event
        return Outcome.ACCEPTED.value
    return str(outcome.value)
