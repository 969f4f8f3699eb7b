"""Limit rules: ``COUNT/DURATION`` strings such as ``10/1s,100/30m``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

# Bounds the store's integers hold with room (waits are microseconds in Lua's doubles and replies).
MAX_WINDOW_MS = 366 * 86_400_000
MAX_COUNT = 1_000_000_000
_COUNT = re.compile(r"^\s*[0-9]{1,10}\s*$")
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")  # ASCII digits only


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


Rules = tuple[Rule, ...]


def parse_rule(text: str) -> Rule:
    """Parse one ``COUNT/DURATION`` rule."""
    count, sep, duration = text.strip().partition("/")
    if not sep or not _COUNT.match(count):
        raise ValueError(f"{text.strip()!r} is not a rule of the form COUNT/DURATION, e.g. 10/30m")
    window_ms = parse_duration_ms(duration)
    if window_ms < 1:
        raise ValueError(f"{text.strip()!r}: the duration must be positive")
    if window_ms > MAX_WINDOW_MS or int(count) > MAX_COUNT:
        raise ValueError(f"{text.strip()!r}: at most {MAX_COUNT:,} events per window of at most 366d")
    return Rule(int(count), window_ms, text.strip())


def parse_rules(text: object) -> Rules:
    """Parse a comma list of rules (or pass rules through); every one of them must hold."""
    if isinstance(text, (tuple, list)):
        return tuple(r if isinstance(r, Rule) else parse_rule(str(r)) for r in text)
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("at least one rule COUNT/DURATION is required")
    return tuple(parse_rule(p) for p in parts)


def rules_text(rules: Rules) -> str:
    """Rules as they are written: ``10/1s,100/30m``."""
    return ",".join(rule.text for rule in rules)


def longest_ms(rules: Rules) -> int:
    """The longest window among ``rules``."""
    return max(rule.window_ms for rule in rules)


_SHARE = re.compile(r"^\s*(\d{1,3}(?:\.\d)?)\s*%\s*$")


def parse_share(text: object) -> Fraction:
    """A share of a level, ``N%`` or ``N.N%``, as an exact number of percent (``12.5%`` -> 25/2)."""
    if isinstance(text, Fraction):
        return text
    match = _SHARE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a share such as 10% or 2.5%")
    share = Fraction(match.group(1))
    if share > 100:
        raise ValueError(f"{text!r} is more than 100%")
    return share


def format_share(share: Fraction) -> str:
    """The share as it is written: ``Fraction(25, 2)`` -> ``12.5%``."""
    return f"{share.numerator}%" if share.denominator == 1 else f"{float(share):g}%"
