"""What a replica knows of full levels (admission/local.py): the level it names, and when a key known
refused may be refused without the store."""

from __future__ import annotations

import yaml

from notifier.admission.batch import Wait
from notifier.admission.local import FullLevels
from notifier.config import parse_config
from notifier.models import Event
from notifier.policy import Policy
from notifier.settings import load_settings

TREE = """
levels:
  - {name: global, rules: 100/30m, reserves: {critical: 10%, "category=pay": 10%, "channel=#x": 5%}}
  - {name: channel, key: channel, rules: 40/30m}
  - {name: category, key: category, rules: 10/1m}
routes:
  - {match: {category: "x.*"}, channel: "#x"}
"""


def policy(text: str = TREE) -> Policy:
    return Policy.from_settings(load_settings(slack_channel="#alerts"), parse_config(yaml.safe_load(text)))


def path(policy: Policy, category: str, severity: str = "info"):
    return policy.route(Event(category=category, text="t", severity=severity), "anonymous")


def test_the_classes_an_alert_s_events_could_have_where_they_all_count_alike():
    p = policy()
    levels = FullLevels(p)
    # db: critical, or (channel=#x may match another event of the key, routed by its fields) or none
    assert levels._alike_cells(path(p, "db")) == (((0, "", 1), (0, "", 3), (0, "", 0)), ((2, "db", 0),))
    # pay: critical, or surely its category's class: never none
    assert levels._alike_cells(path(p, "pay")) == (((0, "", 1), (0, "", 2)), ((2, "pay", 0),))


def test_a_key_is_refused_locally_only_when_no_class_of_its_events_has_room():
    """Learnt at 100.0 (a call sent then), asked at 100.5."""
    p = policy()
    levels = FullLevels(p)
    db = path(p, "db")
    full, room = Wait(60_000_000, 1), Wait(0, 0)
    levels.learn(db, (full, room, room), sent=100.0)  # the root full for no class (db's class here)
    assert levels.refusal(db, 100.5) is not None  # any event of this kind: refused, naming the root
    assert levels.refusal(db, 100.5, keyed=True) is None  # a critical event of the key could still pass
    levels.learn(path(p, "db", "critical"), (full, room, room), sent=100.0)  # the critical class full too
    assert levels.refusal(db, 100.5, keyed=True) is None  # and #x's reserve could take another of its events
    levels.learn(path(p, "x1"), (full, room, room), sent=100.0)
    block = levels.refusal(db, 100.5, keyed=True)
    assert block is not None and block[2] == "global"  # every class full: refused here
    assert levels.refusal(db, 101.5) is None  # room below the root is believed a second (reserves at the root)


def test_a_full_category_refuses_a_key_whatever_its_class():
    p = policy()
    levels = FullLevels(p)
    db = path(p, "db")
    room, full = Wait(0, 0), Wait(30_000_000, 1)
    levels.learn(db, (Wait(10_000_000, 1), room, full), sent=100.0)
    block = levels.refusal(db, 100.5, keyed=True)
    assert block is not None and (block[2], block[3]) == ("category", "db")  # the one full longest


def test_a_level_not_known_is_bounded_by_its_longest_window():
    """The category (10/1m) can stay full a minute at most: a root full for longer than that names the root
    without knowing the category; full for less, the store is asked."""
    p = policy()
    levels = FullLevels(p)
    web = path(p, "web")
    levels.blocked[web.cells[0]] = (100.0 + 300, 0, "global", None, "100/30m")
    levels.open[web.cells[1]] = 1e9
    assert levels.refusal(web, 100.0) is not None  # 300 s > 60 s
    levels.blocked[web.cells[0]] = (100.0 + 30, 0, "global", None, "100/30m")
    levels._answers.clear()  # written by hand, not learnt: what is kept per path is void
    assert levels.refusal(web, 100.0) is None  # 30 s < 60 s: the category could name itself


