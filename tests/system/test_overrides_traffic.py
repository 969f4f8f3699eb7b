"""Run-time overrides of the limits (contract: "Changing limits at run time"), under traffic.

Lapses, replacements and changes in quick succession while every replica is being sent
events: no replica keeps a stale refusal, and every change reaches every replica. Three
``notifier serve`` processes share one real Redis; the last one runs with its clock an hour
behind (libfaketime), since ``until`` and lapses use the store's clock. The fleet and the
helpers are in ``override_fleet.py`` (tests/support); changes without traffic are in
``test_overrides.py``.
"""

from __future__ import annotations

import threading
import time

import override_fleet
import pytest
from override_fleet import (
    BOUND,
    HOUR,
    Answer,
    Fleet,
    admitted,
    change,
    check_mute_refusal,
    overrides,
    refused_by,
    send,
    until_every_replica,
)

make_fleet = override_fleet.make_fleet  # a fixture, from tests/support/override_fleet.py


def describe(answers: list[Answer]) -> str:
    """The first and last few of ``answers``, readable in a failure."""
    shown = answers if len(answers) <= 6 else [*answers[:3], *answers[-3:]]
    lines = [f"replica {a.replica} sent {a.sent:.3f} answered {a.received:.3f}: {a.status} {a.body}" for a in shown]
    return f"{len(answers)} answers\n  " + "\n  ".join(lines)


class Hammer:
    """Threads sending one category to some replicas as fast as they can, every answer kept."""

    def __init__(self, fleet: Fleet, category: str, replicas: list[int], threads: int = 2) -> None:
        self.fleet, self.category = fleet, category
        self.answers: list[Answer] = []
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(index,), daemon=True) for index in replicas for _ in range(threads)
        ]

    def _run(self, index: int) -> None:
        gateway = self.fleet.gateways[index]
        while not self._stop.is_set():
            answer = send(gateway, self.category, index)
            with self._lock:
                self.answers.append(answer)

    def __enter__(self) -> Hammer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


@pytest.mark.parametrize("rules", ["0/1h", "0/1s"])
def test_a_lapse_under_traffic_leaves_no_stale_refusal(make_fleet, rules):
    """Answers decided under the mute but read after it lapsed: named, capped and cached under the mute."""
    fleet = make_fleet()
    with Hammer(fleet, "trap", [0, 1]) as hammer:
        time.sleep(0.3)
        status, answer, answered = change("PUT", fleet.gateways[2], "trap", {"rules": rules, "for": "1s"})
        assert status == 200, answer
        until = answer["until"]
        time.sleep(max(0.0, until + 2.5 - time.time()))
    answers = sorted(hammer.answers, key=lambda a: a.sent)
    during = [a for a in answers if a.sent > answered]
    refused = [a for a in during if a.status == 429]
    last = [max((a.received for a in refused if a.replica == i), default=until) - until for i in (0, 1)]
    print(
        f"\nmute {rules} for 1s under traffic: {len(during)} answers after the PUT, {len(refused)} refused; "
        f"last refusal {last[0]:+.3f} s (replica 0), {last[1]:+.3f} s (replica 1) after the lapse"
    )
    assert refused, "the mute never applied"
    assert all(a.status in (202, 429) for a in answers), [a for a in answers if a.status not in (202, 429)][:3]
    for a in refused:
        check_mute_refusal(a, rules, until)
    late = [a for a in refused if a.sent > until + BOUND]
    assert not late, f"refused more than 1 s after the lapse at {until:.3f}: {describe(late)}"
    early = [a for a in during if a.status == 202 and a.sent > answered + BOUND and a.received < until - 0.05]
    assert not early, f"admitted during the mute: {early[:3]}"
    for index, gateway in enumerate(fleet.gateways):
        answers = [send(gateway, "trap", index) for _ in range(3)]
        assert all(admitted(a) for a in answers), (index, answers)


