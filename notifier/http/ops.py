"""Endpoints for load balancers and monitoring: ``/healthz``, ``/readyz``, ``/metrics``."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from ..errors import StoreFull
from .answers import FULL, json_response
from .state import GATEWAY, METRICS

READY_TIMEOUT = 1.0
READY_LIFE_MS = 10_000  # the probe's key expires by itself


async def healthz(request: web.Request) -> web.StreamResponse:
    """200 while the process serves (never waits for the store), with the configuration it runs, the
    state of its Socket Mode connection and, after a reload that found problems, those problems."""
    gateway = request.app.get(GATEWAY)
    socket_mode = gateway.socket_mode_status if gateway is not None else "off"
    answer: dict[str, object] = {"status": "ok", "config": request.app[METRICS].config, "socket_mode": socket_mode}
    if gateway is not None and gateway.config_error:
        answer["config_error"] = gateway.config_error
    return json_response(answer)


async def readyz(request: web.Request) -> web.StreamResponse:
    """200 only while the store answers and takes writes: a write of a few bytes, which a store over
    its maxmemory refuses (``store full``), as it refuses admissions."""
    gateway = request.app[GATEWAY]
    store = gateway.store
    try:
        await asyncio.wait_for(store.call(store.redis.set, gateway.keys.ready, "1", px=READY_LIFE_MS), READY_TIMEOUT)
    except StoreFull:
        return json_response({"status": "unavailable", "error": FULL}, 503)
    except Exception as exc:  # any failure to answer means not ready
        return json_response({"status": "unavailable", "error": str(exc) or type(exc).__name__}, 503)
    return json_response({"status": "ready"})


async def metrics(request: web.Request) -> web.StreamResponse:
    """Prometheus text."""
    body = request.app[METRICS].exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
