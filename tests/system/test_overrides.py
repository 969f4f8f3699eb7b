"""Run-time overrides of the limits (contract: "Changing limits at run time"), on a fleet.

Three ``notifier serve`` processes share one real Redis; the last one runs with its
clock an hour behind (libfaketime), since ``until`` and lapses use the store's clock.
Every replica is polled on its own: "within 1 second of the answer" is measured from
the moment the change's answer arrived until the last replica answered as it should,
and printed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import Gateway, http, need, wait_for

TOKEN = "ops-7b1e52d9c4a0f3"  # one of NOTIFIER_API_TOKENS
OTHER_TOKEN = "ci-0d93aa71e6b2"
AUTHOR = "env-1"  # the name of the first of NOTIFIER_API_TOKENS, never a hash
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CATEGORIES = "db,web,cache,jobs,trap"
BOUND = 1.0  # the contract's figure: in force on every replica within 1 s of the answer
HOUR = 3600.0


def base_env(redis_url: str) -> dict[str, str]:
    return {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_API_TOKENS": f"{TOKEN},{OTHER_TOKEN}",
        "NOTIFIER_CATEGORIES": CATEGORIES,
        # Windows shorter than an hour: a replica that learns a category is muted for an
        # hour refuses its events by itself (no round trip), as in a storm.
        "NOTIFIER_GLOBAL_LIMIT": "100000/10m",
        "NOTIFIER_CATEGORY_LIMIT": "100000/10m",
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }


def skewed_clock() -> dict[str, str]:
    """A process environment with the clock an hour behind (as in test_fleet)."""
    need("faketime")
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not found:
        need("libfaketime.so.1")
    return {"LD_PRELOAD": found[0], "FAKETIME": "-1h"}


class Fleet:
    """Replicas of the gateway on one Redis; the last one's clock is an hour off."""

    def __init__(self, env: dict[str, str], log_dir: Path, replicas: int = 3, skew: bool = True) -> None:
        self.gateways = []
        for index in range(replicas):
            extra = {"NOTIFIER_REPLICA_ID": f"replica-{index}"}
            if skew and index == replicas - 1:
                extra |= skewed_clock()
            self.gateways.append(Gateway({**env, **extra}, log_dir=str(log_dir)))

    def start(self) -> Fleet:
        with ThreadPoolExecutor(len(self.gateways)) as pool:
            list(pool.map(lambda g: g.start(), self.gateways))
        return self

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.gateways)) as pool:
            list(pool.map(lambda g: g.stop(), self.gateways))

    def output(self) -> str:
        return "\n".join(f"--- {g.url}\n{g.output()}" for g in self.gateways)


@pytest.fixture
def make_fleet(redis_url, tmp_path):
    fleets: list[Fleet] = []

    def make(replicas: int = 3, skew: bool = True, **env: str) -> Fleet:
        fleet = Fleet(base_env(redis_url) | env, tmp_path, replicas, skew).start()
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop()


# ---------------------------------------------------------------- talking to replicas


@dataclass
class Answer:
    replica: int
    sent: float  # time.time() before the request
    received: float  # time.time() after the answer
    status: int
    body: dict
    headers: dict


def send(gateway: Gateway, category: str, replica: int = 0, text: str = "ping") -> Answer:
    sent = time.time()
    status, body, headers = gateway.post({"category": category, "text": text}, headers=AUTH)
    return Answer(replica, sent, time.time(), status, body, headers)


def change(method: str, gateway: Gateway, level: str, body: object = None, headers: dict | None = None):
    """PUT or DELETE /v1/limits/{level}: (status, answer, time the answer arrived)."""
    status, answer, _ = http(method, f"{gateway.url}/v1/limits/{level}", body, AUTH if headers is None else headers)
    return status, answer, time.time()


def overrides(gateway: Gateway) -> dict:
    status, body, _ = gateway.get("/v1/limits")
    assert status == 200, body
    return body["overrides"]


def holds(answer: dict, **wanted: object) -> bool:
    """The contract's fields of an answer have these values (more fields are allowed)."""
    return all(key in answer and answer[key] == value for key, value in wanted.items())


def refused_by(limit: str, rule: str):
    return lambda a: a.status == 429 and a.body.get("limit") == limit and a.body.get("rule") == rule


