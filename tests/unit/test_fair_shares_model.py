"""Fair shares (contract, "Fair shares"): admit.lua, run through the real Limiter, against a model.

The model is written from the contract's sentences alone, not from the gateway's
code: every admission is kept with its time, class and category; an event is admitted
when every global rule admits it (its class below its reserved slots, or else the
overflow below the shared slots) and every rule of its category has room. A refusal
names the level that stays full longer (global on a tie) and its rule that stays full
longest; ``retry_after`` is the wait until the event would be admitted if nothing else
were, found by brute force over the departures of the logged events, rounded up to
the millisecond.

This file runs generated sequences of events (hypothesis, a rule-based state machine)
on the rig and the model of ``fair_shares_rig.py`` (tests/support) and compares them
event by event; ``test_fair_shares_model_cases.py`` has the single cases on the same rig.

Time is the test's: admit.lua reads ``redis.call('TIME')``, so the tests register a
copy of it whose first line reads two keys the test sets instead. Everything here
runs on the embedded store (fakeredis), no external program.
"""

from __future__ import annotations

import asyncio

from fair_shares_rig import BASE_US, FIXED_CONFIGS, Answer, Model, Rig, model_rules
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from notifier.models import Decision, Event
from notifier.policy import GLOBAL, Override
from notifier.rules import parse_rules

# -- configurations -----------------------------------------------------------------------------

CATEGORIES = ["payments", "security", "noisy", "other"]
SEVERITIES = ["info", "warning", "critical"]


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
