"""``/v1/limits``: how full every level of the tree is, and run-time overrides of its rules.

``GET`` shows, per level and value, per rule, how many are used and when a slot
frees; per rule with reserves the shared slots and each class's reserved slots;
and the overrides in force with when they end. A level lists each value that has
events counted (up to ``MAX_SHOWN``), has rules of its own, or an override.

``PUT /v1/limits/{level}/{value}`` overrides the rules of one value of one level
for the whole fleet (optionally ``for`` a while), ``DELETE`` removes the override;
the root is ``/v1/limits/{root}``, and ``/v1/limits/{category}`` (one segment that
is not the root's name) addresses a category at the level named ``category``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ..admission.batch import bucket_of
from ..config import PLAIN_KEYS
from ..models import SEVERITIES, STATUSES
from ..policy import CATEGORY, Override, Policy, Target, override_field
from ..rules import Rule, Rules, format_share, parse_duration_ms, parse_rules, rules_text
from ..settings import CATEGORY_RE
from ..store.client import as_text
from ..tree import Level, Reserves
from .answers import ApiError, json_response
from .auth import CALLER
from .input import invalid, read_json, validated
from .state import GATEWAY, Gateway

log = logging.getLogger(__name__)

MAX_SHOWN = 1000  # values shown per level
DURATION_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*$"  # the syntax; the value must be positive
RULES_PATTERN = (
    r"^\s*[0-9]+\s*/\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*(,\s*[0-9]+\s*/\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*)*$"
)
MAX_VALUE = 1000  # characters of a value (a field's value may be that long)


class OverrideRequest(BaseModel):
    """The body of ``PUT /v1/limits/{level}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    rules: str = Field(
        min_length=1,
        max_length=200,
        pattern=RULES_PATTERN,
        description="COUNT/DURATION rules, comma separated, e.g. 20/30m or 10/1s,100/30m",
    )
    for_: str | None = Field(
        None, alias="for", max_length=20, pattern=DURATION_PATTERN, description="lapse after this long, e.g. 1h"
    )
    via: Literal["api", "console", "cli"] = Field("api", description="the face it was made from, for the audit log")


async def get_limits(request: web.Request) -> web.StreamResponse:
    return json_response(await limits_view(request.app[GATEWAY]))


async def limits_view(gateway: Gateway, below: bool = True) -> dict[str, Any]:
    """Per level, value and rule: used, remaining, when a slot is available and when the next one frees.

    ``available_in`` is 0 while the rule has room; ``next_free_in`` is when the
    oldest entry in its window leaves. With ``below`` False, the root only.
    """
    store, keys, policy = gateway.store, gateway.keys, gateway.admission.limiter.policy
    shown: list[tuple[int, str]] = [(0, "")]
    if below:
        for index, level in enumerate(policy.tree[1:], 1):
            shown += [(index, value) for value in await _values(gateway, policy, index, level)]
    buckets = [bucket_of(keys, policy, level, value) for level, value in shown]
    key_names = [name for bucket in buckets for name in bucket.keys]
    args = [arg for bucket in buckets for arg in bucket.args]
    replies = await store.run(gateway.scripts.limits, key_names, args)
    views: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for (index, value), reply in zip(shown, replies, strict=True):
        rules, reserves = policy.rules_for(index, value), policy.tree[index].reserves_of(value)
        views[(index, value)] = rule_views(rules, reserves, reply)
    return _shape(policy, views)


async def _values(gateway: Gateway, policy: Policy, index: int, level: Level) -> list[str]:
    """The values of a level worth showing: counted in stats, with rules of their own, or overridden."""
    store = gateway.store
    counted = {as_text(v) for v in await store.call(store.redis.smembers, gateway.keys.level_values(level.name))}
    listed = counted | set(level.values) | {value for (name, value) in policy.overrides if name == level.name}
    if level.key == CATEGORY:
        listed |= set(policy.categories or ())
    return sorted(listed - {"(other)"})[:MAX_SHOWN]


