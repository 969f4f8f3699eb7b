"""Prometheus metrics of one replica, in a registry of its own."""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .models import Outcome
from .routing import Path

# How workers' gauges of the store combine: every worker reads the same thing; the last reading counts.
STORE: Literal["livemostrecent"] = "livemostrecent"
OTHER = "(other)"  # the label of categories past the cap: no category can have this name
ADMISSION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
FIRST_BUCKET = ADMISSION_BUCKETS[0]


Counts = dict[tuple[str, ...], int]
Labels = Iterable[tuple[str, str]]
CATEGORIES = "(categories)"  # the label set of categories, apart from any level's (no level has this name)
FOLDED = "folded"  # the outcome label of events summed up in a folded message
MAX_KEPT = 20_000  # (path, outcome, level) counters kept apart before they are folded into labels
# The counters of Decisions, name -> (help, labels); workers share them under these names (worker_metrics).
COUNTED = {
    "notifier_events": (
        "Events decided, by category and outcome (accepted, dropped_<level>; shadow_dropped_<level> in shadow mode); "
        "folded: accepted, then summed up",
        ("category", "outcome"),
    ),
    # A duplicate or a resolution is neither admitted nor dropped: the contract keeps them out of notifier_events.
    "notifier_duplicates": ("Events answered as duplicates of an admitted one, by category", ("category",)),
    "notifier_resolved": ("Resolutions of admitted alerts (no limit spent), by category", ("category",)),
    "notifier_level_events": (
        "Events decided, by level of the tree below the root, the event's value there, and outcome",
        ("level", "value", "outcome"),
    ),
    "notifier_class_events": (
        "Events decided, by class of the root level (a reserve's value, critical, or none) and outcome",
        ("class", "outcome"),
    ),
}
APART = {Outcome.DUPLICATE.value: "notifier_duplicates", Outcome.RESOLVED.value: "notifier_resolved"}
ADMISSION_HELP = "Time to decide one event"


