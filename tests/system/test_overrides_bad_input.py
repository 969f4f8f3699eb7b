"""Run-time overrides of the limits (contract: "Changing limits at run time"): bad input, logs, removal.

Bad changes answer 422 (naming the field) or 401 and change nothing; every change is logged
with its author and counted; an override of a level a new configuration no longer has can
still be removed. On a fleet of ``notifier serve`` processes sharing one real Redis
(``override_fleet.py`` in tests/support); the changes themselves are in ``test_overrides.py``.
"""

from __future__ import annotations

import re

import override_fleet
from helpers import Gateway, http, wait_for
from override_fleet import AUTHOR, OTHER_TOKEN, TOKEN, admitted, change, cli, overrides, refused_by, send

make_fleet = override_fleet.make_fleet  # a fixture, from tests/support/override_fleet.py


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