def admitted(a: Answer) -> bool:
    return a.status == 202 and a.body.get("status") == "accepted"


def until_every_replica(fleet: Fleet, category: str, wanted, since: float, timeout: float = 10.0) -> list[float]:
    """Poll every replica (each in its own thread) until it answers ``wanted``; then 3 more must too.

    Returns, per replica, the seconds from ``since`` until its first such answer arrived.
    """

    def poll(index: int) -> float:
        gateway, deadline, seen = fleet.gateways[index], time.monotonic() + timeout, []
        while True:
            answer = send(gateway, category, index)
            seen.append(answer)
            if wanted(answer):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"replica {index} never answered as wanted in {timeout} s ({len(seen)} tries), "
                    f"last: {answer.status} {answer.body}"
                )
        for _ in range(3):
            again = send(gateway, category, index)
            assert wanted(again), f"replica {index} went back: {again}"
        return answer.received - since

    with ThreadPoolExecutor(len(fleet.gateways)) as pool:
        return list(pool.map(poll, range(len(fleet.gateways))))


def until_every_replica_shows(fleet: Fleet, level: str, wanted: dict | None, since: float) -> list[float]:
    """Seconds from ``since`` until each replica's ``GET /v1/limits`` shows ``wanted`` as the
    override of ``level`` (None: no override)."""
    times = []
    for gateway in fleet.gateways:
        wait_for(lambda g=gateway: overrides(g).get(level) == wanted, 10, 0.01, f"{gateway.url} showing {wanted}")
        times.append(time.time() - since)
    return times


def report(what: str, times: list[float]) -> None:
    shown = ", ".join(f"{t * 1000:.0f} ms" for t in times)
    print(f"\n{what}: every replica within {max(times) * 1000:.0f} ms of the answer ({shown})")


def check_mute_refusal(answer: Answer, rule: str, until: float) -> None:
    """A muted category's refusal: names the rule, retry_after within the mute and one window."""
    body = answer.body
    assert answer.status == 429 and body["limit"] == "category" and body["rule"] == rule, answer
    window = {"h": HOUR, "m": 60.0, "s": 1.0}[rule[-1]] * float(rule[2:-1])
    assert 0 < body["retry_after"] <= window, answer
    # the store's clock is this host's clock; retry_after is rounded up to the millisecond
    assert body["retry_after"] <= until - answer.sent + 0.002, (answer, until)
    assert int(answer.headers["Retry-After"]) >= body["retry_after"], answer