def _shape(policy: Policy, views: dict[tuple[int, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """The answer: every level with its values, and (as before the tree) the root's rules under
    ``global`` and the values of the level named ``category`` under ``categories``."""
    levels: list[dict[str, Any]] = []
    for index, level in enumerate(policy.tree):
        values = {value: view for (i, value), view in views.items() if i == index}
        if index == 0:
            levels.append({"name": level.name, "key": None, "rules": values[""]})
        else:
            levels.append({"name": level.name, "key": level.key, "values": values})
    answer: dict[str, Any] = {"levels": levels, "global": levels[0]["rules"]}
    category = policy.level(CATEGORY)
    if category is not None:
        answer["categories"] = levels[category]["values"]
    answer["overrides"] = {
        override_field(target, policy.root.name): _override_view(o) for target, o in sorted(policy.overrides.items())
    }
    return answer


async def update_gauges(gateway: Gateway) -> None:
    """The root's use as gauges, for dashboards: per rule, and per class and the shared part."""
    metrics = gateway.metrics
    views = (await limits_view(gateway, below=False))["global"]
    for gauge in (metrics.global_used, metrics.shared_slots, metrics.reserved_slots):
        if not metrics.shared:  # (workers' files cannot forget a series: one an override ended stays, unchanged)
            gauge.clear()  # rules and classes change with overrides: no stale series
    for view in views:
        metrics.global_used.labels(view["rule"], "used").set(view["used"])
        metrics.global_used.labels(view["rule"], "limit").set(view["limit"])
        if "shared" in view:
            metrics.shared_slots.labels(view["rule"], "used").set(view["shared"]["used"])
            metrics.shared_slots.labels(view["rule"], "slots").set(view["shared"]["slots"])
        for reserve in view.get("reserves", []):
            metrics.reserved_slots.labels(view["rule"], reserve["class"], "used").set(reserve["used"])
            metrics.reserved_slots.labels(view["rule"], reserve["class"], "slots").set(reserve["slots"])


def rule_views(rules: Rules, reserves: Reserves, reply: list[Any]) -> list[dict[str, Any]]:
    """Per rule, what ``limits.lua`` read of one level value; with reserves, the shared and reserved parts."""
    views = [_rule_view(rule, reply[index]) for index, rule in enumerate(rules)]
    if reserves:
        numbers = [int(n) for n in reply[len(rules) :]]
        class_used = [numbers[c * len(rules) : (c + 1) * len(rules)] for c in range(len(reserves))]
        _add_shares(views, rules, reserves, class_used)
    return views


def _rule_view(rule: Rule, reply: list[Any]) -> dict[str, Any]:
    used, free_us, oldest_us = (int(v) for v in reply)
    return {
        "rule": rule.text,
        "limit": rule.count,
        "used": used,
        "remaining": max(0, rule.count - used),
        "available_in": round(free_us / 1e6, 3),
        "next_free_in": round(oldest_us / 1e6, 3),
    }


def _add_shares(views: list[dict[str, Any]], rules: Rules, reserves: Reserves, class_used: list[list[int]]) -> None:
    """Per rule: the shared slots used and free, and each class's reserved slots in use."""
    for index, (view, rule) in enumerate(zip(views, rules, strict=True)):
        slots = [reserve.slots(rule) for reserve in reserves]
        in_reserve = [min(used[index], slot) for used, slot in zip(class_used, slots, strict=True)]
        shared, overflow = rule.count - sum(slots), view["used"] - sum(in_reserve)
        view["shared"] = {"slots": shared, "used": overflow, "free": max(0, shared - overflow)}
        view["reserves"] = [
            {
                "class": reserve.name,
                "kind": reserve.kind,
                "share": format_share(reserve.share),
                "slots": slot,
                "used": used_now,
                "free": slot - used_now,
            }
            for reserve, slot, used_now in zip(reserves, slots, in_reserve, strict=True)
        ]


def _override_view(override: Override) -> dict[str, Any]:
    until = None if override.until_us is None else round(override.until_us / 1e6, 3)
    return {"rules": rules_text(override.rules), "until": until, "by": override.by}


async def put_limit(request: web.Request) -> web.StreamResponse:
    """``PUT /v1/limits/{level}[/{value}]`` with ``{"rules": "20/30m", "for": "1h"}``."""
    gateway = request.app[GATEWAY]
    who = request[CALLER].name
    target = _target(request, gateway.admission.limiter.policy)
    body = validated(OverrideRequest, await read_json(request))
    rules = _parsed("rules", parse_rules, body.rules)
    for_ms = None if body.for_ is None else _parsed("for", parse_duration_ms, body.for_)
    if for_ms is not None and for_ms < 1:
        raise invalid("for", "must be a positive duration, e.g. 1h")
    override = await gateway.overrides.put(target, rules, for_ms, who, body.via)
    answer = {"level": target[0], "value": target[1], **_override_view(override)}
    return json_response(_as_addressed(request, answer))


async def delete_limit(request: web.Request) -> web.StreamResponse:
    """``DELETE /v1/limits/{level}[/{value}]``: 404 when no override is in force."""
    gateway = request.app[GATEWAY]
    who = request[CALLER].name
    policy = gateway.admission.limiter.policy
    level, value = request.match_info["level"], request.match_info.get("value")
    gone = value is not None and policy.level(level) is None  # a level of a former configuration
    target = (level, value or "") if gone else _target(request, policy)
    if not await gateway.overrides.delete(target, who):
        raise ApiError(404, f"no override of {' '.join(target).strip()} is in force")
    index = policy.level(target[0])
    rules = None if index is None else rules_text(policy.default_rules(index, target[1]))
    answer = {"level": target[0], "value": target[1], "rules": rules, "until": None}
    return json_response(_as_addressed(request, answer))


def _as_addressed(request: web.Request, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer as the request addressed it: ``level`` and ``value``, or (one segment, as before
    the tree) ``level`` alone, the root's or a category's name."""
    value = answer.pop("value", "")
    if "value" in request.match_info:
        return {**answer, "value": value}
    return {**answer, "level": request.match_info["level"]}


def _target(request: web.Request, policy: Policy) -> Target:
    """The level value a request addresses: the root, a category alone, or a level and its value."""
    level, value = request.match_info["level"], request.match_info.get("value")
    if value is None and level == policy.root.name:
        return (level, "")
    if value is None:
        if policy.level(CATEGORY) is None:
            raise invalid("level", f"no level {level!r}: give the root's name, or a level and one of its values")
        level, value = CATEGORY, level
    index = policy.level(level)
    if index is None:
        raise invalid("level", f"no level {level!r} in the tree ({', '.join(lv.name for lv in policy.tree)})")
    if index == 0:
        raise invalid("value", f"{level!r} is the root: it has no values")
    return (level, _checked_value(policy, policy.tree[index], value))


def _checked_value(policy: Policy, level: Level, value: str) -> str:
    """``value`` when it is one the level's key can have, else a 422 saying why."""
    key = level.key or ""
    if key == "category" and (not CATEGORY_RE.fullmatch(value) or not policy.allows(value)):
        if not CATEGORY_RE.fullmatch(value):
            raise invalid("level", "must be global or a category name (1-64 of A-Z a-z 0-9 _ . : -)")
        raise invalid("level", f"unknown category {value!r}")
    if key == "severity" and value not in SEVERITIES:
        raise invalid("value", f"a severity is one of {', '.join(SEVERITIES)}")
    if key == "status" and value not in STATUSES:
        raise invalid("value", f"a status is one of {', '.join(STATUSES)}")
    if not 1 <= len(value) <= MAX_VALUE or (key not in PLAIN_KEYS and not value.isprintable()):
        raise invalid("value", f"must be 1-{MAX_VALUE} printable characters")
    return value


def _parsed(field: str, parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise invalid(field, str(exc)) from exc
