"""Answers: the one place that turns domain errors into HTTP answers.

Every handler is wrapped in :func:`answers_errors` rather than the app running an
error middleware: with any middleware at all, aiohttp adds two wrapper layers
(the middleware and its own ``_fix_request_current_app``) around every request,
6% of the instructions of an alert-storm request, measured with
``bench/instructions.py``. The storm's own handler (``POST /v1/events``) calls
:func:`error_answer` itself, one coroutine fewer still, and is reached before the
router (``serving.py``, which refuses an application with middlewares). Unknown paths
and methods reach :func:`no_route`, so they are answered in JSON too.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.web_protocol import RequestPayloadError

from ..errors import InDoubt, OutcomeUnknown, StoreFull, StoreUnavailable
from .state import METRICS
from .wire import Answer, Head, head

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024  # the app's client_max_size: aiohttp refuses a longer body, answered 413 here
STORE_RETRY_AFTER = 2  # seconds a client should wait when the store is unreachable
UNAVAILABLE = "store unavailable, try again later"  # the plain 503: nothing happened
FULL = "store full"  # the store is over its maxmemory: nothing written; it recovers by itself
LOG_EVERY = 5.0  # seconds between two log lines about 503s: in an outage there is one per request
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """A request the gateway refuses before deciding anything; nothing was counted."""

    def __init__(
        self, status: int, error: str, details: list[Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(error)
        self.status, self.error, self.details, self.headers = status, error, details or [], headers


JSON_TYPE = {"Content-Type": "application/json; charset=utf-8"}
MAX_HEADS = 4096  # kinds of answer kept (a 429's Retry-After makes one a whole second): then built again
UNREADABLE = (RequestPayloadError, BadHttpMessage)  # what reading a body aiohttp cannot decode raises
_heads: dict[Any, Head] = {}  # (status, extra headers) -> the head of those JSON answers
_refusal_heads: dict[int, Head] = {}  # whole seconds of Retry-After -> the head of those 429s


def json_response(body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer (``wire.Answer``, its head built once per status and headers); orjson, since
    every answer of an alert storm goes through here."""
    try:
        raw = orjson.dumps(body)
    except TypeError:  # e.g. an integer over 64 bits: the stdlib writes any int
        raw = json.dumps(body).encode()
    return Answer(json_head(status, headers), raw)


def json_head(status: int, headers: Mapping[str, str] | None = None) -> Head:
    """The head of JSON answers of ``status`` with ``headers``, built once and shared."""
    key = (status, tuple(headers.items())) if headers else status
    return _heads.get(key) or _kept(_heads, key, status, headers or {})


def _kept(heads: dict[Any, Head], key: Any, status: int, headers: Mapping[str, str]) -> Head:
    """A new head of JSON answers, kept in ``heads`` under ``key`` (at most ``MAX_HEADS``: then
    every one is built again)."""
    if len(heads) >= MAX_HEADS:
        heads.clear()
    made = heads[key] = head(status, {**JSON_TYPE, **headers})
    return made


def refusal_response(body: Mapping[str, Any], retry_after: float) -> web.Response:
    """A ``429`` with ``Retry-After``: the answer to nearly every request of a storm.

    Its head is built once per whole second of ``Retry-After`` and shared: a storm's refusals
    share a handful of values.
    """
    seconds = max(1, math.ceil(retry_after))
    found = _refusal_heads.get(seconds) or _kept(_refusal_heads, seconds, 429, {"Retry-After": str(seconds)})
    return Answer(found, orjson.dumps(body))


def retry_after_header(seconds: float) -> dict[str, str]:
    """``Retry-After`` in whole seconds, rounded up (at least 1)."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def answers_errors(handler: Handler) -> Handler:
    """Wrap ``handler`` so domain errors (and aiohttp's own) become JSON answers; never a traceback."""

    @functools.wraps(handler)
    async def answered(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except Exception as exc:
            return error_answer(request, exc)

    return answered


def error_answer(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The JSON answer to ``exc``, raised by a handler of ``request``; re-raises what is not an error.

    Handlers are wrapped in :func:`answers_errors`; the storm path calls this itself
    (one coroutine fewer per request, see ``events.py``).
    """
    if isinstance(exc, web.HTTPRequestEntityTooLarge):  # aiohttp stops any body past client_max_size
        exc = ApiError(413, f"body over {MAX_BODY // 1024} KiB ({MAX_BODY} bytes)")
    if isinstance(exc, UNREADABLE):  # a body aiohttp cannot read (a broken Content-Encoding, a cut chunk)
        exc = ApiError(400, f"the body could not be read: {exc.__class__.__name__}")
    if isinstance(exc, ApiError):
        return _refused(request, exc.status, {"error": exc.error, "details": exc.details}, exc.headers)
    if isinstance(exc, InDoubt):
        log_unavailable(exc)
        return unavailable(request, {"error": in_doubt(request, exc), "id": exc.id})
    if isinstance(exc, StoreUnavailable):
        log_unavailable(exc)
        return unavailable(request, {"error": FULL if isinstance(exc, StoreFull) else UNAVAILABLE})
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        return _refused(
            request,
            exc.status,
            {"error": exc.reason},
            {k: v for k, v in exc.headers.items() if k in ("Allow", "Retry-After")},
        )
    log.exception("unexpected error on %s %s", request.method, logged_path(request), exc_info=exc)
    return json_response({"error": "internal error"}, 500)


def logged_path(request: web.Request) -> str:
    """The request's route as logs may show it: its pattern, never its parts (a webhook's path holds
    its token)."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "(no route)"


async def no_route(request: web.Request) -> web.StreamResponse:
    """The last route, matching any path: 405 naming the allowed methods where a path exists, else 404."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource is not request.match_info.route.resource:
            allowed |= (await resource.resolve(request))[1]
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()


def unavailable(request: web.Request, body: Mapping[str, Any]) -> web.Response:
    """A ``503`` with ``Retry-After``: the store did not decide (plain), or may have (``in_doubt``)."""
    return _refused(request, 503, body, retry_after_header(STORE_RETRY_AFTER))


def in_doubt(request: web.Request, exc: InDoubt) -> str:
    """The ``error`` of a 503 whose event may have been admitted (``not replicated``, ``outcome
    unknown``); each is counted, so an operator sees how many events were answered in doubt."""
    metrics = request.app.get(METRICS)
    unknown = isinstance(exc, OutcomeUnknown)
    if metrics is not None:
        (metrics.outcome_unknown if unknown else metrics.not_replicated).inc()
    return "outcome unknown" if unknown else "not replicated"


_unavailable = {"next": 0.0, "quiet": 0}


def log_unavailable(exc: StoreUnavailable | InDoubt) -> None:
    """One line per ``LOG_EVERY`` seconds, with how many 503s it stands for."""
    now = time.monotonic()
    if now < _unavailable["next"]:
        _unavailable["quiet"] += 1
        return
    more = f" (and {_unavailable['quiet']} more 503s since the last such line)" if _unavailable["quiet"] else ""
    log.warning("store unavailable, answered 503: %s%s", exc, more)
    _unavailable.update(next=now + LOG_EVERY, quiet=0)


def _refused(
    request: web.Request, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> web.Response:
    metrics = request.app.get(METRICS)
    if metrics is not None:
        metrics.rejected.labels(str(status)).inc()
    return json_response(body, status, headers)
