"""Dead letters: outbox entries Slack refused for good or that failed too often.

``GET /v1/dead`` lists them with their reason; ``POST /v1/dead/requeue`` moves
all of them, or the given ``{"ids": [...]}`` (event ids), back into the outbox
in one atomic step (``lua/requeue.lua``), where they are delivered as new.
"""

from __future__ import annotations

import json

from aiohttp import web

from .errors import ApiError, json_response
from .store import as_text

MAX_LIST = 1000
SHOWN = ("id", "category", "channel", "reason")
# delivered_again: settled a second time, after a crash or a reclaim (a duplicate in Slack)
COUNTERS = ("delivered", "delivered_again", "dead_lettered", "requeued")


async def list_dead(client, keys, limit: int = MAX_LIST) -> list[dict]:
    """The oldest ``limit`` dead letters: event id, category, channel, reason, when."""
    entries = await client.xrange(keys.dead, "-", "+", count=limit)
    result = []
    for entry_id, fields in entries:
        fields = {as_text(k): as_text(v) for k, v in fields.items()}
        item = {name: fields.get(name, "") for name in SHOWN}
        item["dead_id"] = as_text(entry_id)
        item["dead_at_ms"] = int(item["dead_id"].split("-")[0])
        result.append(item)
    return result


async def requeue(scripts, keys, ids: list[str] | None = None) -> list[str]:
    """Move dead letters (all, or those with these event ids) back into the outbox."""
    moved = await scripts.requeue(keys=[keys.outbox, keys.dead, keys.stats], args=list(ids or []))
    return [as_text(event_id) for event_id in moved]


def _gateway(request: web.Request):
    from .app import GATEWAY  # the app module imports this one

    return request.app[GATEWAY]


async def delivery_counts(client, keys) -> dict[str, int]:
    """Fleet-wide delivery counters from the stats hash (``/v1/stats`` shows only some)."""
    values = await client.hmget(keys.stats, COUNTERS)
    return {name: int(value or 0) for name, value in zip(COUNTERS, values)}


async def get_dead(request: web.Request) -> web.Response:
    """``GET /v1/dead``: ``{"count": N, "entries": [...], "counters": {...}}``."""
    gateway = _gateway(request)
    entries = await list_dead(gateway.client, gateway.keys)
    return json_response({"count": await gateway.client.xlen(gateway.keys.dead), "entries": entries,
                          "counters": await delivery_counts(gateway.client, gateway.keys)})


async def post_requeue(request: web.Request) -> web.Response:
    """``POST /v1/dead/requeue``: no body (or no ``ids``) requeues all."""
    from .app import check_token

    gateway = _gateway(request)
    check_token(request, gateway.settings.api_tokens)
    ids = _requested_ids(await request.read())
    moved = await requeue(gateway.scripts, gateway.keys, ids)
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


ROUTES = [web.get("/v1/dead", get_dead), web.post("/v1/dead/requeue", post_requeue)]
