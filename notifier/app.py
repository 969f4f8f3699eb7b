"""The aiohttp application: wiring (``cleanup_ctx``) and thin handlers."""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import time
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from . import alertmanager, deadletters, store
from .delivery import Delivery
from .fallback import Fallback, make_fallback
from .errors import ApiError, answers_errors, json_response, no_route, retry_after_header
from .limiter import Decision, Limiter
from .metrics import METRICS, Metrics
from .models import Event
from .openapi import openapi_handler
from .settings import Settings
from .slack import make_sink
from .views import limits_view, stats_view

MAX_BODY = 64 * 1024
READY_TIMEOUT = 1.0


@dataclass
class Gateway:
    """Everything a handler needs, built once at start-up."""

    settings: Settings
    client: object
    keys: store.Keys
    scripts: store.Scripts
    limiter: Limiter
    metrics: Metrics
    fallback: Fallback | None = None  # NOTIFIER_ON_STORE_ERROR=fail_open


SETTINGS = web.AppKey("settings", Settings)
GATEWAY = web.AppKey("gateway", Gateway)


async def gateway_ctx(app: web.Application):
    """Open the store, Slack session and delivery worker; close them on shutdown."""
    settings, metrics = app[SETTINGS], app[METRICS]
    client = store.connect(settings)
    keys, scripts = store.Keys(settings.key_prefix), store.Scripts(client)
    limiter = Limiter(scripts, keys, settings)
    fallback = make_fallback(settings, client, keys, metrics.registry, limiter)
    app[GATEWAY] = Gateway(settings, client, keys, scripts, limiter, metrics, fallback)
    async with aiohttp.ClientSession() as session:
        delivery = Delivery(client, scripts, keys, settings, make_sink(settings, session), metrics)
        await delivery.start()
        yield
        await delivery.stop()
        await limiter.flush()
        if fallback:
            await fallback.close()
    await client.aclose()


def create_app(settings: Settings) -> web.Application:
    """The gateway as an aiohttp application."""
    app = web.Application(client_max_size=MAX_BODY)
    app[SETTINGS], app[METRICS] = settings, Metrics()
    app.cleanup_ctx.append(gateway_ctx)
    routes = [web.post("/v1/events", post_event), web.post("/v1/alertmanager", post_alertmanager),
              web.get("/v1/stats", get_stats), web.get("/v1/limits", get_limits),
              web.get("/healthz", healthz), web.get("/readyz", readyz),
              web.get("/metrics", metrics_handler), web.get("/openapi.json", openapi_handler),
              *deadletters.ROUTES,
              web.route("*", "/{path:.*}", no_route)]  # last: unknown paths and methods
    # Each handler answers its own errors: no middleware, see errors.py for why.
    app.add_routes(web.RouteDef(r.method, r.path, answers_errors(r.handler), r.kwargs) for r in routes)
    return app


# -- request checks --------------------------------------------------------------


def check_token(request: web.Request, tokens: list[str] | None) -> None:
    """With ``NOTIFIER_API_TOKENS`` set (``tokens``), require one of them as a bearer token (constant time)."""
    if not tokens:
        return
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # A header with undecodable bytes arrives with surrogates; keep them as bytes, never a 500.
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(given_bytes, token.encode())
    if scheme.lower() != "bearer" or not matched:
        # RFC 6750: a 401 names the scheme a client must use.
        raise ApiError(401, "missing or wrong bearer token",
                       headers={"WWW-Authenticate": 'Bearer realm="notifier"'})


async def read_json(request: web.Request, settings: Settings) -> object:
    """The request body as JSON, refusing wrong types and oversized bodies."""
    return decode_json(await read_body(request, settings))