class Decisions(Collector):
    """``notifier_events_total``, ``notifier_level_events_total``, ``notifier_class_events_total`` and
    ``notifier_admission_seconds``, counted in plain ints.

    Every request of an alert storm is counted here, so this is the cheap path: one
    counter per (path, outcome, refusing level), a path being the router's one object
    per kind of event (hashed by identity), no locks (one event loop). They become
    Prometheus samples only when ``/metrics`` is scraped, or when there are too many
    of them: then they are folded into counts by label.

    Categories and level values come from clients: past ``max_values`` label values per
    level (None: no cap, ``NOTIFIER_CATEGORIES`` bounds them), the rest are counted
    under ``(other)``, so the totals stay exact and the scrape stays bounded.
    """

    def __init__(self, registry: CollectorRegistry, max_values: int | None = None) -> None:
        self.events: dict[tuple[Path, Outcome, str], int] = {}
        self.folded: dict[str, int] = {}  # category label -> events folded after an outage
        self.buckets = [0] * (len(ADMISSION_BUCKETS) + 1)  # the last one is +Inf
        self.seconds = 0.0
        self.levels: tuple[str, ...] = ()  # the tree's level names, root first
        self.classes: tuple[str, ...] = ()  # the root's reserve names, by class index - 1
        self._folded: dict[str, Counts] = {"events": {}, "levels": {}, "classes": {}}
        self._named: dict[str, set[str]] = {}
        self._cap = max_values
        registry.register(self)

    def tree_of(self, levels: tuple[str, ...], root_classes: tuple[str, ...], reserved: Labels = ()) -> None:
        """Name the tree's levels and the root's classes (fixed for the process: overrides change rules).

        ``reserved``: (level, value) pairs with a reserve somewhere in the tree, and (CATEGORIES, name)
        for categories: they are named whatever the cap, so every class shows.
        """
        self.levels, self.classes = levels, root_classes
        for level, value in reserved:
            self._named.setdefault(level, set()).add(value)

    def label(self, value: str, level: str = CATEGORIES) -> str:
        """The label value of ``value`` at ``level``: itself, or ``(other)`` past the cap."""
        named = self._named.setdefault(level, set())
        if value in named:
            return value
        if self._cap is None or len(named) < self._cap:
            named.add(value)
            return value
        return OTHER

    def count(self, path: Path, outcome: Outcome, level: str, seconds: float) -> None:
        """Count one decided event of ``path`` (refused by ``level``, if refused) and the time it took."""
        key = (path, outcome, level)
        events = self.events
        events[key] = events.get(key, 0) + 1  # a plain dict: half a Counter's cost
        if len(events) > MAX_KEPT:
            self._fold()
        # A decision made on the replica takes a microsecond or two: the first bucket, without a search.
        self.buckets[0 if seconds <= FIRST_BUCKET else bisect.bisect_left(ADMISSION_BUCKETS, seconds)] += 1
        self.seconds += seconds

    def count_folded(self, category: str) -> None:
        """Count an admitted event this replica summed up in a folded message (``delivery.folding``)."""
        label = self.label(category)
        self.folded[label] = self.folded.get(label, 0) + 1

    def _fold(self) -> None:
        """Turn the counters per path into counts per label (bounded whatever clients send)."""
        folded = self._folded
        for (path, outcome, level), n in self.events.items():
            _add(folded["events"], (self.label(path.category), outcome.value, level), n)
            if outcome is Outcome.DUPLICATE or outcome is Outcome.RESOLVED:
                continue
            label = outcome_label(outcome, level)
            for name, value in zip(self.levels[1:], path.values[1:], strict=True):
                _add(folded["levels"], (name, self.label(value, name), label), n)
            if self.classes:
                index = path.classes[0]
                _add(folded["classes"], (self.classes[index - 1] if index else "none", label), n)
        self.events.clear()

    def samples(self) -> Iterator[tuple[str, tuple[str, ...], int]]:
        """Every count so far: (counter of ``COUNTED``, its labels, count)."""
        self._fold()
        folded = self._folded
        for (category, outcome, level), count in sorted(folded["events"].items()):
            if outcome in APART:
                yield APART[outcome], (category,), count
            else:
                yield "notifier_events", (category, outcome_label(Outcome(outcome), level)), count
        for category, count in sorted(self.folded.items()):  # admitted, then summed up after an outage
            yield "notifier_events", (category, FOLDED), count
        yield from (("notifier_level_events", labels, n) for labels, n in sorted(folded["levels"].items()))
        yield from (("notifier_class_events", labels, n) for labels, n in sorted(folded["classes"].items()))

    def reset(self) -> None:
        """Forget every count (a worker has just shared them); the labels named stay named."""
        self._fold()
        for counts in self._folded.values():
            counts.clear()
        self.folded.clear()
        self.buckets, self.seconds = [0] * len(self.buckets), 0.0

    def collect(self) -> Iterator[Metric]:
        families = {name: CounterMetricFamily(name, text, labels=labels) for name, (text, labels) in COUNTED.items()}
        for name, labels, count in self.samples():
            families[name].add_metric(list(labels), count)
        yield from families.values()
        yield self._histogram()

    def _histogram(self) -> Metric:
        cumulative, total = [], 0
        for bound, count in zip((*map(floatToGoString, ADMISSION_BUCKETS), "+Inf"), self.buckets, strict=True):
            total += count
            cumulative.append((bound, total))
        return HistogramMetricFamily(
            "notifier_admission_seconds", ADMISSION_HELP, buckets=cumulative, sum_value=self.seconds
        )


def _add(counts: Counts, key: tuple[str, ...], n: int) -> None:
    counts[key] = counts.get(key, 0) + n


