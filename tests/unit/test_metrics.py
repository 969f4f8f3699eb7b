"""Metrics stay bounded whatever the categories, and count per class at scrape time."""

from __future__ import annotations

import os
import subprocess
import sys

from builders import build_limiter
from prometheus_client import generate_latest

from notifier.admission.admit import Admission
from notifier.metrics import Metrics
from notifier.models import Event, Outcome
from notifier.routing import Path
from notifier.settings import load_settings
from notifier.store.topology import connect


def series(metrics: Metrics, name: str) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith(name)}


def test_category_labels_are_capped_and_totals_stay_exact():
    metrics = Metrics(max_categories=3)
    for i in range(10):
        metrics.decisions.count(Path("#c", None, f"c{i}", ("",), (0,)), Outcome.DROPPED, "global", 0.001)
    counted = series(metrics, "notifier_events_total")
    assert len(counted) == 4 and counted['notifier_events_total{category="(other)",outcome="dropped_global"}'] == 7
    assert sum(counted.values()) == 10


def test_level_values_are_capped_per_level_and_counted_at_every_level():
    """An event counts under its value at every level below the root, whichever level refused it;
    past the cap a level's values are summed under (other); many kinds of event fold, still exact."""
    metrics = Metrics(max_categories=2)
    metrics.decisions.tree_of(("global", "channel", "category"), ())
    paths = [Path(f"#{i % 3}", None, f"c{i}", ("", f"#{i % 3}", f"c{i}"), (0, 0, 0)) for i in range(30_000)]
    for path in paths:
        metrics.decisions.count(path, Outcome.DROPPED, "channel", 0.001)
    counted = series(metrics, "notifier_level_events_total")
    assert counted == {
        'notifier_level_events_total{level="category",outcome="dropped_channel",value="(other)"}': 29_998,
        'notifier_level_events_total{level="category",outcome="dropped_channel",value="c0"}': 1,
        'notifier_level_events_total{level="category",outcome="dropped_channel",value="c1"}': 1,
        'notifier_level_events_total{level="channel",outcome="dropped_channel",value="#0"}': 10_000,
        'notifier_level_events_total{level="channel",outcome="dropped_channel",value="#1"}': 10_000,
        'notifier_level_events_total{level="channel",outcome="dropped_channel",value="(other)"}': 10_000,
    }
    assert len(metrics.decisions.events) <= 20_000  # folded as it went: bounded


async def test_decisions_are_counted_per_class():
    settings = load_settings(
        global_limit="10/30m",
        category_limit="10/30m",
        digest_interval=0,
        category_reserves={"payments": "20%"},
        critical_reserve="10%",
        max_categories=1,
    )
    limiter, _ = build_limiter(settings, connect(None))
    metrics = Metrics(max_categories=1)
    admission = Admission(limiter, None, metrics.decisions)
    events = (
        [("noisy", "info")] * 9 + [("payments", "info")] * 3 + [("payments", "critical")] * 2 + [("db", "critical")]
    )
    for category, severity in events:
        await admission.decide(Event(category=category, text="x", severity=severity))
    await limiter.flush()
    assert series(metrics, "notifier_class_events_total") == {
        'notifier_class_events_total{class="critical",outcome="accepted"}': 1,
        'notifier_class_events_total{class="critical",outcome="dropped_global"}': 2,
        'notifier_class_events_total{class="none",outcome="accepted"}': 7,
        'notifier_class_events_total{class="none",outcome="dropped_global"}': 2,
        'notifier_class_events_total{class="payments",outcome="accepted"}': 2,
        'notifier_class_events_total{class="payments",outcome="dropped_global"}': 1,
    }
    # A reserved category is named, whatever the cap (here 1, taken by "noisy").
    assert 'notifier_events_total{category="payments",outcome="accepted"}' in series(metrics, "notifier_events_total")


WORKER = """
import sys
from notifier.metrics import Metrics
from notifier.models import Outcome
from notifier.routing import Path
from notifier.worker_metrics import Shared

class Store:
    failures, failovers, on_wait = 1, 0, None

metrics = Metrics(max_categories=3)
metrics.watch_store(Store())
shared = Shared(metrics)
for i in range(int(sys.argv[1])):
    metrics.decisions.count(Path("#c", None, "db", ("",), (0,)), Outcome.DROPPED, "global", 0.5)
metrics.decisions.count_folded("db")
shared.share()
shared.share()  # nothing new: nothing added twice
sys.stdout.write(metrics.exposition().decode())
"""


def test_workers_share_what_one_process_counts_in_plain_ints(tmp_path):
    """Two workers' decisions, folded events, admission times and store errors, summed by either."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    run = [
        subprocess.run([sys.executable, "-c", WORKER, str(n)], env=env, capture_output=True, text=True) for n in (3, 4)
    ]
    assert all(done.returncode == 0 for done in run), run[-1].stderr
    text = run[-1].stdout  # the second worker answers for both
    shown = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}
    assert shown['notifier_events_total{category="db",outcome="dropped_global"}'] == 7
    assert shown['notifier_events_total{category="db",outcome="folded"}'] == 2
    assert shown["notifier_store_errors_total"] == 2
    assert shown["notifier_admission_seconds_count"] == 7 and shown["notifier_admission_seconds_sum"] == 3.5
    assert shown['notifier_admission_seconds_bucket{le="0.25"}'] == 0
    assert shown['notifier_admission_seconds_bucket{le="1.0"}'] == 7
