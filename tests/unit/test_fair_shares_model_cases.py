"""Fair shares (contract, "Fair shares"): single cases of admit.lua, through the real Limiter.

The model's own arithmetic (floors in exact fractions), ``retry_after`` rounded up to the
millisecond and never longer, and short replays of hand-written steps (reserves, the
overflow, windows sliding at the microsecond, ties naming global), each answer checked
against the model of ``fair_shares_rig.py`` (tests/support). The generated sequences are
in ``test_fair_shares_model.py``.

Time is the test's: admit.lua runs with a first line reading two keys the test sets
instead of ``redis.call('TIME')``. Everything here runs on the embedded store
(fakeredis), no external program.
"""

from __future__ import annotations

import asyncio

from fair_shares_rig import BASE_US, FIXED_CONFIGS, Model, Rig

from notifier.models import Event
from notifier.policy import Policy
from notifier.settings import load_settings

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
