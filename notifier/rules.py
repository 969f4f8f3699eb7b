"""Limit rules: ``COUNT/DURATION`` strings such as ``10/1s,100/30m``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration_ms(text: str) -> int:
    """Parse ``30m``, ``1.5s``, ``250ms`` or a bare number of seconds into milliseconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration (a number with unit ms, s, m, h or d)")
    number, unit = match.groups()
    return round(float(number) * _UNITS_MS[unit or "s"])


def format_duration(ms: int) -> str:
    """The shortest exact spelling of a duration: 1800000 -> '30m'."""
    for unit in ("d", "h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True)
class Rule:
    """At most ``count`` events in any sliding window of ``window_ms`` (``0/1h`` mutes)."""

    count: int
    window_ms: int
    text: str

    def __str__(self) -> str:
        return self.text


def parse_rule(text: str) -> Rule:
    """Parse one ``COUNT/DURATION`` rule."""
    count, sep, duration = text.strip().partition("/")
    if not sep or not count.strip().isdigit():
        raise ValueError(f"{text.strip()!r} is not a rule of the form COUNT/DURATION, e.g. 10/30m")
    window_ms = parse_duration_ms(duration)
    if window_ms < 1:
        raise ValueError(f"{text.strip()!r}: the duration must be positive")
    return Rule(int(count), window_ms, text.strip())


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Parse a comma list of rules; every one of them must hold."""
    if isinstance(text, (tuple, list)):
        return tuple(r if isinstance(r, Rule) else parse_rule(r) for r in text)
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("at least one rule COUNT/DURATION is required")
    return tuple(parse_rule(p) for p in parts)


def rule_args(rules: tuple[Rule, ...]) -> list[int]:
    """Rules as the Lua scripts read them: the count of rules, then limit, window in us."""
    args = [len(rules)]
    for rule in rules:
        args += [rule.count, rule.window_ms * 1000]
    return args