def test_an_override_replaced_under_traffic_leaves_no_stale_refusal(make_fleet):
    """Refusals decided under a mute and read after it was raised or removed are neither kept nor renamed.

    The changes go through the replicas under traffic, so calls decided under the mute
    are still in flight while the replica reads the new override.
    """
    fleet = make_fleet()
    cycles = []
    with Hammer(fleet, "trap", [0, 1]) as hammer:
        for cycle in range(4):
            through = fleet.gateways[cycle % 2]
            time.sleep(1.5)  # 1 s for the last change to be in force everywhere, then 0.5 s checked free
            status, muted, _ = change("PUT", through, "trap", {"rules": "0/1h", "for": "1h"})
            assert status == 200, muted
            time.sleep(0.7)
            if cycle % 2:
                status, answer, lifted = change("DELETE", through, "trap")
            else:
                status, answer, lifted = change("PUT", through, "trap", {"rules": f"{90000 + cycle}/10m"})
            assert status == 200 and answer["until"] is None, answer
            cycles.append((muted, lifted))
        time.sleep(1.5)
    answers = sorted(hammer.answers, key=lambda a: a.sent)
    refused = [a for a in answers if a.status == 429]
    print(f"\nmute then raise or remove, 4 times under traffic: {len(answers)} answers, {len(refused)} refused")
    assert refused, "the mute never applied"
    for a in refused:  # never named after the rule that replaced the mute, never beyond the mute
        muted = next(m for m, _ in reversed(cycles) if m["until"] - HOUR - 0.5 < a.sent)
        check_mute_refusal(a, "0/1h", muted["until"])
    starts = [m["until"] - HOUR for m, _ in cycles[1:]] + [float("inf")]  # when each next mute was put
    checked = 0
    for (_, lifted), next_mute in zip(cycles, starts, strict=True):
        free = [a for a in answers if lifted + BOUND < a.sent < next_mute - 0.05]
        late = [a for a in free if a.status == 429]
        assert not late, f"still refused more than 1 s after the mute was lifted at {lifted:.3f}: {describe(late)}"
        checked += len(free)
    assert checked > 0, "no event was sent while the category was free"
    for index, gateway in enumerate(fleet.gateways):
        assert all(admitted(send(gateway, "trap", index)) for _ in range(3)), index


def test_changes_in_quick_succession_reach_every_replica(make_fleet):
    """Two changes back to back, while replicas serve traffic: the second one is in force everywhere too.

    Traffic makes each replica read the overrides again right after the first change
    (the script refuses its calls as stale); the second change may land while it reads.
    Whatever the interleaving, 1 s after the second answer every replica must apply it.
    """
    fleet = make_fleet(skew=False)
    stop = threading.Event()

    def traffic(index: int) -> None:
        while not stop.is_set():
            send(fleet.gateways[index], "jobs", index)

    threads = [threading.Thread(target=traffic, args=(i,), daemon=True) for i in (1, 2) for _ in range(2)]
    for thread in threads:
        thread.start()
    worst: list[float] = []
    try:
        for trial in range(1, 41):
            for method, body, wanted in (
                ("PUT", {"rules": "0/1h", "for": "1h"}, refused_by("category", "0/1h")),
                ("DELETE", None, admitted),
            ):
                status, _, _ = change("PUT", fleet.gateways[0], "web", {"rules": f"{trial}/1h"})
                assert status == 200
                status, answer, answered = change(method, fleet.gateways[0], "db", body)
                assert status == 200, answer
                try:
                    times = until_every_replica(fleet, "db", wanted, answered, timeout=5.0)
                    assert max(times) < BOUND, f"took {max(times):.3f} s ({times})"
                except AssertionError as exc:
                    shown = "\n".join(f"  replica {i}: {overrides(g)}" for i, g in enumerate(fleet.gateways))
                    pytest.fail(
                        f"trial {trial}: PUT web {trial}/1h, then {method} db: not in force everywhere: {exc}\n"
                        f"overrides as each replica shows them:\n{shown}",
                        pytrace=False,
                    )
                worst.append(max(times))
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    print(f"\n{len(worst)} changes right after another: every replica within {max(worst) * 1000:.0f} ms at worst")
