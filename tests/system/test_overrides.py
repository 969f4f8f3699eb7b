"""Run-time overrides of the limits (contract: "Changing limits at run time"), on a fleet.

Three ``notifier serve`` processes share one real Redis; the last one runs with its
clock an hour behind (libfaketime), since ``until`` and lapses use the store's clock.
Every replica is polled on its own: "within 1 second of the answer" is measured from
the moment the change's answer arrived until the last replica answered as it should,
and printed. Here: mutes, global overrides, lapses, restarts and unmutes, without traffic;
under traffic in ``test_overrides_traffic.py``, bad input and logs in
``test_overrides_bad_input.py``. The fleet and the helpers are in ``override_fleet.py``
(tests/support).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import override_fleet
from helpers import wait_for
from override_fleet import (
    AUTHOR,
    BOUND,
    HOUR,
    TOKEN,
    Answer,
    Fleet,
    admitted,
    change,
    check_mute_refusal,
    cli,
    overrides,
    refused_by,
    send,
    until_every_replica,
)

make_fleet = override_fleet.make_fleet  # a fixture, from tests/support/override_fleet.py


def holds(answer: dict, **wanted: object) -> bool:
    """The contract's fields of an answer have these values (more fields are allowed)."""
    return all(key in answer and answer[key] == value for key, value in wanted.items())


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
