"""The operator's endpoints: stats, limits, dead letters.

``GET /v1/stats`` and ``GET /v1/limits`` read the fleet's shared state;
``GET /v1/dead`` lists dead letters and ``POST /v1/dead/requeue`` moves all of
them, or the given ``{"ids": [...]}`` (event ids), back into the outbox.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ..admission.limiter import rule_args
from ..policy import GLOBAL
from ..rules import Rule
from ..store.client import as_text
from ..store.keys import Stat
from .answers import ApiError, json_response
from .auth import check_token
from .state import GATEWAY, Gateway

MAX_CATEGORIES_SHOWN = 1000


async def get_stats(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    await gateway.admission.limiter.flush()
    return json_response(await stats_view(gateway))


async def stats_view(gateway: Gateway) -> dict[str, Any]:
    """Totals shared by all replicas, from the counters the admission script keeps."""
    raw = await gateway.store.call(gateway.store.redis.hgetall, gateway.keys.stats)
    counts = {as_text(k): int(v) for k, v in raw.items()}
    by_category: dict[str, dict[str, int]] = {}
    for name, value in counts.items():
        outcome, _, category = name.partition(":")
        if category and outcome in Stat.PER_CATEGORY:
            by_category.setdefault(category, {Stat.ACCEPTED: 0, Stat.DROPPED: 0})[outcome] = value
    return {
        "accepted": counts.get(Stat.ACCEPTED, 0),
        "dropped": counts.get(Stat.DROPPED, 0),
        "dropped_by_limit": {level: counts.get(Stat.dropped_by(level), 0) for level in (GLOBAL, "category")},
        "by_category": dict(sorted(by_category.items())),
        "duplicates": counts.get(Stat.DUPLICATE, 0),
        "delivered": counts.get(Stat.DELIVERED, 0),
        "delivered_again": counts.get(Stat.DELIVERED_AGAIN, 0),
        "dead_lettered": counts.get(Stat.DEAD_LETTERED, 0),
    }


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


async def get_limits(request: web.Request) -> web.StreamResponse:
    return json_response(await limits_view(request.app[GATEWAY]))


async def limits_view(gateway: Gateway) -> dict[str, Any]:
    """Per level and rule: used, remaining, when a slot is available and when the next one frees.

    ``available_in`` is 0 while the rule has room; ``next_free_in`` is when the
    oldest entry in its window leaves.
    """
    store, keys, policy = gateway.store, gateway.keys, gateway.admission.limiter.policy
    seen = {as_text(c) for c in await store.call(store.redis.smembers, keys.categories)}
    categories = sorted(seen | set(policy.categories or ()) | set(policy.category_rules))[:MAX_CATEGORIES_SHOWN]
    levels = list(policy.levels(categories))
    key_names = [keys.global_log] + [keys.category_log(c) for c in categories]
    args = [a for _, rules in levels for a in rule_args(rules)]
    replies = iter(await store.run(gateway.scripts.limits, key_names, args))
    views = {name: [_rule_view(rule, next(replies)) for rule in rules] for name, rules in levels}
    return {"global": views.pop(GLOBAL), "categories": views}


async def get_dead(request: web.Request) -> web.StreamResponse:
    """``GET /v1/dead``: ``{"count": N, "entries": [...], "counters": {...}}``."""
    dead = request.app[GATEWAY].dead_letters
    return json_response(
        {"count": await dead.count(), "entries": await dead.oldest(), "counters": await dead.counters()}
    )


async def post_requeue(request: web.Request) -> web.StreamResponse:
    """``POST /v1/dead/requeue``: no body (or no ``ids``) requeues all."""
    gateway = request.app[GATEWAY]
    check_token(request, gateway.settings.api_tokens)
    moved = await gateway.dead_letters.requeue(_requested_ids(await request.read()))
    return json_response({"status": "requeued", "count": len(moved), "ids": moved})


def _requested_ids(raw: bytes) -> list[str] | None:
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "body is not JSON") from None
    ids = body.get("ids") if isinstance(body, dict) else None
    if ids is None and isinstance(body, dict):
        return None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ApiError(422, "ids must be a non-empty list of event ids", [{"field": "ids"}])
    return ids
