"""NOTIFIER_ESCALATION: steps "DURATION MENTION" per severity, parsed and checked at start-up."""

from __future__ import annotations

import subprocess
import sys

import pytest

from notifier.errors import SettingsError
from notifier.escalation import Step, parse_escalation, parse_step
from notifier.settings import load_settings


def test_steps_parse_in_order_of_their_duration():
    steps = parse_escalation(
        '{"critical": ["20m <@U0LEAD>", "5m <!subteam^S0ONCALL> <!here>"], "error": ["1h <!here>"]}'
    )
    assert steps == {
        "critical": (
            Step(300_000, "5m", "<!subteam^S0ONCALL> <!here>"),
            Step(1_200_000, "20m", "<@U0LEAD>"),
        ),
        "error": (Step(3_600_000, "1h", "<!here>"),),
    }
    assert steps["critical"][0].text == "Not acknowledged after 5m: <!subteam^S0ONCALL> <!here>"
    assert parse_step("1.5s   <!channel>") == Step(1500, "1.5s", "<!channel>")
    assert parse_escalation("{}") == {}


@pytest.mark.parametrize(
    "value,problem",
    [
        ('{"crit": ["5m <@U1>"]}', "'crit' is not a severity"),
        ('{"critical": ["5m"]}', "has no mention"),
        ('{"critical": ["<@U1>"]}', "is not a duration"),
        ('{"critical": ["0s <@U1>"]}', "must be positive"),
        ('{"critical": ["5m @here"]}', "'@here' is not a mention"),
        ('{"critical": ["5m <@U1|bob>"]}', "is not a mention"),
        ('{"critical": ["5m <https://evil|click>"]}', "is not a mention"),
        ('{"critical": ["5m <@U1>x"]}', "is not a mention"),
        ('{"critical": [5]}', "is not a step"),
        ('{"critical": {"5m": "<@U1>"}}', "give a list"),
        ('["5m <@U1>"]', "must be a JSON object"),
        ("{bad", "not valid JSON"),
    ],
)
def test_a_bad_step_names_the_variable_and_what_is_wrong(monkeypatch, value, problem):
    monkeypatch.setenv("NOTIFIER_ESCALATION", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert str(info.value).startswith("invalid setting NOTIFIER_ESCALATION:") and problem in str(info.value)


def test_a_bad_step_stops_start_up_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "serve"],
        env={"PATH": "/usr/bin:/bin", "NOTIFIER_ESCALATION": '{"critical": ["5m"]}'},
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done
    assert "NOTIFIER_ESCALATION" in lines[0] and "Traceback" not in done.stderr
