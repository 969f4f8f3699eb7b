"""What ``notifier check-config`` and ``notifier route`` print: the tree, routes and tokens, in words.

Both read a configuration file (and the settings of the environment) without
starting anything. Token hashes are never printed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .config import FIELD_PREFIX, Config
from .models import ANONYMOUS, Event
from .policy import Policy
from .routing import Route
from .rules import format_share, rules_text
from .tree import Level, Reserves


def summary(policy: Policy, config: Config) -> str:
    """The tree with each level's rules and reserves, the routes, the tokens with their scopes, the templates."""
    lines = ["levels (every event passes every level, from the root down):"]
    for index, level in enumerate(policy.tree):
        lines += list(_level_lines(index, level))
    lines.append("routes (the first that matches decides):")
    lines += [f"  {_route(route)}" for route in policy.router.routes] or ["  none"]
    lines.append(f"  otherwise -> {policy.router.default_channel}")
    lines.append("tokens:")
    tokens = [
        f"  {name}: {', '.join(t.scopes)}{_token_extras(t.channels, t.mentions)}" for name, t in config.tokens.items()
    ]
    lines += tokens or ["  none (every route is open unless NOTIFIER_API_TOKENS is set)"]
    lines.append("templates: " + (", ".join(config.templates) or "none (the built-in shape)"))
    return "\n".join(lines)


def _level_lines(index: int, level: Level) -> Iterator[str]:
    key = "the root: every event" if level.key is None else f"key {level.key}"
    yield f"  {index}. {level.name} ({key}): {rules_text(level.rules)}{_reserves(level.reserves)}"
    for value, rules in level.values.items():
        own = level.value_reserves.get(value)
        yield f"       {value}: {rules_text(rules)}{_reserves(own) if own is not None else ''}"


def _reserves(reserves: Reserves) -> str:
    if not reserves:
        return ""
    return "; reserves " + ", ".join(f"{r.class_id} {format_share(r.share)}" for r in reserves)


def _route(route: Route) -> str:
    match = ", ".join(f"{key}={pattern.pattern}" for key, pattern in route.match) or "everything"
    extras = "".join(
        f", {name} {value}" for name, value in (("template", route.template), ("category", route.category)) if value
    )
    return f"{match} -> {route.channel}{extras}"


def _token_extras(channels: tuple[str, ...], mentions: bool) -> str:
    parts = [] if channels == ("*",) else [f"channels {', '.join(channels)}"]
    if mentions:
        parts.append("mentions")
    return f" ({'; '.join(parts)})" if parts else ""


def explain_route(policy: Policy, given: Mapping[str, str]) -> str:
    """Where an event with ``given`` keys (``category=db``, ``field:team=db``, ...) goes, and its
    value and rules at every level. ``ValueError`` for a key or value an event cannot have."""
    fields = {k.removeprefix(FIELD_PREFIX): v for k, v in given.items() if k.startswith(FIELD_PREFIX)}
    plain = {k: v for k, v in given.items() if not k.startswith(FIELD_PREFIX)}
    unknown = set(plain) - {"category", "source", "severity", "status", "channel"}
    if unknown:
        raise ValueError(
            f"unknown key {sorted(unknown)[0]!r}: give category, source, severity, status, channel or field:NAME"
        )
    event = Event.model_validate(
        {"category": plain.get("category", "-"), "text": "-", "fields": fields}
        | {k: plain[k] for k in ("severity", "status") if k in plain}
    )
    path = policy.route(event, plain.get("source", ANONYMOUS), plain.get("channel"))
    lines = [f"channel: {path.channel}", f"template: {path.template or '(the built-in shape)'}", "levels:"]
    for index, (level, value) in enumerate(zip(policy.tree, path.values, strict=True)):
        reserves = level.reserves_of(value)
        cls = path.classes[index]
        shown = "(all events)" if level.key is None else value
        own = f"; class {reserves[cls - 1].class_id}" if cls else ""
        lines.append(
            f"  {level.name} = {shown}: {rules_text(policy.rules_for(index, value))}{_reserves(reserves)}{own}"
        )
    return "\n".join(lines)
