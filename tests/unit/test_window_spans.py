"""Quiet hours: the grammar, and their spans in their own time zone across daylight saving changes."""

from __future__ import annotations

from datetime import date, datetime, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notifier.errors import SettingsError
from notifier.policy import Policy
from notifier.rules import parse_rules
from notifier.settings import load_settings
from notifier.windows import US, Span, current_or_next, merged, parse_quiet_hours, wall_to_us

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def utc(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=timezone.utc).timestamp()) * US


def spans(value: str, start: int, end: int) -> list[tuple[int, int]]:
    found = [s for w in parse_quiet_hours(value) for s in w.spans(start, end)]
    return [(s.start_us, s.end_us) for s in merged(found)]


def test_an_evening_window_ends_the_next_morning_in_its_zone():
    # Berlin is UTC+1 in November: 19:00-08:00 local is 18:00-07:00 UTC.
    # Monday 23 November: Sunday starts no window, so only Monday's evening is in the day.
    assert spans(f"mon-fri 19:00-08:00 {BERLIN}", utc(2026, 11, 23), utc(2026, 11, 24)) == [
        (utc(2026, 11, 23, 18), utc(2026, 11, 24, 7))
    ]


def test_days_are_the_days_a_window_starts_and_ranges_wrap():
    value = f"fri-mon 22:00-06:00 {BERLIN}"
    week = spans(value, utc(2026, 11, 23), utc(2026, 11, 30))  # Monday 23 to Monday 30 (UTC)
    starts = [datetime.fromtimestamp(s / US, timezone.utc).strftime("%a %d %H:%M") for s, _ in week]
    # Sunday 22's window reaches into Monday 23; Tuesday to Thursday start none.
    assert starts == ["Sun 22 21:00", "Mon 23 21:00", "Fri 27 21:00", "Sat 28 21:00", "Sun 29 21:00"]


def test_a_whole_day_is_00_00_to_24_00_and_back_to_back_windows_are_one_stretch():
    value = f"mon-fri 19:00-08:00 {BERLIN}; sat-sun 00:00-24:00 {BERLIN}"
    friday_evening = utc(2026, 11, 27, 20)
    span = current_or_next(parse_quiet_hours(value), friday_evening)
    assert span == Span(utc(2026, 11, 27, 18), utc(2026, 11, 29, 23)), "Friday 19:00 to Monday 00:00, Berlin"
    assert current_or_next(parse_quiet_hours(value), utc(2026, 11, 30, 12)) == Span(
        utc(2026, 11, 30, 18), utc(2026, 12, 1, 7)
    ), "Monday noon: the next stretch"


def test_spring_forward_a_start_in_the_skipped_hour_begins_at_the_change():
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    (only,) = spans(f"sun 02:30-06:00 {BERLIN}", utc(2026, 3, 29), utc(2026, 3, 30))
    assert only == (utc(2026, 3, 29, 1), utc(2026, 3, 29, 4))
    assert wall_to_us(date(2026, 3, 29), (2, 0), ZoneInfo(BERLIN)) == utc(2026, 3, 29, 1)


def test_fall_back_a_start_in_the_repeated_hour_counts_once_at_its_first_occurrence():
    # Berlin, 25 October 2026: 03:00 CEST goes back to 02:00 CET (01:00 UTC); 02:30 happens twice.
    found = spans(f"02:30-03:30 {BERLIN}", utc(2026, 10, 24, 12), utc(2026, 10, 26))
    assert found == [(utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 30))], "one window, from the first 02:30"


def test_a_night_window_across_both_changes_keeps_its_wall_times():
    # New York: 8 March 2026 (spring) and 1 November 2026 (fall); 22:00-06:00 every day.
    value = f"22:00-06:00 {NEW_YORK}"
    spring = spans(value, utc(2026, 3, 8, 4), utc(2026, 3, 8, 5))
    assert spring == [(utc(2026, 3, 8, 3), utc(2026, 3, 8, 10))], "7 hours long: EST to EDT"
    fall = spans(value, utc(2026, 11, 1, 4), utc(2026, 11, 1, 5))
    assert fall == [(utc(2026, 11, 1, 2), utc(2026, 11, 1, 11))], "9 hours long: EDT to EST"


