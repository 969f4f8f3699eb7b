"""Reads of the store on behalf of HTTP readers, a bounded number at once per replica.

A replica's redis-py pool holds at most 100 connections (its default), shared by admission,
delivery and every reader, and counts are open (``GET /v1/stats`` needs no token). Unbounded,
a burst of readers takes every connection and event admission answers 503: 1,500 concurrent
``GET /v1/stats`` beside 300 events made 98 of the events 503 (``tests/system/test_readers.py``).
So at most :data:`AT_ONCE` reads run at once on a replica; the others wait their turn, at most
the store's timeout, then get ``503`` "busy" with ``Retry-After: 1``. ``/readyz`` waits in a line
of its own (:data:`PROBES_AT_ONCE`), so that readers flooding a replica do not make it look unready. What
does not read the store (``/healthz``, ``/metrics``, the console's files, ``/openapi.json``) is
never held.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.typedefs import Handler

from .answers import ApiError
from .state import SETTINGS

AT_ONCE = 16  # reads at once per replica: the other 84 connections stay for admission and delivery
PROBES_AT_ONCE = 2  # /readyz at once: a probe comes every few seconds
BUSY = "busy: too many reads at once on this replica; try again"


def bounded(handler: Handler, line: asyncio.Semaphore) -> Handler:
    """``handler``, run only while ``line`` has room (waiting the store's timeout at most)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            await asyncio.wait_for(line.acquire(), request.app[SETTINGS].redis_timeout / 1000)
        except asyncio.TimeoutError:
            raise ApiError(503, BUSY, headers={"Retry-After": "1"}) from None
        try:
            return await handler(request)
        finally:
            line.release()

    return handle
