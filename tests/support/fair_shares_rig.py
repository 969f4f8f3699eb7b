"""The fair-shares rig and model shared by test_fair_shares_model.py and test_fair_shares_model_cases.py.

The rig: admit.lua, run through the real Limiter on the embedded store (fakeredis), on a
clock the test sets. The model: the contract's formula ("Fair shares"), written from its
sentences alone, not from the gateway's code. And the fixed configurations both use.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from builders import build_limiter

from notifier.models import Decision, Event
from notifier.settings import load_settings
from notifier.store.scripts import script_source
from notifier.store.topology import connect

# -- admit.lua on a clock the test sets ------------------------------------------------------

REAL_CLOCK = "local t = redis.call('TIME')"
FAKE_CLOCK = "local t = {redis.call('GET', 'test:clock:s') or '0', redis.call('GET', 'test:clock:us') or '0'}"
BASE_US = 1_700_000_000_000_000  # where the fake clock starts (a whole second)


def admit_on_fake_clock() -> str:
    """admit.lua (as Redis runs it, with its pieces) with its one clock read replaced; fails loudly
    if that line ever moves."""
    source = script_source("admit")
    assert source.count(REAL_CLOCK) == 1, "admit.lua no longer reads its clock as this test expects"
    return source.replace(REAL_CLOCK, FAKE_CLOCK)


class Rig:
    """One replica's Limiter on its own embedded store, deciding at the time the test sets."""

    def __init__(self, **overrides) -> None:
        self.settings = load_settings(redis_url=None, digest_interval=0, **overrides)
        self.store = connect(None)
        self.limiter, _ = build_limiter(self.settings, self.store)
        self.limiter._scripts.admit = self.store.redis.register_script(admit_on_fake_clock())
        # Every event goes to the store: the replica's cache of full levels runs on
        # time.monotonic(), which the fake clock does not move, so it would refuse on its
        # own on real time. Local refusals are tested against real Redis in
        # tests/system/test_fair_shares.py.
        self.limiter.decide_locally = lambda event, path: None
        # The script gets no deadline (0 = none): the Limiter computes it from the real
        # clock, and the fake clock may be ahead of it by hours.
        self.store.store_time_us = lambda monotonic: 0
        self.now_us = BASE_US

    async def decide(self, now_us: int, events: list[Event]) -> list[Decision]:
        """The decisions for ``events``, sent together (one batch, one script call) at ``now_us``."""
        self.now_us = now_us
        seconds, micros = divmod(now_us, 1_000_000)
        await self.store.redis.set("test:clock:s", seconds)
        await self.store.redis.set("test:clock:us", micros)
        return list(await asyncio.gather(*(self.limiter.admit(e) for e in events)))

    async def close(self) -> None:
        await self.store.close()


# -- the model: the contract's formula, in Python ---------------------------------------------

UNIT_US = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}
RULE_RE = re.compile(r"^(\d+)/(\d+)(ms|s|m|h)$")


@dataclass(frozen=True)
class MRule:
    count: int
    window_us: int
    text: str


def model_rules(text: str) -> list[MRule]:
    rules = []
    for part in text.split(","):
        count, number, unit = RULE_RE.match(part).groups()
        rules.append(MRule(int(count), int(number) * UNIT_US[unit], part))
    return rules


def share(text: str) -> Fraction:
    assert text.endswith("%")
    return Fraction(text[:-1])  # "12.5" -> 25/2: exact


@dataclass(frozen=True)
class Entry:
    at: int  # admission time, us
    cls: str | None
    category: str


@dataclass(frozen=True)
class Answer:
    outcome: str
    level: str = ""
    rules: frozenset[str] = frozenset()  # the rules that stay full longest (any may be named)
    retry_ms: int = 0
    never: bool = False  # nothing frees a slot (0 slots for it): retry_after is only a hint


