"""The operator's endpoints: stats and dead letters (limits: ``limits.py``).

``GET /v1/stats`` reads the fleet's shared totals;
``GET /v1/dead`` lists dead letters and ``POST /v1/dead/requeue`` moves all of
them, or the given ``{"ids": [...]}`` (event ids), back into the outbox.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from ..store.client import as_text
from ..store.keys import Stat
from .answers import ApiError, json_response
from .auth import CALLER
from .state import GATEWAY, Gateway

VIA = ("api", "console", "cli")  # the faces an HTTP caller may name; "slack" is a signed click's alone


async def get_stats(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    await gateway.admission.limiter.flush()
    return json_response(await stats_view(gateway))


async def stats_view(gateway: Gateway) -> dict[str, Any]:
    """Totals shared by all replicas, from the counters the admission script keeps."""
    raw = await gateway.store.call(gateway.store.redis.hgetall, gateway.keys.stats)
    counts = {as_text(k): int(v) for k, v in raw.items()}
    tree = gateway.admission.limiter.policy.tree
    by_category: dict[str, dict[str, int]] = {}
    by_level: dict[str, dict[str, dict[str, int]]] = {level.name: {} for level in tree[1:]}
    for name, value in counts.items():
        outcome, _, category = name.partition(":")
        if category and outcome in Stat.PER_CATEGORY:
            by_category.setdefault(category, {Stat.ACCEPTED: 0, Stat.DROPPED: 0})[outcome] = value
        elif outcome == Stat.PER_LEVEL:
            level, _, rest = category.partition(":")
            outcome, _, level_value = rest.partition(":")
            if level in by_level and outcome in Stat.PER_CATEGORY:
                by_level[level].setdefault(level_value, {Stat.ACCEPTED: 0, Stat.DROPPED: 0})[outcome] = value
    return {
        "accepted": counts.get(Stat.ACCEPTED, 0),
        "dropped": counts.get(Stat.DROPPED, 0),
        "dropped_by_limit": {level.name: counts.get(Stat.dropped_by(level.name), 0) for level in tree},
        "by_category": dict(sorted(by_category.items())),
        "by_level": {level: dict(sorted(values.items())) for level, values in by_level.items()},
        "duplicates": counts.get(Stat.DUPLICATE, 0),
        "resolved": counts.get(Stat.RESOLVED, 0),
        "reopened": counts.get(Stat.REOPENED, 0),
        "escalated": counts.get(Stat.ESCALATED, 0),
        "delivered": counts.get(Stat.DELIVERED, 0),
        "delivered_again": counts.get(Stat.DELIVERED_AGAIN, 0),
        "dead_lettered": counts.get(Stat.DEAD_LETTERED, 0),
        "folded": counts.get(Stat.FOLDED, 0),
        "destinations": {name: _destination(counts, name, _now_ms(gateway)) for name in gateway.destinations},
    }


def _now_ms(gateway: Gateway) -> float:
    """Now by the fleet's clock where known (pauses are noted by it: delivery/channels.py)."""
    store = gateway.store
    return store.store_time_us(time.monotonic()) / 1000 if store.clock_known else time.time() * 1000


def _destination(counts: dict[str, int], name: str, now_ms: float) -> dict[str, Any]:
    """A destination's delivered and dead counts, and until when a 429 last paused it (ISO 8601, or None)."""
    until = counts.get(f"destination:{name}:paused_until", 0)
    paused = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until / 1000)) if until > now_ms else None
    return {
        "delivered": counts.get(f"destination:{name}:delivered", 0),
        "dead": counts.get(f"destination:{name}:dead", 0),
        "paused_until": paused,
    }


async def get_dead(request: web.Request) -> web.StreamResponse:
    """``GET /v1/dead``: ``{"count": N, "entries": [...], "counters": {...}}``.

    What failed and why is event content: with tokens configured it needs the scope ``read``.
    """
    gateway = request.app[GATEWAY]
    dead = gateway.dead_letters
    return json_response(
        {"count": await dead.count(), "entries": await dead.oldest(), "counters": await dead.counters()}
    )


async def post_requeue(request: web.Request) -> web.StreamResponse:
    """``POST /v1/dead/requeue``: no body (or no ``ids``) requeues all."""
    gateway = request.app[GATEWAY]
    raw = await request.read()
    moved = await gateway.dead_letters.requeue(_requested_ids(raw), request[CALLER].name, _via(raw))
    return json_response({"status": "requeued", "count": len(moved), "ids": moved})


def _via(raw: bytes) -> str:
    """The face a requeue was made from, as its body says (``api`` without one), for the audit log."""
    body = json.loads(raw) if raw else {}  # _requested_ids has refused a body that is not JSON
    via = body.get("via", "api") if isinstance(body, dict) else "api"
    if via not in VIA:
        raise ApiError(422, "invalid fields: via", [{"field": "via", "message": f"one of {', '.join(VIA)}"}])
    return str(via)


def _requested_ids(raw: bytes) -> list[str] | None:
    if not raw:  # no body: all (a body of blanks is not JSON, and is refused)
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