def cli(*args: str) -> subprocess.CompletedProcess:
    command = shutil.which("notifier")
    argv = [command] if command else [sys.executable, "-m", "notifier"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- the tests


def test_a_mute_is_in_force_on_every_replica_within_a_second(make_fleet):
    fleet = make_fleet()
    assert all(admitted(send(g, "db", i)) for i, g in enumerate(fleet.gateways))

    before = time.time()
    status, answer, answered = change("PUT", fleet.gateways[0], "db", {"rules": "0/1h", "for": "1h"})
    assert status == 200, answer
    assert answer["level"] == "db" and answer["rules"] == "0/1h"
    assert before + HOUR - 1 <= answer["until"] <= answered + HOUR + 1, answer
    times = until_every_replica(fleet, "db", refused_by("category", "0/1h"), answered)
    report("PUT db 0/1h -> refused", times)
    assert max(times) < BOUND

    for index, gateway in enumerate(fleet.gateways):
        check_mute_refusal(send(gateway, "db", index), "0/1h", answer["until"])
        assert admitted(send(gateway, "web", index)), "a mute of db holds db only"
        shown = overrides(gateway)
        assert shown == {"db": {"rules": "0/1h", "until": answer["until"], "by": AUTHOR}}, (index, shown)

    # Through the replica whose clock is an hour behind: `until` is still the store's clock.
    before = time.time()
    status, answer, answered = change("PUT", fleet.gateways[-1], "web", {"rules": "0/30m", "for": "30m"})
    assert status == 200, answer
    assert before + 1800 - 1 <= answer["until"] <= answered + 1800 + 1, ("until is not in the store's clock", answer)
    times = until_every_replica(fleet, "web", refused_by("category", "0/30m"), answered)
    report("PUT web 0/30m via the skewed replica -> refused", times)
    assert max(times) < BOUND
    for index, gateway in enumerate(fleet.gateways):
        check_mute_refusal(send(gateway, "web", index), "0/30m", answer["until"])


def test_a_global_override_is_in_force_on_every_replica_within_a_second(make_fleet):
    fleet = make_fleet(NOTIFIER_GLOBAL_LIMIT="2/1h")
    assert admitted(send(fleet.gateways[0], "db")) and admitted(send(fleet.gateways[1], "web"))
    for index, gateway in enumerate(fleet.gateways):  # every replica now knows the global level is full
        for _ in range(4):
            answer = send(gateway, "cache", index)
            assert refused_by("global", "2/1h")(answer), answer

    status, answer, answered = change("PUT", fleet.gateways[1], "global", {"rules": "100/1h"})
    assert status == 200 and holds(answer, level="global", rules="100/1h", until=None), answer
    times = until_every_replica(fleet, "cache", admitted, answered)
    report("PUT global 100/1h (was 2/1h, full) -> admitted", times)
    assert max(times) < BOUND
    for gateway in fleet.gateways:
        assert overrides(gateway) == {"global": {"rules": "100/1h", "until": None, "by": AUTHOR}}

    status, answer, answered = change("PUT", fleet.gateways[0], "global", {"rules": "0/1h"})
    assert status == 200 and answer["rules"] == "0/1h" and answer["until"] is None, answer
    times = until_every_replica(fleet, "jobs", refused_by("global", "0/1h"), answered)
    report("PUT global 0/1h -> refused", times)
    assert max(times) < BOUND
    answer = send(fleet.gateways[2], "jobs", 2)
    assert 0 < answer.body["retry_after"] <= HOUR, answer  # no end: one window is the hint

    # Removing it brings the settings back, and the events admitted meanwhile still count.
    status, answer, answered = change("DELETE", fleet.gateways[2], "global")
    assert status == 200 and holds(answer, level="global", rules="2/1h", until=None), answer
    times = until_every_replica(fleet, "jobs", refused_by("global", "2/1h"), answered)
    report("DELETE global -> the settings' 2/1h again", times)
    assert max(times) < BOUND
    assert all(overrides(g) == {} for g in fleet.gateways)


def test_every_replica_shows_changes_and_lapses_within_a_second_without_traffic(make_fleet):
    """GET /v1/limits on each replica marks the overrides in force, even where no event came by."""
    fleet = make_fleet()
    status, muted, answered = change("PUT", fleet.gateways[0], "jobs", {"rules": "0/1h", "for": "2s"})
    assert status == 200, muted
    wanted = {"rules": "0/1h", "until": muted["until"], "by": AUTHOR}
    times = until_every_replica_shows(fleet, "jobs", wanted, answered)
    report("PUT jobs 0/1h for 2s -> shown by GET /v1/limits", times)
    assert max(times) < BOUND

    status, raised, answered = change("PUT", fleet.gateways[2], "cache", {"rules": "5/1h"})
    assert status == 200, raised
    times = until_every_replica_shows(fleet, "cache", {"rules": "5/1h", "until": None, "by": AUTHOR}, answered)
    report("PUT cache 5/1h -> shown", times)
    assert max(times) < BOUND
    status, _, answered = change("DELETE", fleet.gateways[1], "cache")
    assert status == 200
    times = until_every_replica_shows(fleet, "cache", None, answered)
    report("DELETE cache -> gone from GET /v1/limits", times)
    assert max(times) < BOUND

    time.sleep(max(0.0, muted["until"] - time.time()))
    lags = until_every_replica_shows(fleet, "jobs", None, muted["until"])
    report("the lapse of jobs -> gone from GET /v1/limits", lags)
    assert max(lags) < BOUND
    for gateway in fleet.gateways:
        assert overrides(gateway) == {}
        limits = gateway.get("/v1/limits")[1]
        assert [r["rule"] for r in limits["categories"]["jobs"]] == ["100000/10m"], limits["categories"]["jobs"]


def test_an_override_lapses_by_itself_on_every_replica(make_fleet):
    fleet = make_fleet()
    status, answer, answered = change("PUT", fleet.gateways[0], "db", {"rules": "0/1h", "for": "2s"})
    assert status == 200 and answer["rules"] == "0/1h", answer
    until = answer["until"]
    assert answered + 1 <= until <= answered + 2.01, answer
    times = until_every_replica(fleet, "db", refused_by("category", "0/1h"), answered)
    assert max(times) < BOUND

    log: list[Answer] = []

    def poll(index: int) -> Answer:
        gateway = fleet.gateways[index]
        while True:
            answer = send(gateway, "db", index)
            log.append(answer)
            if answer.status != 429:
                return answer
            check_mute_refusal(answer, "0/1h", until)
            assert answer.sent < until + 5, f"replica {index} still refuses 5 s after the lapse"
            time.sleep(0.01)

    with ThreadPoolExecutor(len(fleet.gateways)) as pool:
        first = list(pool.map(poll, range(len(fleet.gateways))))
    lags = [a.received - until for a in first]
    print(f"\nlapse at {until:.3f}: admitted again {', '.join(f'{x * 1000:+.0f} ms' for x in lags)} after it")
    assert all(admitted(a) for a in first), first
    assert max(lags) < BOUND, "a lapse takes effect within 1 s of its end"
    early = [a for a in log if a.status == 202 and a.received < until - 0.05]
    assert not early, f"admitted before the mute ended: {early}"

    status, answer, _ = change("DELETE", fleet.gateways[1], "db")
    assert status == 404, ("a lapsed override is none", answer)
    assert all(overrides(g) == {} for g in fleet.gateways)
    assert all(admitted(send(g, "db", i)) for i, g in enumerate(fleet.gateways))


def test_an_override_survives_a_restart_of_every_replica(make_fleet):
    fleet = make_fleet()
    status, answer, _ = change("PUT", fleet.gateways[0], "db", {"rules": "0/1h", "for": "1h"})
    assert status == 200, answer
    status, raised, _ = change("PUT", fleet.gateways[1], "global", {"rules": "500/1d"})
    assert status == 200, raised

    fleet.stop()
    fleet.start()

    for index, gateway in enumerate(fleet.gateways):
        check_mute_refusal(send(gateway, "db", index), "0/1h", answer["until"])
        assert overrides(gateway) == {
            "db": {"rules": "0/1h", "until": answer["until"], "by": AUTHOR},
            "global": {"rules": "500/1d", "until": None, "by": AUTHOR},
        }
        limits = gateway.get("/v1/limits")[1]
        assert [r["rule"] for r in limits["global"]] == ["500/1d"], limits["global"]
        assert [r["rule"] for r in limits["categories"]["db"]] == ["0/1h"], limits["categories"]


def fill_caches(fleet: Fleet, category: str, rule: str, until: float | None = None) -> None:
    """Several refused events on every replica: each now refuses the category by itself."""
    for index, gateway in enumerate(fleet.gateways):
        for _ in range(5):
            answer = send(gateway, category, index)
            assert refused_by("category", rule)(answer), answer
            if until is not None:
                check_mute_refusal(answer, rule, until)


def test_unmute_readmits_everywhere_even_where_the_category_is_cached_full(make_fleet):
    fleet = make_fleet()
    status, answer, answered = change("PUT", fleet.gateways[0], "db", {"rules": "0/1h", "for": "1h"})
    assert status == 200, answer
    assert max(until_every_replica(fleet, "db", refused_by("category", "0/1h"), answered)) < BOUND
    fill_caches(fleet, "db", "0/1h", answer["until"])

    status, answer, answered = change("DELETE", fleet.gateways[1], "db")
    assert status == 200 and holds(answer, level="db", rules="100000/10m", until=None), answer
    times = until_every_replica(fleet, "db", admitted, answered)
    report("DELETE db (cached full everywhere) -> admitted", times)
    assert max(times) < BOUND
    assert change("DELETE", fleet.gateways[0], "db")[0] == 404

    # The same from a terminal.
    url = fleet.gateways[2].url
    done = cli("mute", "db", "30m", "--url", url, "--token", TOKEN)
    answered = time.time()
    print(f"\n$ notifier mute db 30m\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"db: 0/30m until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n", done.stdout), done.stdout
    times = until_every_replica(fleet, "db", refused_by("category", "0/30m"), answered)
    report("notifier mute db 30m -> refused", times)
    assert max(times) < BOUND
    until = overrides(fleet.gateways[0])["db"]["until"]
    assert answered + 1800 - 5 <= until <= answered + 1800, until
    fill_caches(fleet, "db", "0/30m", until)

    done = cli("status", "--url", fleet.gateways[0].url, "--token", TOKEN)
    print(f"$ notifier status\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Overrides" in lines, done.stdout
    line = lines[lines.index("Overrides") + 1]
    assert line.split()[:2] == ["db", "0/30m"] and f"by {AUTHOR}" in line, line
    assert re.search(r"for (29\.\d|30\.0)m more", line), line

    done = cli("unmute", "db", "--url", url, "--token", "not-a-token")
    assert done.returncode == 1 and "401" in done.stderr, (done.stdout, done.stderr)
    fill_caches(fleet, "db", "0/30m", until)

    done = cli("unmute", "db", "--url", url, "--token", TOKEN)
    answered = time.time()
    print(f"$ notifier unmute db\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "db: 100000/10m until removed\n", done.stdout
    times = until_every_replica(fleet, "db", admitted, answered)
    report("notifier unmute db (cached full everywhere) -> admitted", times)
    assert max(times) < BOUND
    done = cli("unmute", "db", "--url", url, "--token", TOKEN)
    assert done.returncode == 1 and "404" in done.stderr, done.stderr


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


def bad_changes() -> list[tuple[str, object, str]]:
    """PUTs the gateway must answer 422: (level, body, the field its details must name)."""
    return [
        ("db", {"rules": "abc"}, "rules"),
        ("db", {"rules": "5/1x"}, "rules"),
        ("db", {"rules": "-1/1h"}, "rules"),
        ("db", {"rules": ""}, "rules"),
        ("db", {"rules": 5}, "rules"),
        ("db", {"for": "1h"}, "rules"),
        ("db", {"rules": "0/1h", "for": "soon"}, "for"),
        ("db", {"rules": "0/1h", "for": "0s"}, "for"),
        ("db", {"rules": "0/1h", "for": "-5m"}, "for"),
        ("global", {"rules": "0/1h", "for": "soon"}, "for"),
        ("payments", {"rules": "0/1h", "for": "1h"}, "level"),
        ("db", ["rules", "0/1h"], "body"),
        ("db", "0/1h", "body"),
        ("db", 42, "body"),
        ("db", {"rules": "0/1h", "for": "1h", "reason": "noisy"}, "reason"),
        ("db", {"rule": "0/1h"}, "rule"),
    ]


def wrong_authorizations() -> tuple[dict[str, str], ...]:
    """Headers the gateway must answer 401: no token, a wrong one, the right one not as a bearer token."""
    return (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    )


def changes_to_authorize() -> tuple[tuple[str, str, object], ...]:
    """Changes (method, level, body) each tried with every one of ``wrong_authorizations``."""
    return (
        ("PUT", "db", {"rules": "0/1h", "for": "1h"}),
        ("PUT", "web", {"rules": "0/1h"}),
        ("DELETE", "db", None),
        ("DELETE", "global", None),
    )


def test_bad_changes_answer_422_or_401_and_change_nothing(make_fleet):
    fleet = make_fleet(replicas=2, skew=False)
    gateway = fleet.gateways[0]
    status, answer, _ = change("PUT", gateway, "db", {"rules": "3/1h", "for": "1h"})
    assert status == 200, answer
    status, _, _ = change("PUT", gateway, "global", {"rules": "50000/1h"})
    assert status == 200
    before = overrides(gateway)
    assert set(before) == {"db", "global"}, before
    wait_for(lambda: all(overrides(g) == before for g in fleet.gateways), 5, what="every replica showing both")

    def unchanged(what: object) -> None:
        for g in fleet.gateways:
            assert overrides(g) == before, what

    for level, body, field in bad_changes():
        status, answer, _ = change("PUT", gateway, level, body)
        assert status == 422, (level, body, status, answer)
        named = [d["field"] for d in answer.get("details", [])]
        assert field in named, (level, body, answer)
        unchanged((level, body))

    status, answer, _ = change("DELETE", gateway, "payments")
    assert status == 422 and "level" in [d["field"] for d in answer["details"]], answer
    status, answer, _ = change("DELETE", gateway, "web")
    assert status == 404, answer
    unchanged("DELETE of levels without an override")

    for headers in wrong_authorizations():
        for method, level, body in changes_to_authorize():
            status, answer, _ = change(method, gateway, level, body, headers)
            assert status == 401, (method, level, headers, status, answer)
            unchanged((method, level, headers))
    answer = send(fleet.gateways[1], "db", 1)
    assert admitted(answer) or refused_by("category", "3/1h")(answer), answer


def metric(gateway: Gateway, action: str, source: str) -> float:
    text = gateway.get("/metrics")[1]["_raw"]
    found = re.search(
        rf'^notifier_override_changes_total\{{(?=[^}}]*action="{action}")(?=[^}}]*source="{source}")[^}}]*\}} (\S+)$',
        text,
        re.M,
    )
    return float(found.group(1)) if found else 0.0


def test_every_change_is_logged_with_its_author_and_counted(make_fleet):
    fleet = make_fleet(skew=False)
    first, second = fleet.gateways[0], fleet.gateways[1]
    other = {"Authorization": f"Bearer {OTHER_TOKEN}"}
    other_print = "env-2"
    assert change("PUT", first, "db", {"rules": "0/1h", "for": "1h"})[0] == 200
    assert change("PUT", first, "global", {"rules": "900/1h"}, other)[0] == 200
    assert change("DELETE", second, "db")[0] == 200
    assert change("DELETE", second, "db")[0] == 404  # nothing changed: not counted
    assert change("PUT", first, "db", {"rules": "0/1h", "for": "soon"})[0] == 422
    assert change("PUT", first, "db", {"rules": "0/1h"}, {"Authorization": "Bearer nope"})[0] == 401
    done = cli("mute", "web", "15m", "--url", second.url, "--token", OTHER_TOKEN)
    assert done.returncode == 0, done.stderr

    def logged() -> bool:
        one, two = first.output(), second.output()
        return (
            re.search(rf"override of db by {AUTHOR}: 0/1h until \d{{4}}-", one)
            and f"override of global by {other_print}: 900/1h until removed" in one
            and f"override of db removed by {AUTHOR}" in two
            and re.search(rf"override of web by {other_print}: 0/15m until \d{{4}}-", two)
        )

    wait_for(logged, 10, what="the changes in the gateways' output")
    print("\n" + "\n".join(line for line in fleet.output().splitlines() if "override" in line))
    everything = fleet.output()
    assert TOKEN not in everything and OTHER_TOKEN not in everything, "a token was logged"
    assert "anonymous" not in everything

    assert metric(first, "put", "api") == 2
    assert metric(first, "delete", "api") == 0
    assert metric(second, "delete", "api") == 1
    assert metric(second, "put", "api") == 1
    assert metric(fleet.gateways[2], "put", "api") == 0


def test_an_override_of_a_level_a_new_configuration_has_not_can_be_removed(redis_url, tmp_path):
    """An override outlives the configuration that had its level; DELETE still removes it."""
    with_team, without = tmp_path / "a.yaml", tmp_path / "b.yaml"
    with_team.write_text("levels: [{name: global, rules: 100/1m}, {name: team, key: 'field:team', rules: 5/1m}]\n")
    without.write_text("levels: [{name: global, rules: 100/1m}, {name: category, key: category, rules: 5/1m}]\n")
    first = Gateway({"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CONFIG": str(with_team)}).start()
    try:
        assert http("PUT", first.url + "/v1/limits/team/db", {"rules": "0/1h"})[0] == 200
    finally:
        first.stop()
    second = Gateway({"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CONFIG": str(without)}).start()
    try:
        status, body, _ = http("DELETE", second.url + "/v1/limits/team/db")
        assert (status, body) == (200, {"level": "team", "value": "db", "rules": None, "until": None})
        assert http("DELETE", second.url + "/v1/limits/team/db")[0] == 404
        assert http("DELETE", second.url + "/v1/limits/nothing/db")[0] == 404
    finally:
        second.stop()
