"""What ``bench/storm.py`` sends and how it sets up its gateways: the storm's categories, the
bodies of its scenarios (as ``storm.lua`` writes them), the four-level tree, the reserves, the
acting settings, the templates file and the quiet hours of ``--quiet-hours``.

Every name here is re-exported by ``storm``: other benchmarks use them as ``storm.NAME``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATEGORIES = [f"storm-{c}" for c in range(20)]
TREE = HERE / "tree.yaml"


def alert_body(j: int, links: bool = False, critical: bool = False) -> dict:
    """The alert body storm.lua sends for key ``j``."""
    body = {
        "category": CATEGORIES[j % 20],
        "text": f"disk full on host-{j}",
        "severity": "critical" if critical and j // 20 % 10 == 0 else "error",
        "fields": {"host": f"h{j}", "team": f"t{j % 20 % 4}"},
        "dedup_key": f"{'linked' if links else 'disk'}-{j}",
    }
    if links:
        body["links"] = [
            {"text": "Runbook", "url": "https://runbooks.example.com/disk-full"},
            {"text": "Dashboard", "url": f"https://grafana.example.com/d/hosts?var-host=h{j}"},
        ]
    return body


def slack_body(j: int) -> dict:
    """The Alertmanager ``slack_configs`` payload storm.lua's ``webhook`` scenario sends for ``j``."""
    lines = "".join(
        f"*Alert:* DiskFull - critical\n*Description:* Disk /var on host-{j}-{k} is 95% full, writes will fail "
        f"within the hour\n*Details:*\n \u2022 *alertname:* `DiskFull`\n \u2022 *instance:* `host-{j}-{k}:9100`\n"
        " \u2022 *job:* `node`\n \u2022 *severity:* `critical`\n"
        for k in (1, 2, 3)
    )
    attachment = {
        "title": "[FIRING:3] DiskFull (node prod critical)",
        "title_link": f"http://alertmanager.example:9093/#/alerts?receiver=slack-{j}",
        "pretext": "",
        "text": lines,
        "fallback": "[FIRING:3] DiskFull (node prod critical) | http://alertmanager.example:9093/#/alerts?receiver=slack",
        "callback_id": "",
        "footer": "",
        "color": "danger",
        "mrkdwn_in": ["fallback", "pretext", "text"],
        "actions": [{"type": "button", "text": "Runbook :green_book:", "url": "https://runbooks.example.com/DiskFull"}],
        "fields": [
            {"title": "cluster", "value": f"prod-{j}", "short": True},
            {"title": "severity", "value": "critical", "short": True},
            {"title": "team", "value": "storage", "short": True},
        ],
    }
    return {
        "channel": "#alerts",
        "username": "Alertmanager",
        "icon_emoji": ":fire:",
        "link_names": False,
        "attachments": [attachment],
    }


# Issue 23's settings: escalation for every severity, five mute choices, a signing secret.
ACTING = {
    "NOTIFIER_ESCALATION": '{"critical": ["5m <!here>", "20m <@U0LEAD>"], "error": ["1h <!here>"], '
    '"warning": ["2h <!here>"], "info": ["4h <!here>"]}',
    "NOTIFIER_MUTE_CHOICES": "15m,1h,4h,24h,7d",
    "NOTIFIER_SLACK_SIGNING_SECRET": "bench-signing-secret",
}


def templates_config() -> str:
    """A configuration file: every category routed to a channel with a template of its own."""
    templates = {
        f"storm-{c}": {
            "text": f"storm {c}: {{{{ title or category }}}}: {{{{ text }}}}",
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": f"Storm {c}: {{{{ category }}}}"}},
                {"type": "section", "text": {"type": "mrkdwn", "text": "*{{ fields.host|default('-') }}* {{ text }}"}},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ severity }} from {{ source }}"}]},
            ],
        }
        for c in range(20)
    }
    routes = [{"match": {"category": name}, "channel": "#storm", "template": name} for name in templates]
    path = Path(tempfile.mkdtemp(prefix="notifier-bench-")) / "templates.yml"
    path.write_text(json.dumps({"routes": routes, "templates": templates}))  # JSON is YAML
    return str(path)


RESERVES = {
    "NOTIFIER_CATEGORY_RESERVES": '{"storm-0": "10%", "storm-1": "10%", "storm-2": "10%", "storm-3": "5%"}',
    "NOTIFIER_CRITICAL_RESERVE": "10%",
}


def quiet_hours_later() -> str:
    """Quiet hours for every channel, an hour long, starting in about 6 hours: configured, not in force."""
    start = (time.gmtime().tm_hour + 6) % 24
    return f'{{"*": "{start:02d}:00-{(start + 1) % 24:02d}:00 UTC"}}'
