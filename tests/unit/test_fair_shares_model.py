"""Fair shares (contract, "Fair shares"): admit.lua, run through the real Limiter, against a model.

The model below is written from the contract's sentences alone, not from the gateway's
code: every admission is kept with its time, class and category; an event is admitted
when every global rule admits it (its class below its reserved slots, or else the
overflow below the shared slots) and every rule of its category has room. A refusal
names the level that stays full longer (global on a tie) and its rule that stays full
longest; ``retry_after`` is the wait until the event would be admitted if nothing else
were, found by brute force over the departures of the logged events, rounded up to
the millisecond.

Time is the test's: admit.lua reads ``redis.call('TIME')``, so the tests register a
copy of it whose first line reads two keys the test sets instead. Everything here
runs on the embedded store (fakeredis), no external program.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from builders import build_limiter
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from notifier.models import Decision, Event
from notifier.policy import GLOBAL, Override, Policy
from notifier.rules import parse_rules
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


# -- configurations -----------------------------------------------------------------------------

CATEGORIES = ["payments", "security", "noisy", "other"]
SEVERITIES = ["info", "warning", "critical"]
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


@st.composite
def drawn_config(draw) -> dict:
    windows = ["10s", "15s", "30s", "1m"]
    n = draw(st.integers(1, 2))
    global_limit = ",".join(f"{draw(st.integers(0, 12))}/{draw(st.sampled_from(windows))}" for _ in range(n))
    halves = draw(st.lists(st.integers(0, 100), min_size=3, max_size=3))  # shares in steps of 0.5%
    while sum(halves) > 200:
        halves = [h // 2 for h in halves]

    def pct(h: int) -> str:
        return f"{h // 2}%" if h % 2 == 0 else f"{h // 2}.5%"

    reserves = {c: pct(h) for c, h in zip(["payments", "security"], halves[:2], strict=True) if h}
    limits = {}
    if draw(st.booleans()):
        limits["payments"] = f"{draw(st.integers(0, 5))}/{draw(st.sampled_from(windows))}"
    return dict(
        global_limit=global_limit,
        category_limit=f"{draw(st.integers(2, 8))}/{draw(st.sampled_from(windows))}",
        category_limits=limits,
        category_reserves=reserves,
        critical_reserve=pct(halves[2]),
    )


CONFIGS = st.one_of(st.sampled_from(FIXED_CONFIGS), drawn_config())
EVENTS = st.tuples(st.sampled_from(CATEGORIES), st.sampled_from(SEVERITIES))


class FairShares(RuleBasedStateMachine):
    """Posts events and moves the clock; every decision must be the model's."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.rig: Rig | None = None
        self.model: Model | None = None
        self.now = BASE_US
        self.last_refusal: tuple[int, tuple[str, str], Answer] | None = None

    @initialize(config=CONFIGS)
    def configure(self, config: dict) -> None:
        self.config = config
        self.overridden = False
        self.rig = Rig(**{k: v for k, v in config.items() if k != "overrides"})
        self.model = Model(config)
        self.longest = max(r.window_us for r in self.model.global_rules + self.model.default_rules)
        for rules in self.model.own_rules.values():
            self.longest = max([self.longest, *(r.window_us for r in rules)])

    def teardown(self) -> None:
        if self.rig is not None:
            self.loop.run_until_complete(self.rig.close())
        self.loop.close()

    # -- the clock

    @rule(data=st.data())
    def advance(self, data) -> None:
        longest = self.longest
        step = data.draw(
            st.one_of(
                st.integers(0, 3_000),  # a few microseconds
                st.integers(0, longest // 8_000).map(lambda ms: ms * 1000),  # whole ms, part of a window
                st.integers(0, longest // 8),  # any microsecond, part of a window
                st.integers(0, longest + longest // 4),  # up to past every window
            ),
            label="advance_us",
        )
        self.now += step

    @precondition(lambda self: self.model is not None and self.model.log)
    @rule(data=st.data())
    def to_a_departure(self, data) -> None:
        """Move to just around the moment a logged event leaves one of the windows."""
        entry = data.draw(st.sampled_from(self.model.log), label="entry")
        windows = [r.window_us for r in self.model.global_rules]
        windows += [r.window_us for r in self.model.rules_of(entry.category)]
        window = data.draw(st.sampled_from(windows), label="window_us")
        offset = data.draw(st.sampled_from([-1000, -1, 0, 1]) | st.integers(-5_000, 5_000), label="offset_us")
        self.now = max(self.now, entry.at + window + offset)

    # -- events

    def check(self, sent: list[tuple[str, str]], decisions: list[Decision]) -> None:
        for (category, severity), got in zip(sent, decisions, strict=True):
            want = self.model.decide(category, severity, self.now)
            context = f"{category}/{severity} at +{self.now - BASE_US} us under {self.config}"
            assert got.outcome.value == want.outcome, f"{context}: got {got}, want {want}"
            if want.outcome == "dropped":
                assert got.level == want.level, f"{context}: got {got}, want {want}"
                assert got.rule in want.rules, f"{context}: got {got}, want {want}"
                got_ms = round(got.retry_after * 1000)
                assert abs(got.retry_after * 1000 - got_ms) < 1e-6, f"{context}: not whole ms: {got}"
                assert got_ms == want.retry_ms, f"{context}: got {got}, want {want}"
                self.last_refusal = (self.now, (category, severity), want)
            else:
                self.last_refusal = None

    def post(self, events: list[tuple[str, str]]) -> None:
        batch = [Event(category=c, text="x", severity=s) for c, s in events]
        decisions = self.loop.run_until_complete(self.rig.decide(self.now, batch))
        self.check(events, decisions)

    @rule(event=EVENTS)
    def post_one(self, event) -> None:
        self.post([event])

    @rule(events=st.lists(EVENTS, min_size=2, max_size=12))
    def post_together(self, events) -> None:
        """Several events in one script call: one clock, decided in order."""
        self.post(events)

    @precondition(lambda self: self.model is not None and "overrides" in self.config)
    @rule(events=st.lists(EVENTS, min_size=10, max_size=40))
    def post_many(self, events) -> None:
        self.post(events)

    @precondition(lambda self: self.model is not None and "overrides" in self.config)
    @rule(data=st.data())
    def override_global(self, data) -> None:
        """An operator overrides the global rules (as admission.overrides swaps the policy)."""
        text = data.draw(st.sampled_from(self.config["overrides"]), label="global override")
        limiter = self.rig.limiter
        override = Override(GLOBAL, "", parse_rules(text))
        limiter.policy = limiter.policy.with_overrides({override.target: override}, limiter.policy.version)
        self.model.global_rules = model_rules(text)
        self.overridden = True
        self.last_refusal = None  # its wait was for the rules of then

    @precondition(lambda self: self.last_refusal is not None)
    @rule(early=st.booleans())
    def retry_after_the_wait(self, early: bool) -> None:
        """The same event after retry_after is admitted; one millisecond sooner it is refused."""
        refused_at, event, answer = self.last_refusal
        target = refused_at + answer.retry_ms * 1000 - (1000 if early else 0)
        if target < self.now:
            return
        self.now = target
        before = len(self.model.log)
        self.post([event])
        admitted = not early and not answer.never
        assert len(self.model.log) == before + admitted, (event, answer, early)

    @invariant()
    def global_rules_hold_as_a_whole(self) -> None:
        if self.model is not None and not self.overridden:  # an override does not change the past
            for r in self.model.global_rules:
                assert self.model.in_window(r, self.now) <= r.count


FairShares.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    database=None,  # nothing written into the checkout
    derandomize=True,  # the same examples on every run: stable, reproducible
    # No shrinking: each step is a script call, and shrinking a failure took minutes (past
    # pytest's timeout). A failure prints every step, and its message has the configuration,
    # the event, the time and both answers.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
TestFairSharesModel = FairShares.TestCase


# -- single cases, on the same rig ---------------------------------------------------------------


def run(coro):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_model_floors_exactly():
    """Sanity of the model itself: floor(N * COUNT / 100) in exact arithmetic."""
    model = Model(FIXED_CONFIGS[1])
    short, long = model.global_rules
    assert [model.reserved("category:payments", r) for r in (short, long)] == [1, 3]
    assert [model.reserved("critical", r) for r in (short, long)] == [2, 7]
    assert [model.shared(r) for r in (short, long)] == [4, 10]
    exact = Model(FIXED_CONFIGS[3])
    (r,) = exact.global_rules
    assert [exact.reserved(c, r) for c in ("category:payments", "category:security", "critical")] == [1, 4, 3]
    assert exact.shared(r) == 0


def test_retry_after_is_the_wait_rounded_up_to_the_millisecond():
    """A wait of exactly 2.007 s must answer retry_after 2.007, not 2.008.

    The contract: the wait "rounded up to the millisecond, and never longer". With a wait
    of a whole number of milliseconds nothing is to be rounded, and an answer one ms longer
    means the same event sent before retry_after has passed is admitted.
    """

    async def scenario():
        rig = Rig(global_limit="1/10s", category_limit="100/1m")
        try:
            (first,) = await rig.decide(BASE_US, [Event(category="a", text="x")])
            assert first.outcome.value == "accepted"
            answers = {}
            for wait_ms in (2000, 2007, 2011, 4001, 8002):
                (refused,) = await rig.decide(BASE_US + 10_000_000 - wait_ms * 1000, [Event(category="a", text="x")])
                assert (refused.outcome.value, refused.level, refused.rule) == ("dropped", "global", "1/10s")
                answers[wait_ms] = refused.retry_after
            return answers
        finally:
            await rig.close()

    answers = run(scenario())
    assert answers == {ms: ms / 1000 for ms in answers}, answers


def replay(config: dict, steps: list[tuple[float, list[tuple[str, str]]]]) -> list[tuple]:
    """Each step: at (ms after the start), events sent together. Every answer is checked
    against the model; returned as ("accepted",) or (level, rule, retry_after in ms)."""

    async def scenario():
        rig, model, answers = Rig(**config), Model(config), []
        try:
            for at_ms, events in steps:
                now = BASE_US + round(at_ms * 1000)
                decisions = await rig.decide(now, [Event(category=c, text="x", severity=s) for c, s in events])
                for (category, severity), got in zip(events, decisions, strict=True):
                    want = model.decide(category, severity, now)
                    if want.outcome == "accepted":
                        assert got.outcome.value == "accepted", (at_ms, category, severity, got, want)
                        answers.append(("accepted",))
                    else:
                        got_ms = round(got.retry_after * 1000)
                        assert (got.outcome.value, got.level, got_ms) == ("dropped", want.level, want.retry_ms), (
                            at_ms,
                            category,
                            severity,
                            got,
                            want,
                        )
                        assert got.rule in want.rules, (got, want)
                        answers.append((got.level, got.rule, got_ms))
            return answers
        finally:
            await rig.close()

    return run(scenario())


A = ("accepted",)
PAY, SEC, NOISY, CRIT = ("payments", "info"), ("security", "info"), ("noisy", "info"), ("noisy", "critical")


def test_a_reserved_class_waits_for_the_sooner_of_its_reserve_and_the_shared_part():
    """Config 1 (10/1m; payments owns 2, security 1, critical 1; 6 shared)."""
    config = FIXED_CONFIGS[0]
    # Its own entries are older: its reserved slot frees first (at 60 s).
    got = replay(config, [(0, [PAY] * 2), (1000, [NOISY] * 6), (2000, [PAY])])
    assert got == [A] * 8 + [("global", "10/1m", 58_000)]
    # The shared entries are older: the shared part frees first (at 60 s).
    got = replay(config, [(0, [NOISY] * 6), (1000, [PAY] * 2), (2000, [PAY])])
    assert got == [A] * 8 + [("global", "10/1m", 58_000)]
    # Critical wins over its category: a critical payments event waits for the critical slot.
    got = replay(config, [(0, [NOISY] * 6), (1000, [CRIT]), (2500, [("payments", "critical")])])
    assert got == [A] * 7 + [("global", "10/1m", 57_500)]


def test_the_overflow_ignores_entries_within_their_reserve():
    """An event of no class waits for the first entry beyond the reserves to leave, not for
    a reserved entry (which frees no shared slot)."""
    got = replay(FIXED_CONFIGS[0], [(0, [PAY, SEC, CRIT]), (1000, [NOISY] * 6), (2000, [NOISY])])
    assert got == [A] * 9 + [("global", "10/1m", 59_000)]
    # In one batch (one script call) too: the third payments event takes a shared slot.
    got = replay(FIXED_CONFIGS[0], [(0, [PAY] * 3 + [NOISY] * 6)])
    assert got == [A] * 8 + [("global", "10/1m", 60_000)]
    # A class beyond its reserve does take shared slots, oldest first.
    got = replay(FIXED_CONFIGS[0], [(0, [PAY] * 3), (1000, [NOISY] * 5), (2000, [NOISY, SEC])])
    assert got == [A] * 8 + [("global", "10/1m", 58_000), A]


def test_windows_slide_at_the_microsecond():
    """An entry admitted at t is in the window until t + W (excluded)."""
    config = dict(global_limit="1/10s", category_limit="100/1m")
    got = replay(config, [(0, [NOISY]), (9_999.999, [NOISY]), (10_000, [NOISY])])
    assert got == [A, ("global", "1/10s", 1), A]


def test_a_tie_between_the_levels_names_global():
    config = dict(global_limit="3/1m", category_limit="2/1m", category_reserves={"payments": "34%"})
    got = replay(config, [(0, [NOISY] * 2), (500, [NOISY])])
    assert got == [A, A, ("global", "3/1m", 59_500)]  # both levels full by the same entries


def test_nothing_shared_means_no_class_waits_one_window():
    """Reserves adding up to 100%: an event of no class is never admitted; it is refused
    naming the global rule, with one window as the hint."""
    got = replay(FIXED_CONFIGS[3], [(0, [NOISY]), (5000, [PAY, PAY])])
    assert got == [("global", "8/30s", 30_000), A, ("global", "8/30s", 30_000)]


def test_gateway_floors_are_exact_fractions():
    """The slots the gateway sends the script: floor(N * COUNT / 100) in exact arithmetic
    (12.5% of 8 is 1, 33.3% of 3 is 0, 53.7% of 200 is 107), checked by hand."""
    config = load_settings(
        global_limit="8/1m,3/1m,200/1h",
        category_reserves={"a": "12.5%", "b": "33.3%", "c": "0.5%"},
        critical_reserve="53.7%",  # 100% in all
    )
    policy = Policy.from_settings(config)
    slots = {r.name: [r.slots(rule) for rule in config.global_limit] for r in policy.root.reserves}
    assert slots == {"a": [1, 0, 25], "b": [2, 0, 66], "c": [0, 0, 1], "critical": [4, 1, 107]}