class Model:
    """The contract's fair shares over sliding windows, decided by brute force."""

    def __init__(self, config: dict) -> None:
        self.global_rules = model_rules(config["global_limit"])
        self.default_rules = model_rules(config["category_limit"])
        self.own_rules = {c: model_rules(t) for c, t in config.get("category_limits", {}).items()}
        self.critical = share(config.get("critical_reserve", "0%"))
        self.shares = {f"category:{c}": share(s) for c, s in config.get("category_reserves", {}).items()}
        if self.critical > 0:
            self.shares["critical"] = self.critical
        self.log: list[Entry] = []

    def class_of(self, category: str, severity: str) -> str | None:
        if severity == "critical" and self.critical > 0:
            return "critical"
        return f"category:{category}" if f"category:{category}" in self.shares else None

    def reserved(self, cls: str, rule: MRule) -> int:
        return math.floor(self.shares[cls] * rule.count / 100)

    def shared(self, rule: MRule) -> int:
        return rule.count - sum(self.reserved(c, rule) for c in self.shares)

    def window(self, rule: MRule, at: int) -> list[Entry]:
        """The events admitted in the last DURATION at ``at``: admitted in (at - W, at]."""
        return [e for e in self.log if at - rule.window_us < e.at <= at]

    def global_admits(self, rule: MRule, cls: str | None, at: int) -> bool:
        entries = self.window(rule, at)
        count = {c: sum(e.cls == c for e in entries) for c in self.shares}
        if cls is not None and count[cls] < self.reserved(cls, rule):
            return True
        overflow = sum(max(0, count[c] - self.reserved(c, rule)) for c in self.shares)
        overflow += sum(e.cls is None for e in entries)
        return overflow < self.shared(rule)

    def category_admits(self, rule: MRule, category: str, at: int) -> bool:
        return sum(e.category == category for e in self.window(rule, at)) < rule.count

    def wait(self, rule: MRule, admits, now: int) -> int | None:
        """Microseconds until ``admits`` holds if nothing else is admitted (0: it holds now).

        With no new admission a window only loses entries, so the first instant it holds is
        now or one of the departures (an entry admitted at t leaves at t + W). None: never.
        """
        departures = sorted({e.at + rule.window_us for e in self.log if e.at + rule.window_us > now})
        for at in [now, *departures]:
            if admits(at):
                return at - now
        return None

    def rules_of(self, category: str) -> list[MRule]:
        return self.own_rules.get(category, self.default_rules)

    def decide(self, category: str, severity: str, now: int) -> Answer:
        cls = self.class_of(category, severity)
        global_waits = {
            r.text: self.wait(r, lambda at, r=r: self.global_admits(r, cls, at), now) for r in self.global_rules
        }
        category_waits = {
            r.text: self.wait(r, lambda at, r=r: self.category_admits(r, category, at), now)
            for r in self.rules_of(category)
        }
        if all(w == 0 for w in [*global_waits.values(), *category_waits.values()]):
            self.log.append(Entry(now, cls, category))
            return Answer("accepted")
        never = None in global_waits.values() or None in category_waits.values()
        # A rule that nothing ever opens (0 slots for this event) answers one window, as a
        # hint: the contract's "no longer than one window of its rule" for a mute.
        rules = {r.text: r for r in [*self.global_rules, *self.rules_of(category)]}
        for waits in (global_waits, category_waits):
            for text, w in waits.items():
                waits[text] = rules[text].window_us if w is None else w
        gw, cw = max(global_waits.values()), max(category_waits.values())
        level, waits = ("category", category_waits) if cw > gw else ("global", global_waits)
        longest = max(waits.values())
        named = frozenset(text for text, w in waits.items() if w == longest)
        return Answer("dropped", level, named, -(-longest // 1000), never)

    def in_window(self, rule: MRule, now: int) -> int:
        return len(self.window(rule, now))


# Windows are at least 10 s: the keys' PEXPIRE runs on the real clock, which must not
# expire them while one example runs.
FIXED_CONFIGS = [
    # one global rule; reserves for two categories and critical events
    dict(
        global_limit="10/1m",
        category_limit="100/1m",
        category_reserves={"payments": "20%", "security": "10%"},
        critical_reserve="10%",
    ),
    # two global rules with different floors: 15% of 7 = 1, of 20 = 3; 35% of 7 = 2, of 20 = 7
    dict(
        global_limit="7/10s,20/60s",
        category_limit="100/1m",
        category_reserves={"payments": "15%"},
        critical_reserve="35%",
    ),
    # a category limit tighter than its reserve (50% of 20 = 10 slots, its own rule 3/20s)
    dict(
        global_limit="20/1m",
        category_limit="100/1m",
        category_limits={"payments": "3/20s", "other": "4/30s,6/1m"},
        category_reserves={"payments": "50%"},
        critical_reserve="5%",
    ),
    # reserves that add up to 100% (nothing shared: events of no class are never admitted)
    dict(
        global_limit="8/30s",
        category_limit="100/1m",
        category_reserves={"payments": "12.5%", "security": "50%"},
        critical_reserve="37.5%",
    ),
    # run-time overrides of the global level: the slots follow the overriding rules, and
    # what is already in the windows stays (so the overflow can be far above the shared part)
    dict(
        global_limit="60/1m,45/30s",
        category_limit="100/1m",
        category_reserves={"payments": "10%", "security": "5%"},
        critical_reserve="5%",
        overrides=["60/1m,45/30s", "100/1m,45/30s", "30/1m,20/30s", "8/1m,5/30s", "3/1m,45/30s", "1/1m,0/30s"],
    ),
]