async def read_body(request: web.Request, settings: Settings) -> bytes:
    """The raw body of a POST, after its token, type and size are checked."""
    check_token(request, settings.api_tokens)
    # The media type before any parameter (e.g. charset), read directly: aiohttp's
    # content_type runs a full header parser, a visible cost on every storm request.
    content_type = request.headers.get("Content-Type", "")
    if content_type != "application/json" and _media_type(content_type) != "application/json":
        raise ApiError(415, "Content-Type must be application/json")
    try:
        # client_max_size stops any body, declared or chunked, after 64 KiB
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise ApiError(413, f"body over 64 KiB ({MAX_BODY} bytes)") from exc
    return raw


def _media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    # Two values for one key are read differently by different parsers: refuse them.
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


_KEY_END = re.compile(rb'"\s*:')  # how every object key ends; string contents may match too
MAX_DEPTH = 64


def decode_json(raw: bytes) -> object:
    """Strict JSON: UTF-8, no NaN/Infinity, finite numbers, no duplicate keys, bounded nesting.

    The fast path is orjson, which already refuses NaN, Infinity, out-of-range
    numbers and bad UTF-8 but keeps the last of duplicate keys; when a key may
    have been repeated (see :func:`_no_key_repeated`), the strict stdlib path
    decides, which also gives the precise error.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _decode_strictly(raw)
    keys = _count_keys(value, 0) if type(value) in (dict, list) else 0
    if keys is None or not _no_key_repeated(raw, keys):
        return _decode_strictly(raw)
    return value


def _no_key_repeated(raw: bytes, keys: int) -> bool:
    """True when ``keys``, the number of keys a parser kept from ``raw``, proves none was repeated.

    Every key in the text ends in ``"``, blanks and ``:``, and strings may hold
    more such spots, so the count of those spots (or of all colons, a cheaper
    upper bound) is at least the number of keys written. When it equals the
    number of keys kept, none was repeated. False may also mean "cannot tell".
    """
    return keys == raw.count(b":") or keys == len(_KEY_END.findall(raw))


def _count_keys(value: object, depth: int) -> int | None:
    """Keys in all objects of ``value``; None when nested deeper than ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        return None
    count = len(value) if type(value) is dict else 0
    for item in value.values() if type(value) is dict else value:
        if type(item) is dict or type(item) is list:
            inner = _count_keys(item, depth + 1)
            if inner is None:
                return None
            count += inner
    return count


def _decode_strictly(raw: bytes) -> object:
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates,
                          parse_constant=_no_constant, parse_float=_finite)
    except _DuplicateKey as exc:
        raise ApiError(422, f"invalid fields: {exc.key} (duplicate key)", [
            {"field": exc.key, "message": "duplicate key"}]) from exc
    except RecursionError as exc:
        raise ApiError(400, "body is not acceptable JSON: nested too deeply") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"body is not valid UTF-8 JSON: {exc}") from exc


def validation_details(exc: ValidationError) -> list[dict]:
    return [{"field": ".".join(map(str, e["loc"])) or "body", "message": e["msg"]} for e in exc.errors()]


def parse_event(raw: bytes, settings: Settings) -> Event:
    """Decode and validate a body into an :class:`Event`, or raise a 4xx naming the problem."""
    event = _plain_event(raw)
    if event is None:
        event = _validated_event(decode_json(raw))
    problem = unknown_category(event.category, settings)
    if problem:
        raise ApiError(422, "invalid fields: category", [{"field": "category", "message": problem}])
    return event


def unknown_category(category: str, settings: Settings) -> str | None:
    """What is wrong with ``category`` when ``NOTIFIER_CATEGORIES`` is set and does not name it."""
    if settings.categories is None or category in settings.categories:
        return None
    return f"unknown category {category!r}"


def _plain_event(raw: bytes) -> Event | None:
    """The event, if ``raw`` is a valid one with no unknown and no repeated key; else None.

    The fast path of a storm: pydantic parses and validates in one step. Every
    key it kept is counted against the text (:func:`_no_key_repeated`); an
    unknown key, a repeated one or any error sends the body down the strict
    path, which gives the precise answer.
    """
    try:
        event = Event.model_validate_json(raw)
    except ValidationError:
        return None
    return event if _no_key_repeated(raw, len(event.model_fields_set) + len(event.fields)) else None


