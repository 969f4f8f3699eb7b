"""Escalation steps: ``NOTIFIER_ESCALATION``, severity -> steps ``"DURATION MENTION"``.

A step says who to mention when an alert's message has gone unacknowledged for
DURATION. Mentions are the one place the gateway writes ``<@...>`` or ``<!...>``
on its own (event text is always escaped), so only Slack's mention forms are
accepted: ``<@U...>``, ``<!subteam^S...>``, ``<!here>`` and ``<!channel>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .rules import parse_duration_ms

SEVERITIES = ("info", "warning", "error", "critical")
MAX_STEPS = 10  # steps per severity: each is a reply in a thread, a few are plenty
_MENTION = re.compile(r"^(?:<@[UW][A-Z0-9]{1,32}>|<!subteam\^S[A-Z0-9]{1,32}>|<!here>|<!channel>)$")


@dataclass(frozen=True)
class Step:
    """One escalation step: after ``after_ms`` unacknowledged, mention ``mention``."""

    after_ms: int
    duration: str  # as written, e.g. "5m"
    mention: str  # one or more mentions, separated by spaces

    @property
    def text(self) -> str:
        """The reply's text: ``Not acknowledged after 5m: <@U0LEAD>``."""
        return f"Not acknowledged after {self.duration}: {self.mention}"


Escalation = Mapping[str, tuple[Step, ...]]


def parse_step(text: object) -> Step:
    """``"5m <!subteam^S0ONCALL>"``: a duration, then one or more mentions."""
    if not isinstance(text, str):
        raise ValueError(f'{text!r} is not a step: give a string "DURATION MENTION"')
    duration, _, rest = text.strip().partition(" ")
    mentions = rest.split()
    try:
        after_ms = parse_duration_ms(duration)
    except ValueError as exc:
        raise ValueError(f"step {text!r}: {exc}") from exc
    if after_ms < 1:
        raise ValueError(f"step {text!r}: the duration must be positive")
    if not mentions:
        raise ValueError(f"step {text!r} has no mention (<@U...>, <!subteam^S...>, <!here> or <!channel>)")
    bad = [m for m in mentions if not _MENTION.match(m)]
    if bad:
        raise ValueError(
            f"step {text!r}: {bad[0]!r} is not a mention (<@U...>, <!subteam^S...>, <!here> or <!channel>)"
        )
    return Step(after_ms, duration, " ".join(mentions))


def parse_escalation(value: object) -> dict[str, tuple[Step, ...]]:
    """The JSON object of ``NOTIFIER_ESCALATION`` as steps per severity, soonest first."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object, severity -> list of steps")
    parsed = {}
    for severity, steps in value.items():
        if severity not in SEVERITIES:
            raise ValueError(f"{severity!r} is not a severity ({', '.join(SEVERITIES)})")
        if isinstance(steps, str):
            steps = [steps]
        if not isinstance(steps, list) or len(steps) > MAX_STEPS:
            raise ValueError(f"{severity}: give a list of at most {MAX_STEPS} steps")
        if all(isinstance(s, Step) for s in steps):
            parsed[severity] = tuple(steps)
            continue
        parsed[severity] = tuple(sorted((parse_step(s) for s in steps), key=lambda s: s.after_ms))
    return parsed
