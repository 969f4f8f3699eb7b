"""Rule syntax: COUNT/DURATION lists."""

import pytest

from notifier.admission.batch import rule_args
from notifier.rules import format_duration, parse_duration_ms, parse_rules


@pytest.mark.parametrize(
    "text,ms",
    [
        ("250ms", 250),
        ("1s", 1000),
        ("1.5s", 1500),
        ("30m", 1_800_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("45", 45_000),
    ],
)
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "m", "1x", "-1s", "1 s s", "abc"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_several_rules_all_kept_in_order():
    rules = parse_rules("10/1s, 100/30m")
    assert [(r.count, r.window_ms, r.text) for r in rules] == [(10, 1000, "10/1s"), (100, 1_800_000, "100/30m")]
    assert rule_args(rules) == [2, 10, 1_000_000, 100, 1_800_000_000]


def test_a_zero_count_mutes():
    (rule,) = parse_rules("0/1h")
    assert (rule.count, rule.window_ms) == (0, 3_600_000)


@pytest.mark.parametrize("text", ["10", "/1s", "x/1s", "-1/1s", "10/0s", "10/1q", ",", "10/1s,,bad"])
def test_bad_rules(text):
    with pytest.raises(ValueError):
        parse_rules(text)


def test_format_duration_is_exact():
    assert [format_duration(ms) for ms in (1_800_000, 1000, 1500, 86_400_000)] == ["30m", "1s", "1500ms", "1d"]
