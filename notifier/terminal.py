"""The terminal side of the ``notifier`` command: ``status``, ``mute``, ``unmute``, ``ack``, ``maintenance``, ``audit``.

They talk to a running gateway over HTTP (``GET /v1/limits`` and ``/v1/stats``,
``PUT`` and ``DELETE /v1/limits/{level}/{value}`` or ``/v1/limits/{category}``),
so they act on the fleet's shared state whichever replica they ask.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

BAR_WIDTH = 20


class Answer(Exception):
    """The gateway answered with an error."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body.get('error', body)}")
        self.status = status


def request(method: str, url: str, token: str | None, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON request; raises :class:`Answer` for an error status, ``OSError`` when unreachable."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=5) as answer:
            parsed: dict[str, Any] = json.loads(answer.read())
            return parsed
    except urllib.error.HTTPError as exc:
        raise Answer(exc.code, _json(exc.read())) from exc


def _json(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"error": raw.decode(errors="replace")[:200]}
    return parsed if isinstance(parsed, dict) else {"error": str(parsed)}


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


def share_lines(rule: dict[str, Any]) -> list[str]:
    """Under a global rule with reserves: the shared slots, then each class's reserved ones."""
    if "shared" not in rule:
        return []
    shared = rule["shared"]
    lines = [
        f"    {'shared':<18} {'':>10} {bar(shared['used'], shared['slots'])} "
        f"{shared['used']:>6}/{shared['slots']:<6} {'free now' if shared['free'] else 'full'}"
    ]
    for reserve in rule["reserves"]:
        name = f"{reserve['class']} ({reserve['share']})"
        lines.append(
            f"    {name:<29} {bar(reserve['used'], reserve['slots'])} "
            f"{reserve['used']:>6}/{reserve['slots']:<6} reserved"
        )
    return lines


def override_lines(overrides: dict[str, Any], now: float) -> list[str]:
    """The overrides in force, with who set them and when they end."""
    lines = []
    for level, override in overrides.items():
        ends = "until removed" if override["until"] is None else f"for {_seconds(override['until'] - now)} more"
        lines.append(f"  {level:<20} {override['rules']:>10} {ends}, by {override['by'] or 'unknown'}")
    return lines


def tree_lines(limits: dict[str, Any]) -> list[str]:
    """Every level of the tree, root first: its rules, then per value below the root."""
    levels = limits.get("levels") or [
        {"name": "global", "key": None, "rules": limits.get("global", [])},
        {"name": "category", "key": "category", "values": limits.get("categories", {})},
    ]
    root = levels[0]
    lines = [line for rule in root.get("rules") or [] for line in (rule_line(root["name"], rule), *share_lines(rule))]
    for level in levels[1:]:
        values = level.get("values") or {}
        lines.append(f" {level['name']} (per {level['key']}): {len(values)} value{'' if len(values) == 1 else 's'}")
        for value, rules in sorted(values.items()):
            lines += [line for rule in rules for line in (rule_line(value, rule), *share_lines(rule))]
    return lines


def render(limits: dict[str, Any], stats: dict[str, Any], now: float | None = None) -> str:
    """The whole screen as text."""
    lines = ["Limits (used/limit)", *tree_lines(limits)]
    overrides = limits.get("overrides") or {}
    if overrides:
        lines += ["", "Overrides", *override_lines(overrides, time.time() if now is None else now)]
    by_limit = ", ".join(f"{level} {n}" for level, n in stats.get("dropped_by_limit", {}).items())
    lines += [
        "",
        "Totals",
        f"  accepted       {stats.get('accepted', 0)}",
        f"  dropped        {stats.get('dropped', 0)} ({by_limit})",
        f"  duplicates     {stats.get('duplicates', 0)}",
        f"  dead-lettered  {stats.get('dead_lettered', 0)}",
    ]
    destinations = stats.get("destinations") or {}
    if len(destinations) > 1 or any(d.get("paused_until") for d in destinations.values()):
        lines += ["", "Destinations", *destination_lines(destinations)]
    return "\n".join(lines)


def destination_lines(destinations: dict[str, Any]) -> list[str]:
    """Per destination: delivered, dead, and until when a 429 pauses it."""
    width = max(len(name) for name in destinations)
    return [
        f"  {name:{width}}  delivered {d.get('delivered', 0)}, dead {d.get('dead', 0)}"
        + (f", paused until {d['paused_until']}" if d.get("paused_until") else "")
        for name, d in destinations.items()
    ]


def show(url: str, token: str | None) -> int:
    """Print the status screen of the gateway at ``url``; 0 on success, 1 when unreachable."""
    base = url.rstrip("/")
    try:
        limits, stats = request("GET", base + "/v1/limits", token), request("GET", base + "/v1/stats", token)
        health = request("GET", base + "/healthz", token)
    except (OSError, ValueError, Answer) as exc:
        print(f"notifier: cannot read {base}: {exc}", file=sys.stderr)
        return 1
    print(f"notifier at {base}")
    print(f"Socket Mode: {health.get('socket_mode', 'off')}\n")
    print(render(limits, stats))
    return 0


def mute(url: str, token: str | None, target: str, duration: str) -> int:
    """``notifier mute``: override ``target`` (``LEVEL/VALUE`` or a category) to ``0/DURATION`` for DURATION,
    fleet-wide."""
    return _change(url, "PUT", target, token, {"rules": f"0/{duration}", "for": duration, "via": "cli"})


def unmute(url: str, token: str | None, target: str) -> int:
    """``notifier unmute``: remove the override of ``target`` (``LEVEL/VALUE`` or a category)."""
    return _change(url, "DELETE", target, token, None)


def ack(url: str, token: str | None, dedup_key: str, by: str | None) -> int:
    """``notifier ack``: acknowledge the open alert ``dedup_key`` (as ``by``, else as the token's author)."""
    return _acknowledge(url, "POST", dedup_key, token, {"via": "cli", **({"by": by} if by else {})})


def unack(url: str, token: str | None, dedup_key: str) -> int:
    """``notifier unack``: lift the acknowledgement of the open alert ``dedup_key``."""
    return _acknowledge(url, "DELETE", dedup_key, token, None)


def _acknowledge(url: str, method: str, dedup_key: str, token: str | None, body: dict[str, Any] | None) -> int:
    target = f"{url.rstrip('/')}/v1/alerts/{urllib.parse.quote(dedup_key, safe='')}/ack"
    answer = _call(url, method, target, token, body)
    if answer is None:
        return 1
    at = answer.get("acknowledged_at")
    if answer.get("acknowledged_by") and at is not None:
        via = f" (via {answer['acknowledged_via']})" if answer.get("acknowledged_via") else ""
        print(f"{answer['dedup_key']}: acknowledged by {answer['acknowledged_by']} at {_utc(at)}{via}")
    else:
        print(f"{answer['dedup_key']}: not acknowledged")
    return 0


def maintenance(url: str, token: str | None, name: str, body: dict[str, Any] | None) -> int:
    """``notifier maintenance``: open a window (``body``, as ``PUT /v1/windows/NAME`` takes it), or end it (None)."""
    target = f"{url.rstrip('/')}/v1/windows/{urllib.parse.quote(name, safe='')}"
    answer = _call(url, "DELETE" if body is None else "PUT", target, token, body)
    if answer is None:
        return 1
    if body is None:
        print(f"{name}: ended at {_utc(answer['end'])}")
    else:
        held = ", ".join([*answer["categories"], *answer["channels"]])
        print(f"{name}: holds {held} from {_utc(answer['start'])} until {_utc(answer['end'])}")
    return 0


def audit(url: str, token: str | None, limit: int, action: str | None, by: str | None) -> int:
    """``notifier audit``: the latest ``limit`` entries of the audit log (of ``action``, by ``by``), one a line,
    newest first."""
    asked = {"limit": limit, "action": action, "by": by}
    query = urllib.parse.urlencode({key: value for key, value in asked.items() if value is not None})
    answer = _call(url, "GET", f"{url.rstrip('/')}/v1/audit?{query}", token, None)
    if answer is None:
        return 1
    for entry in answer["entries"]:
        print(audit_line(entry))
    return 0


def audit_line(entry: dict[str, Any]) -> str:
    """One audit entry as a line: when, what, to what, who and from where, and what changed."""
    target = " ".join(f"{key}={value}" for key, value in entry.get("target", {}).items() if value not in (None, ""))
    line = f"{entry['at']}  {entry['action']:<15} {target}  by {entry['by']} via {entry['via']}"
    before, after = entry.get("before"), entry.get("after")
    if before is not None or after is not None:
        line += f"  {json.dumps(before, separators=(',', ':'))} -> {json.dumps(after, separators=(',', ':'))}"
    return line


def _call(url: str, method: str, target: str, token: str | None, body: dict[str, Any] | None) -> dict[str, Any] | None:
    """The gateway's answer, or None once what went wrong is printed (a refusal, or no answer)."""
    try:
        return request(method, target, token, body)
    except Answer as exc:
        print(f"notifier: {exc}", file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"notifier: cannot reach {url}: {exc}", file=sys.stderr)
    return None


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def _change(url: str, method: str, target: str, token: str | None, body: dict[str, Any] | None) -> int:
    """``target``: ``LEVEL/VALUE``, or a category (or the root) alone."""
    path = "/".join(urllib.parse.quote(part, safe="") for part in target.split("/", 1))
    target = f"{url.rstrip('/')}/v1/limits/{path}"
    answer = _call(url, method, target, token, body)
    if answer is None:
        return 1
    until = answer.get("until")
    name = f"{answer['level']} {answer['value']}" if answer.get("value") else answer["level"]
    print(f"{name}: {answer['rules']} {'until removed' if until is None else 'until ' + _utc(until)}")
    return 0
