"""What a replica knows of alerts: bounded, forgotten oldest first, void on a new epoch or when stale."""

from __future__ import annotations

from notifier.admission.known import FRESH, KnownAlerts


def _fresh(known: KnownAlerts, at: float = 100.0, epoch: int = 0) -> None:
    assert known.observe(epoch, at)


def test_firing_keys_are_capped_oldest_forgotten_first():
    known = KnownAlerts(max_keys=3)
    _fresh(known)
    for i in range(5):
        known.learn_firing(("db", f"k{i}"), f"id{i}", 1e9, f"rec{i}")
    assert list(known.firing) == [("db", "k2"), ("db", "k3"), ("db", "k4")]
    assert known.duplicate(("db", "k0"), 100.0) is None  # forgotten: the store decides
    assert known.duplicate(("db", "k4"), 100.0) == "id4"


def test_refused_keys_are_capped_and_a_key_is_in_one_kind_only():
    known = KnownAlerts(max_keys=2)
    for i in range(4):
        known.learn_refused(("db", f"r{i}"))
    assert [known.knows_refused(("db", f"r{i}")) for i in range(4)] == [False, False, True, True]
    assert list(known.refused) == ["db\x00r2", "db\x00r3"]  # one string a key: see KnownAlerts.refused
    known.learn_firing(("db", "r3"), "id", 1e9, "rec")
    assert not known.knows_refused(("db", "r3")) and ("db", "r3") in known.firing
    known.learn_refused(("db", "r3"))
    assert ("db", "r3") not in known.firing


def test_many_distinct_keys_stay_bounded():
    known = KnownAlerts(max_keys=100)
    _fresh(known)
    for i in range(10_000):
        known.learn_firing(("c", str(i)), str(i), 1e9, f"rec{i}")
        known.learn_refused(("c", f"x{i}"))
    assert len(known.firing) == 100 and len(known.refused) == 100


def test_repeats_are_counted_per_alert_with_the_last_time():
    known = KnownAlerts()
    _fresh(known)
    known.learn_firing(("db", "k"), "first", 1e9, "rec")
    for t in (100.01, 100.02, 100.03):
        assert known.duplicate(("db", "k"), t) == "first"
    assert known.take_repeats() == {("rec", "first"): [3, 100.03]}
    assert known.repeats == {}
    known.give_back({("rec", "first"): [2, 100.05]})
    known.give_back({("rec", "first"): [1, 100.04]})
    assert known.repeats == {("rec", "first"): [3, 100.05]}


def test_no_duplicate_without_a_recent_epoch_read_or_after_the_record_ends():
    known = KnownAlerts()
    _fresh(known, at=100.0)
    known.learn_firing(("db", "k"), "first", 101.0, "rec")
    assert known.duplicate(("db", "k"), 100.0 + FRESH * 0.9) == "first"
    assert known.duplicate(("db", "k"), 100.0 + FRESH * 1.1) is None  # not read recently: ask the store
    _fresh(known, at=100.9)
    assert known.duplicate(("db", "k"), 100.95) == "first"
    assert known.duplicate(("db", "k"), 101.0) is None  # its record ended: a new alert


def test_a_new_epoch_voids_everything_and_older_news_is_ignored():
    known = KnownAlerts()
    _fresh(known, at=100.0, epoch=4)
    known.learn_firing(("db", "k"), "first", 1e9, "rec")
    known.learn_refused(("db", "r"))
    assert known.observe(5, 100.02)
    assert not known.firing and not known.refused
    # A reply sent before the read that saw epoch 5 carries 4: its knowledge is not kept.
    assert not known.observe(4, 100.01)
    assert known.epoch == 5
    assert known.observe(5, 100.03)