class Metrics:
    """Every metric the gateway exports on ``/metrics``; with workers, of them all (``worker_metrics``)."""

    def __init__(self, max_categories: int | None = None, config: str = "") -> None:
        """``config``: the SHA-256 of the configuration this replica runs (``config.fingerprint``)."""
        self.registry = r = CollectorRegistry()  # where the metrics are made
        # With workers (PROMETHEUS_MULTIPROC_DIR), prometheus_client writes every value in that folder,
        # /metrics shows what they all wrote, and each gauge says how their values combine.
        self.shared = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.scraped = CollectorRegistry() if self.shared else r  # what /metrics shows
        if self.shared:
            multiprocess.MultiProcessCollector(self.scraped)  # type: ignore[no-untyped-call]
        self.before_scrape: Callable[[], None] = lambda: None
        self.config = config
        self.decisions = Decisions(r, max_categories)
        info = Gauge(
            "notifier_config_info",
            "The configuration this replica runs: its SHA-256",
            ["config"],
            registry=r,
            multiprocess_mode="livemax",  # 1 for each configuration a running worker runs
        )
        info.labels(config).set(1)
        self._info = info
        self.reload_failures = Counter(
            "notifier_config_reload_failures",
            "Reloads of the configuration file that found problems (the replica kept what it ran)",
            registry=r,
        )
        self.rejected = Counter(
            "notifier_requests_rejected", "Requests refused before any decision, by HTTP status", ["status"], registry=r
        )
        self._delivery_metrics(r)
        self._level_metrics(r)
        self._edit_metrics(r)
        self.socket_mode_open: Callable[[], bool] = lambda: False
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

    def exposition(self) -> bytes:
        """What ``/metrics`` answers: Prometheus text."""
        self.before_scrape()
        return generate_latest(self.scraped)

    def store_counts(self) -> tuple[int, int]:
        """Failed calls to the store and failovers so far, as the store client counted them."""
        return self._store_failures(), self._store_failovers()

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
            "notifier_outbox_pending",
            "Outbox entries claimed but not yet delivered",
            registry=r,
            multiprocess_mode=STORE,
        )
        self.outbox_length = Gauge(
            "notifier_outbox_length", "Entries in the outbox stream", registry=r, multiprocess_mode=STORE
        )
        self.oldest_pending_seconds = Gauge(
            "notifier_outbox_oldest_pending_seconds",
            "Age of the oldest undelivered outbox entry",
            registry=r,
            multiprocess_mode=STORE,
        )
        self.dead_letters = Gauge(
            "notifier_dead_letters", "Entries in the dead-letter stream", registry=r, multiprocess_mode=STORE
        )
        self.digests = Counter("notifier_digests", "Digests of suppressed events claimed by this replica", registry=r)
        self.replies = Counter(
            "notifier_replies", "Resolutions posted (in their alert's thread where the sink can)", registry=r
        )
        self.template_errors = Counter(
            "notifier_template_errors",
            "Events posted in the built-in shape because their template failed for them, by template",
            ["template"],
            registry=r,
        )

    def _level_metrics(self, r: CollectorRegistry) -> None:
        self.global_used = Gauge(
            "notifier_global_slots",
            "Events in the window of each global rule (used) and its count (limit)",
            ["rule", "state"],
            registry=r,
            multiprocess_mode=STORE,
        )
        self.shared_slots = Gauge(
            "notifier_shared_slots",
            "Shared slots of each global rule with reserves: "
            "slots, and used (admissions beyond what the reserves cover)",
            ["rule", "state"],
            registry=r,
            multiprocess_mode=STORE,
        )
        self.reserved_slots = Gauge(
            "notifier_reserved_slots",
            "Reserved slots of each class under each global rule: slots, and used",
            ["rule", "class", "state"],
            registry=r,
            multiprocess_mode=STORE,
        )
        self.overrides = Counter(
            "notifier_override_changes",
            "Overrides put or removed through this replica, by action (put, delete) and source (api, slack)",
            ["action", "source"],
            registry=r,
        )

    def _edit_metrics(self, r: CollectorRegistry) -> None:
        self.socket_mode_connected = Gauge(
            "notifier_socket_mode_connected",
            "1 while this replica's Socket Mode connection to Slack is open (NOTIFIER_SLACK_APP_TOKEN), else 0; "
            "with workers, how many of theirs are open (one each)",
            registry=r,
            multiprocess_mode="livesum",
        )
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

    def running(self, config: str) -> None:
        """The replica runs the configuration whose SHA-256 is ``config`` now (a reload)."""
        if config != self.config:
            self._info.labels(self.config).set(0)  # (a worker's file keeps the label: 0, not gone)
            self._info.remove(self.config)
            self._info.labels(config).set(1)
            self.config = config

    def watch_socket_mode(self, connected: Callable[[], bool]) -> None:
        """Export whether this replica's Socket Mode connection is open (0 without one)."""
        self.socket_mode_open = connected  # a worker writes it down before each scrape (worker_metrics)
        self.socket_mode_connected.set_function(lambda: 1.0 if connected() else 0.0)

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
