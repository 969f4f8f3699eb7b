"""``/v1/limits``: how full every level is, and run-time overrides of its rules.

``GET`` shows, per level and rule, how many are used and when a slot frees; per
global rule the shared slots and each class's reserved slots; and the overrides
in force with when they end. ``PUT /v1/limits/{level}`` overrides a level's
rules for the whole fleet (optionally ``for`` a while), ``DELETE`` removes the
override. Both need the bearer token like every change.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ..admission.batch import rule_args
from ..policy import GLOBAL, Override, Policy
from ..rules import Rule, Rules, format_share, parse_duration_ms, parse_rules, rules_text
from ..settings import CATEGORY_PATTERN
from ..store.client import as_text
from .answers import ApiError, json_response
from .auth import check_token
from .input import invalid, read_json, validated
from .state import GATEWAY, Gateway

log = logging.getLogger(__name__)

MAX_CATEGORIES_SHOWN = 1000
DURATION_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*$"  # the syntax; the value must be positive
RULES_PATTERN = (
    r"^\s*[0-9]+\s*/\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*(,\s*[0-9]+\s*/\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*)*$"
)
CATEGORY_RE = re.compile(CATEGORY_PATTERN)


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


async def get_limits(request: web.Request) -> web.StreamResponse:
    return json_response(await limits_view(request.app[GATEWAY]))


async def limits_view(gateway: Gateway, categories: bool = True) -> dict[str, Any]:
    """Per level and rule: used, remaining, when a slot is available and when the next one frees.

    ``available_in`` is 0 while the rule has room; ``next_free_in`` is when the
    oldest entry in its window leaves. With ``categories`` False, the global level only.
    """
    store, keys, policy = gateway.store, gateway.keys, gateway.admission.limiter.policy
    names: list[str] = []
    if categories:
        seen = {as_text(c) for c in await store.call(store.redis.smembers, keys.categories)}
        listed = seen | set(policy.categories or ()) | set(policy.category_rules) | set(policy.overrides)
        names = sorted(listed - {GLOBAL, "(other)"})[:MAX_CATEGORIES_SHOWN]
    levels = list(policy.levels(names))
    global_rules = levels[0][1]
    key_names = [keys.global_log] + [keys.category_log(c) for c in names]
    key_names += [keys.class_log(reserve.class_id) for reserve in policy.reserves]
    args = [a for _, rules in levels for a in rule_args(rules)] + rule_args(global_rules) * len(policy.reserves)
    replies = iter(await store.run(gateway.scripts.limits, key_names, args))
    views = {name: [_rule_view(rule, next(replies)) for rule in rules] for name, rules in levels}
    class_used = [[int(next(replies)[0]) for _ in global_rules] for _ in policy.reserves]
    if policy.reserves:
        _add_shares(views[GLOBAL], global_rules, policy, class_used)
    return {
        "global": views.pop(GLOBAL),
        "categories": views,
        "overrides": {level: _override_view(o) for level, o in sorted(policy.overrides.items())},
    }


async def update_gauges(gateway: Gateway) -> None:
    """The global level's use as gauges, for dashboards: per rule, and per class and the shared part."""
    metrics = gateway.metrics
    views = (await limits_view(gateway, categories=False))["global"]
    for gauge in (metrics.global_used, metrics.shared_slots, metrics.reserved_slots):
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


def _add_shares(views: list[dict[str, Any]], rules: Rules, policy: Policy, class_used: list[list[int]]) -> None:
    """Per global rule: the shared slots used and free, and each class's reserved slots in use."""
    for index, (view, rule) in enumerate(zip(views, rules, strict=True)):
        slots = [reserve.slots(rule) for reserve in policy.reserves]
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
            for reserve, slot, used_now in zip(policy.reserves, slots, in_reserve, strict=True)
        ]


def _override_view(override: Override) -> dict[str, Any]:
    until = None if override.until_us is None else round(override.until_us / 1e6, 3)
    return {"rules": rules_text(override.rules), "until": until, "by": override.by}


async def put_limit(request: web.Request) -> web.StreamResponse:
    """``PUT /v1/limits/{level}`` with ``{"rules": "20/30m", "for": "1h"}``."""
    gateway = request.app[GATEWAY]
    who = check_token(request, gateway.settings.api_tokens)
    level = _level(request, gateway)
    body = validated(OverrideRequest, await read_json(request, None))
    rules = _parsed("rules", parse_rules, body.rules)
    for_ms = None if body.for_ is None else _parsed("for", parse_duration_ms, body.for_)
    if for_ms is not None and for_ms < 1:
        raise invalid("for", "must be a positive duration, e.g. 1h")
    override = await gateway.overrides.put(level, rules, for_ms, who)
    return json_response({"level": level, **_override_view(override)})


async def delete_limit(request: web.Request) -> web.StreamResponse:
    """``DELETE /v1/limits/{level}``: 404 when no override is in force."""
    gateway = request.app[GATEWAY]
    who = check_token(request, gateway.settings.api_tokens)
    level = _level(request, gateway)
    if not await gateway.overrides.delete(level, who):
        raise ApiError(404, f"no override of {level} is in force")
    rules = gateway.admission.limiter.policy.default_rules(level)
    return json_response({"level": level, "rules": rules_text(rules), "until": None})


def _level(request: web.Request, gateway: Gateway) -> str:
    level = request.match_info["level"]
    if level == GLOBAL:
        return level
    if not CATEGORY_RE.match(level):
        raise invalid("level", "must be global or a category name (1-64 of A-Z a-z 0-9 _ . : -)")
    if not gateway.admission.limiter.policy.allows(level):
        raise invalid("level", f"unknown category {level!r}")
    return level


def _parsed(field: str, parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise invalid(field, str(exc)) from exc
