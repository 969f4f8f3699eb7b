"""The ``alerts-links`` scenario of ``bench/storm.py``: the alert storm real tools send.

Every event carries a runbook link; the gateway has the settings of the acknowledge-and-escalate
work (a critical reserve, category reserves, escalation, mute choices, a signing secret) and a
Slack stand-in as its bot API. Its bodies are built by ``storm.lua -- alerts-links``; the
Python copy here (:func:`linked_body`) is for tests and saturation.
"""

from __future__ import annotations

from typing import Any

from helpers import Gateway

CATEGORIES = [f"svc{c}" for c in range(20)]
BODIES = 20_000  # storm.lua cycles n over this many bodies (hosts), 5,000 keys

# The gateway's own settings, exactly as the issue gives them (limits come from storm.py).
SETTINGS = {
    "NOTIFIER_CATEGORY_RESERVES": '{"svc0": "10%", "svc1": "5%"}',
    "NOTIFIER_CRITICAL_RESERVE": "10%",
    "NOTIFIER_ESCALATION": '{"critical": ["5m <!subteam^S0ONCALL>", "20m <@U0LEAD>"], "error": ["1h <!here>"]}',
    "NOTIFIER_MUTE_CHOICES": "1h,4h,24h",
    "NOTIFIER_SLACK_SIGNING_SECRET": "bench-signing-secret",
    "NOTIFIER_KEY_PREFIX": "links",
}


def linked_body(n: int) -> dict[str, Any]:
    """Event ``n`` of the storm, as storm.lua writes it (a key keeps its category and severity)."""
    return {
        "category": f"svc{n % 20}",
        "text": f"disk almost full on host {n}",
        "severity": "critical" if n // 20 % 10 == 0 else "warning",
        "dedup_key": f"disk-{n % 5000}",
        "links": [{"text": "Runbook", "url": f"https://runbooks.example.com/disk?host={n}"}],
    }


def start(limits: dict[str, str], wrapper: list[str], command: list[str] | None) -> tuple[Any, Gateway]:
    """A Slack stand-in and the scenario's gateway posting to it (both to stop after the run)."""
    from slack_standin import TOKEN, SlackStandin

    slack = SlackStandin().start()
    bot = {
        "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": "#alerts",
    }
    return slack, Gateway({**limits, **SETTINGS, **bot}, wrapper=wrapper, command=command).start()