def _validated_event(body: object) -> Event:
    if not isinstance(body, dict):
        raise ApiError(422, "body must be a JSON object", [{"field": "body", "message": "not an object"}])
    try:
        return Event.model_validate(body)
    except ValidationError as exc:
        details = validation_details(exc)
        raise ApiError(422, "invalid fields: " + ", ".join(d["field"] for d in details), details) from exc


# -- handlers ----------------------------------------------------------------------


async def decide(gateway: Gateway, event: Event) -> Decision:
    """Run one event through the limiter and count the outcome."""
    started = time.perf_counter()
    # In a storm nearly every event meets a level known to be full: no await, no round trip.
    decision = gateway.limiter.refuse_locally(event)
    if decision is None:
        try:
            decision = await gateway.limiter.decide_in_store(event)
        except store.StoreUnavailable:
            if gateway.fallback is None:
                raise
            decision = gateway.fallback.admit(event)
    gateway.metrics.decisions.count(event.category, decision.outcome, decision.level,
                                    time.perf_counter() - started)
    return decision


def decision_body(decision: Decision) -> dict:
    if decision.outcome == "dropped":
        return {"status": "dropped", "limit": decision.level, "rule": decision.rule,
                "retry_after": decision.retry_after}
    if decision.outcome == "shadow":
        return {"status": "accepted", "id": decision.id, "shadow": {
            "would_drop": True, "limit": decision.level, "rule": decision.rule}}
    return {"status": decision.outcome, "id": decision.id}


async def post_event(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    event = parse_event(await read_body(request, gateway.settings), gateway.settings)
    decision = await decide(gateway, event)
    body = decision_body(decision)
    if decision.outcome == "dropped":
        return json_response(body, 429, retry_after_header(decision.retry_after))
    return json_response(body, 200 if decision.outcome == "duplicate" else 202)


async def post_alertmanager(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    body = await read_json(request, gateway.settings)
    try:
        payload = alertmanager.Payload.model_validate(body)
        label = gateway.settings.alertmanager_category_label
        events = [alertmanager.to_event(alert, label) for alert in payload.alerts]
    except ValidationError as exc:
        raise ApiError(422, "not an Alertmanager webhook payload", validation_details(exc)) from exc
    outcomes = await asyncio.gather(*(alert_outcome(gateway, e) for e in events))
    results = [dict(o, category=e.category, fingerprint=a.fingerprint)
               for o, e, a in zip(outcomes, events, payload.alerts)]
    return json_response({"status": "ok", "results": results})


async def alert_outcome(gateway: Gateway, event: Event) -> dict:
    """One alert's entry in the webhook answer.

    An alert of a category ``NOTIFIER_CATEGORIES`` does not name is refused on
    its own (never admitted, counted as a 422), not by failing the whole
    payload: a 4xx would make Alertmanager report the other alerts as failed.
    """
    problem = unknown_category(event.category, gateway.settings)
    if problem:
        gateway.metrics.rejected.labels("422").inc()
        return {"status": "rejected", "error": problem}
    return decision_body(await decide(gateway, event))


async def get_stats(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    await gateway.limiter.flush()
    return json_response(await stats_view(gateway.client, gateway.keys))


async def get_limits(request: web.Request) -> web.Response:
    gateway = request.app[GATEWAY]
    return json_response(await limits_view(gateway.client, gateway.scripts, gateway.keys, gateway.settings))


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    client = request.app[GATEWAY].client
    try:
        await asyncio.wait_for(client.ping(), READY_TIMEOUT)
    except Exception as exc:  # any failure to answer means not ready
        return json_response({"status": "unavailable", "error": str(exc) or type(exc).__name__}, 503)
    return json_response({"status": "ready"})


async def metrics_handler(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
