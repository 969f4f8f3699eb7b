"""What ``notifier check-config``, ``notifier route`` and ``notifier render`` read and print.

Each reads a configuration file (and the settings of the environment) without
starting anything. Token hashes are never printed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .config import FIELD_PREFIX, Config
from .destinations.spec import DestinationConfig
from .models import ANONYMOUS, Event
from .outbox import EventEntry
from .policy import Policy
from .routing import Route
from .rules import format_share, rules_text
from .tree import Level, Reserves

ROUTE_KEYS = ("category", "source", "severity", "status", "channel")  # what `notifier route` takes
RENDER_KEYS = ("text", "title", "dedup_key", "id")  # and `notifier render` too
EVENT_VALUES = ("category", "text", "title", "severity", "status", "dedup_key")  # the event's own
LINK_PREFIX = "link:"


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
    lines.append("destinations (the first is the default; secrets are never shown):")
    lines += [f"  {name}: {_destination(spec)}" for name, spec in config.destinations.items()] or [
        "  one, from the NOTIFIER_SLACK_* settings"
    ]
    return "\n".join(lines)


def _destination(spec: DestinationConfig) -> str:
    """``kind slack, channel #alerts, rate 1/1s, bot token from a file``: never a secret's value."""
    parts = [f"kind {spec.kind}"] + ([f"channel {spec.channel}"] if spec.channel else [])
    parts += [f"rate {rules_text(spec.rate)}"] if spec.rate else []
    for name in ("bot_token", "app_token", "signing_secret", "url"):
        if getattr(spec, f"{name}_file"):
            parts.append(f"{name.replace('_', ' ')} from a file")
        elif getattr(spec, name):
            parts.append(f"{name.replace('_', ' ')} from the environment")
    return ", ".join(parts)


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
    where = ":".join(part for part in (route.destination, route.channel) if part)
    return f"{match} -> {where}{extras}"


def _token_extras(channels: tuple[str, ...], mentions: bool) -> str:
    parts = [] if channels == ("*",) else [f"channels {', '.join(channels)}"]
    if mentions:
        parts.append("mentions")
    return f" ({'; '.join(parts)})" if parts else ""


def explain_route(policy: Policy, given: Mapping[str, str]) -> str:
    """Where an event with ``given`` keys (``category=db``, ``field:team=db``, ...) goes, and its
    value and rules at every level. ``ValueError`` for a key or value an event cannot have."""
    event, plain = _event(given)
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


def render_entry(policy: Policy, given: Mapping[str, str]) -> EventEntry:
    """The outbox entry of an event with ``given`` keys (``text=...``, ``field:team=db``, ``link:Runbook=URL``...)
    as ``notifier render`` shows it, routed like any. ``ValueError`` for a key or value an event cannot have."""
    event, plain = _event(given, RENDER_KEYS)
    source = plain.get("source", ANONYMOUS)
    path = policy.route(event, source, plain.get("channel"))
    body = event.model_dump(mode="json", exclude_none=True)
    return EventEntry(plain.get("id", "0-0"), event.category, path.channel, body, 0.0, source=source)


def _event(given: Mapping[str, str], more: tuple[str, ...] = ()) -> tuple[Event, dict[str, str]]:
    """The event ``given`` describes, and its plain keys: :data:`ROUTE_KEYS`, ``field:NAME``, and
    the keys in ``more`` (then ``link:TEXT=URL`` too)."""
    prefixes = (FIELD_PREFIX, LINK_PREFIX) if more else (FIELD_PREFIX,)
    plain = {k: v for k, v in given.items() if not k.startswith(prefixes)}
    known = (*ROUTE_KEYS, *more)
    unknown = set(plain) - set(known)
    if unknown:
        also = " or link:TEXT" if more else ""
        raise ValueError(f"unknown key {sorted(unknown)[0]!r}: give {', '.join(known)}, field:NAME{also}")
    fields = {k.removeprefix(FIELD_PREFIX): v for k, v in given.items() if k.startswith(FIELD_PREFIX)}
    links = [{"text": k.removeprefix(LINK_PREFIX), "url": v} for k, v in given.items() if k.startswith(LINK_PREFIX)]
    body = {"category": "-", "text": "-", **{k: v for k, v in plain.items() if k in EVENT_VALUES}}
    return Event.model_validate({**body, "fields": fields, "links": links}), plain
