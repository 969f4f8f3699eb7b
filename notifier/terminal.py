"""``notifier status``: the limits and totals of a running gateway, as a terminal screen.

It reads the same data as ``GET /v1/limits`` and ``GET /v1/stats`` over HTTP, so
it shows the fleet's shared state whichever replica it asks.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Any

from .settings import Settings

BAR_WIDTH = 20


def _get(url: str, token: str | None) -> dict[str, Any]:
    """GET a JSON document; sends the first API token too, in case GETs are ever protected."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def bar(used: int, limit: int, width: int = BAR_WIDTH) -> str:
    """``[#####.....]``: the share of ``limit`` in use, never wider than ``width``."""
    filled = min(width, round(width * used / limit)) if limit else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _seconds(value: float) -> str:
    """A short human duration, ``now`` for zero."""
    if value <= 0:
        return "now"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def rule_line(level: str, rule: dict[str, Any]) -> str:
    """One rule: level, rule, bar, used/limit and when the next slot frees."""
    free = "free now" if rule["remaining"] > 0 else f"next free in {_seconds(rule['available_in'])}"
    return (
        f"  {level:<20} {rule['rule']:>10} {bar(rule['used'], rule['limit'])} "
        f"{rule['used']:>6}/{rule['limit']:<6} {free}"
    )


def render(limits: dict[str, Any], stats: dict[str, Any]) -> str:
    """The whole screen as text."""
    lines = ["Limits (used/limit)"]
    lines += [rule_line("global", r) for r in limits.get("global", [])]
    for category, rules in sorted(limits.get("categories", {}).items()):
        lines += [rule_line(category, r) for r in rules]
    by_limit = stats.get("dropped_by_limit", {})
    lines += [
        "",
        "Totals",
        f"  accepted       {stats.get('accepted', 0)}",
        f"  dropped        {stats.get('dropped', 0)} (global {by_limit.get('global', 0)}, "
        f"category {by_limit.get('category', 0)})",
        f"  duplicates     {stats.get('duplicates', 0)}",
        f"  dead-lettered  {stats.get('dead_lettered', 0)}",
    ]
    return "\n".join(lines)


def show(url: str, settings: Settings) -> int:
    """Print the status screen of the gateway at ``url``; 0 on success, 1 when unreachable."""
    token = settings.api_tokens[0] if settings.api_tokens else None
    base = url.rstrip("/")
    try:
        limits, stats = _get(base + "/v1/limits", token), _get(base + "/v1/stats", token)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"notifier: cannot read {base}: {exc}", file=sys.stderr)
        return 1
    print(f"notifier at {base}\n")
    print(render(limits, stats))
    return 0