@given(st.integers(utc(2026, 1, 1), utc(2028, 1, 1)))
def test_every_instant_of_a_daily_window_is_in_exactly_one_span(at_us):
    """Never skipped, never doubled: across a year of both zones, spans never overlap and each is 1 day apart."""
    for zone in (BERLIN, NEW_YORK):
        windows = parse_quiet_hours(f"01:30-02:30 {zone}")
        found = [s for w in windows for s in w.spans(at_us - 3 * 86_400 * US, at_us + 3 * 86_400 * US)]
        assert all(a.end_us <= b.start_us for a, b in pairwise(found))
        assert 5 <= len(found) <= 7 and all(s.end_us > s.start_us for s in found)


@pytest.mark.parametrize(
    "value,words",
    [
        ("", "no window"),
        ("19:00-08:00", r"HH:MM-HH:MM TIMEZONE"),
        ("19:00-08:00 Mars/Olympus", "IANA"),
        ("25:00-08:00 UTC", "time of day"),
        ("19:60-08:00 UTC", "time of day"),
        ("24:00-08:00 UTC", "time of day"),
        ("mon-fry 19:00-08:00 UTC", "day"),
        ("7pm-8am UTC", "HH:MM"),
        ("mon-fri 19:00-08:00 UTC; later", "later"),
    ],
)
def test_bad_windows_say_what_is_wrong(value, words):
    with pytest.raises(ValueError, match=words):
        parse_quiet_hours(value)


@pytest.mark.parametrize(
    "value",
    ['{"#db": "mon-fri 19:00-08:00 Nowhere/Town"}', '{"#db": 5}', "[]", '{"*": ""}'],
)
def test_a_bad_setting_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("NOTIFIER_QUIET_HOURS", value)
    with pytest.raises(SettingsError, match=r"^invalid setting NOTIFIER_QUIET_HOURS: "):
        load_settings()


def test_hold_bypass_is_a_list_of_severities(monkeypatch):
    assert load_settings().hold_bypass == ("critical",)
    monkeypatch.setenv("NOTIFIER_HOLD_BYPASS", "critical, error")
    assert load_settings().hold_bypass == ("critical", "error")
    monkeypatch.setenv("NOTIFIER_HOLD_BYPASS", "")
    assert load_settings().hold_bypass == ()
    monkeypatch.setenv("NOTIFIER_HOLD_BYPASS", "urgent")
    with pytest.raises(SettingsError, match=r"^invalid setting NOTIFIER_HOLD_BYPASS: 'urgent'"):
        load_settings()


def _utc_us(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc).timestamp()) * US


def test_policy_hold_follows_a_store_clock_set_back_and_forth():
    """Policy.hold caches a channel's stretch until it ends; a clock set back computes it again."""
    rules = parse_rules("10/1m")
    policy = Policy(rules, rules, {}, {}, "#db", quiet={"#db": parse_quiet_hours("22:00-06:00 UTC")})
    tuesday = policy.hold("#db", "db", _utc_us("2026-01-13 23:00"))
    assert tuesday is not None and tuesday[1] == Span(_utc_us("2026-01-13 22:00"), _utc_us("2026-01-14 06:00"))
    monday = policy.hold("#db", "db", _utc_us("2026-01-12 23:00"))  # set back a day: Monday's stretch
    assert monday is not None and monday[1].start_us == _utc_us("2026-01-12 22:00")
    assert policy.window_end("#db", monday[0], monday[1].start_us, _utc_us("2026-01-12 23:00")) == monday[1].end_us
    assert policy.window_end("#db", monday[0], monday[1].start_us, _utc_us("2026-01-13 07:00")) == 0, "ended"
    assert policy.hold("#db", "db", _utc_us("2026-01-13 07:00"))[1].start_us == _utc_us("2026-01-13 22:00")
    assert policy.hold("#other", "db", _utc_us("2026-01-13 23:00")) is None
