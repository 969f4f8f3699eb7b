"""Prometheus metrics of one replica, in a registry of its own."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """Every metric the gateway exports on ``/metrics``."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.events = Counter("notifier_events", "Events decided, by category and outcome "
                              "(accepted, dropped_global, dropped_category, duplicate, shadow_*)",
                              ["category", "outcome"], registry=r)
        self.admission_seconds = Histogram("notifier_admission_seconds", "Time to decide one event",
                                           registry=r, buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1))
        self.rejected = Counter("notifier_requests_rejected", "Requests refused before any decision, by HTTP status",
                                ["status"], registry=r)
        self.deliveries = Counter("notifier_deliveries", "Slack sends by outcome (delivered, duplicate, "
                                  "rate_limited, failed, dead_lettered, reclaimed)", ["outcome"], registry=r)
        self.attempts = Counter("notifier_delivery_failed_attempts", "Failed sends counted against an event", registry=r)
        self.slack_seconds = Histogram("notifier_slack_request_seconds", "Latency of one Slack call", registry=r)
        self.delivery_seconds = Histogram("notifier_delivery_seconds", "From admission to Slack's confirmation",
                                          registry=r, buckets=(.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300))
        self.outbox_pending = Gauge("notifier_outbox_pending", "Outbox entries claimed but not yet delivered", registry=r)
        self.outbox_length = Gauge("notifier_outbox_length", "Entries in the outbox stream", registry=r)
        self.oldest_pending_seconds = Gauge("notifier_outbox_oldest_pending_seconds",
                                            "Age of the oldest undelivered outbox entry", registry=r)
        self.dead_letters = Gauge("notifier_dead_letters", "Entries in the dead-letter stream", registry=r)
        self.digests = Counter("notifier_digests", "Digests of suppressed events claimed by this replica", registry=r)
        self._event_children: dict[tuple[str, str], object] = {}
        self.store_errors = Counter("notifier_store_errors", "Calls to the store that failed", registry=r)


    def count_decision(self, category: str, decision, seconds: float) -> None:
        """Count one decided event and the time it took to decide."""
        self.admission_seconds.observe(seconds)
        key = (category, decision.outcome, decision.level)
        child = self._event_children.get(key)
        if child is None:  # looked up once per (category, outcome): a storm repeats them
            child = self.events.labels(category, outcome_label(decision.outcome, decision.level))
            if len(self._event_children) < 10_000:  # bounded: categories come from clients
                self._event_children[key] = child
        child.inc()


def outcome_label(outcome: str, level: str) -> str:
    """The ``outcome`` label of ``notifier_events_total``, e.g. ``dropped_global``."""
    if outcome == "dropped":
        return f"dropped_{level}"
    if outcome == "shadow":
        return f"shadow_dropped_{level}"
    return outcome


METRICS = web.AppKey("metrics", Metrics)