def test_a_kept_answer_ends_when_a_level_it_relied_on_could_change():
    """Kept per path, the answer still changes when a lower level's block ends and that level could
    then outlast the root (the category 10/1m, unknown, against a root full for 50 s more)."""
    p = policy()
    levels = FullLevels(p)
    web = path(p, "web")
    levels.learn(web, (Wait(60_000_000, 1), Wait(0, 0), Wait(20_000_000, 1)), sent=100.0)  # root 60 s, category 20 s
    levels.open[web.cells[1]] = 1e9  # the channel believed with room (no reserves at the channel)
    levels._answers.clear()
    assert levels.refusal(web, 100.5)[2] == "global"
    assert levels.refusal(web, 119.0)[2] == "global"  # the category still full: known
    assert levels.refusal(web, 121.0) is None  # the category's block ended: it could be full for 60 s > 39 s


def test_a_full_category_whose_reserve_at_the_root_has_room_is_refused_here_for_a_second():
    """A storm in a reserved category: the category full (10/1m), the root with room for its class.
    The replica names the category itself while it believes that room (a second: events of
    other categories could fill the root meanwhile), then asks the store again; without it,
    every event of the storm was a round trip."""
    p = policy()
    levels = FullLevels(p)
    pay = path(p, "pay")
    room, full = Wait(0, 0), Wait(50_000_000, 1)
    levels.learn(pay, (room, room, full), sent=100.0)
    for now in (100.1, 100.5, 100.99):
        block = levels.refusal(pay, now)
        assert block is not None and (block[2], block[3], block[4]) == ("category", "pay", "10/1m")
        assert levels.refusal(pay, now, keyed=True) is not None  # a category is alike for a key's events
    assert levels.refusal(pay, 101.01) is None  # the root's room is no longer believed: the store is asked
    levels.learn(pay, (room, room, full), sent=101.02)
    assert levels.refusal(pay, 101.5) is not None


def test_when_room_is_no_longer_believed_one_event_asks_the_store_while_the_rest_are_answered_as_before():
    """The belief in the root's room ends at 101.0. The first event after that asks the store, and the
    belief is kept while it does, CHECK (0.1 s) at most past its end: a storm sends one event, not
    every event that comes before the answer. It asks once sent (``sent``), however often the
    replica was asked about it first. Without an answer by then, every event asks, as when nobody
    came within CHECK; an answer believes it a second again."""
    p = policy()
    levels = FullLevels(p)
    pay = path(p, "pay")
    room, full = Wait(0, 0), Wait(50_000_000, 1)
    levels.learn(pay, (room, room, full), sent=100.0)
    assert [levels.refusal(pay, 101.01), levels.refusal(pay, 101.01)] == [None, None]  # asked twice: still to ask
    levels.sent(pay, 101.01)  # then sent: it asks the store
    for now in (101.02, 101.05, 101.09):
        assert levels.refusal(pay, now) is not None  # answered here, as before, while it asks
    assert [levels.refusal(pay, 101.1), levels.refusal(pay, 101.13)] == [None, None]  # no answer: all ask
    levels.learn(pay, (room, room, full), sent=101.2)  # an answer: believed a second again
    assert levels.refusal(pay, 101.9) is not None
    assert levels.refusal(pay, 102.5) is None  # it ended 0.3 s before anyone came: nothing kept
    assert levels.refusal(pay, 102.5) is None


def test_a_level_that_could_not_outlast_the_known_one_asks_nothing_when_its_room_is_no_longer_believed():
    """The root full for an hour: the channel (40/30m) and the category (10/1m) cannot name a longer
    wait, full or not, so the root is named without them, and nobody asks the store."""
    p = policy()
    levels = FullLevels(p)
    db = path(p, "db")
    room = Wait(0, 0)
    levels.learn(db, (Wait(3_600_000_000, 1), room, room), sent=100.0)
    for now in (101.01, 101.05, 101.2, 105.0):
        block = levels.refusal(db, now)
        assert block is not None and block[2] == "global"
    assert levels._asked == {}
