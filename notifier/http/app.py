"""The aiohttp application: wiring (``cleanup_ctx``) and routes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial

import aiohttp
from aiohttp import web

from ..admission.admit import Admission
from ..admission.fallback import Fallback
from ..admission.limiter import Limiter
from ..admission.overrides import WATCH_EVERY, Overrides
from ..config import EMPTY, Config, fingerprint
from ..delivery.dead_letters import DeadLetters
from ..delivery.worker import Delivery
from ..errors import StoreUnavailable
from ..gateway_ts import GatewayTs
from ..metrics import Metrics
from ..policy import Policy
from ..settings import Settings
from ..slack.sinks import make_sink
from ..slack.socket_mode import SocketMode
from ..slack.templates import Templates
from ..store.audit import Audit
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..store.secret import ControlKey
from ..store.topology import connect
from ..tasks import cancel_and_wait, every
from . import admin, alerts, audit_log, console, limits, ops, slack_compat, windows
from .actions import post_action, socket_click
from .alertmanager import post_alertmanager
from .answers import MAX_BODY, answers_errors, no_route
from .auth import GUARD, TOKENS, Guard, Tokens, get_token, guarded
from .events import post_event
from .openapi import openapi_handler
from .state import CONFIG, GATEWAY, METRICS, SETTINGS, Gateway

ANY = r"[\s\S]"  # any character, a newline too (a path may hold %0A; "." would leave it to aiohttp's text 404)
GAUGES_EVERY = 5.0  # seconds between two reads of the global level's use for the gauges


async def gateway_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the store, Slack session and delivery worker; close them on shutdown."""
    settings, metrics = app[SETTINGS], app[METRICS]
    store = connect(
        settings.redis_url,
        settings.redis_cluster,
        settings.redis_timeout / 1000,
        settings.redis_min_replicas,
        settings.redis_sentinels or (),
        settings.redis_sentinel_master,
    )
    keys, scripts = Keys(settings.key_prefix), Scripts(store.redis, flags=not store.embedded)
    metrics.watch_store(store)
    async with aiohttp.ClientSession() as session:
        sink = make_sink(settings, session)
        defaults = Policy.from_settings(settings, app[CONFIG])
        limiter = Limiter(store, scripts, keys, settings, defaults, edits=sink.edits)
        audit = Audit(store, keys, settings.audit_max_entries, settings.audit_retention)
        overrides = Overrides(store, scripts, keys, defaults, limiter, metrics.overrides, audit)
        with contextlib.suppress(StoreUnavailable):  # else the watch reads them once the store answers
            await overrides.refresh()
        fallback = (
            Fallback(settings, store, scripts, keys, metrics, limiter)
            if settings.on_store_error == "fail_open"
            else None
        )
        admission = Admission(limiter, fallback, metrics.decisions)
        dead_letters, sent = DeadLetters(store, scripts, keys, audit), GatewayTs(store, scripts, keys)
        control_key = ControlKey(store, keys, settings.control_secret)
        app[GATEWAY] = Gateway(
            settings, store, keys, scripts, admission, overrides, dead_letters, metrics, sent, control_key, audit
        )
        gateway = app[GATEWAY]
        gateway.socket_mode = socket_mode(gateway, session)
        loops = [
            asyncio.create_task(every("watching overrides", lambda: WATCH_EVERY, overrides.watch)),
            asyncio.create_task(
                every("updating level gauges", lambda: GAUGES_EVERY, lambda: limits.update_gauges(gateway))
            ),
        ]
        templates = Templates(app[CONFIG].templates, lambda name: metrics.template_errors.labels(name).inc())
        policy = lambda: limiter.policy  # noqa: E731 (the snapshot in force when asked)
        delivery = Delivery(store, scripts, keys, settings, sink, metrics, policy, templates, control_key)
        await delivery.start()
        if gateway.socket_mode is not None:
            await gateway.socket_mode.start()
        yield
        if gateway.socket_mode is not None:
            await gateway.socket_mode.stop()
        await cancel_and_wait(loops)
        await delivery.stop()
        templates.close()
        await limiter.flush()
        if fallback:
            await fallback.close()
    await store.close()


def socket_mode(gateway: Gateway, session: aiohttp.ClientSession) -> SocketMode | None:
    """This replica's Socket Mode connection, with an app token and a bot token (clicks edit messages)."""
    settings = gateway.settings
    if not (settings.slack_app_token and settings.slack_bot_token):
        return None
    client = SocketMode(settings.slack_app_token, settings.slack_api_url, partial(socket_click, gateway), session)
    gateway.metrics.watch_socket_mode(lambda: client.connected)
    return client


def create_app(settings: Settings, config: Config = EMPTY) -> web.Application:
    """The gateway as an aiohttp application."""
    app = web.Application(client_max_size=MAX_BODY)
    app[SETTINGS], app[CONFIG], app[TOKENS] = settings, config, Tokens(settings, config)
    app[METRICS] = Metrics(None if settings.categories else settings.max_categories, fingerprint(config, settings))
    app.cleanup_ctx.append(gateway_ctx)
    routes = [
        web.post("/v1/events", post_event),
        web.post("/v1/alertmanager", post_alertmanager),
        web.get("/v1/stats", admin.get_stats),
        web.get("/v1/limits", limits.get_limits),
        web.put("/v1/limits/{level}", limits.put_limit),
        web.delete("/v1/limits/{level}", limits.delete_limit),
        web.put("/v1/limits/{level}/{value:" + ANY + "+}", limits.put_limit),
        web.delete("/v1/limits/{level}/{value:" + ANY + "+}", limits.delete_limit),
        web.get("/v1/windows", windows.get_windows),
        web.put("/v1/windows/{name}", windows.put_window),
        web.delete("/v1/windows/{name}", windows.delete_window),
        web.post("/v1/slack/actions", post_action),
        web.get("/v1/alerts", alerts.get_alerts),
        web.post("/v1/alerts/{dedup_key:" + ANY + "+}/ack", alerts.post_ack),
        web.delete("/v1/alerts/{dedup_key:" + ANY + "+}/ack", alerts.delete_ack),
        web.get("/v1/dead", admin.get_dead),
        web.get("/v1/token", get_token),
        web.post("/v1/dead/requeue", admin.post_requeue),
        web.get("/v1/audit", audit_log.get_audit),
        web.get("/healthz", ops.healthz),
        web.get("/readyz", ops.readyz),
        web.get("/metrics", ops.metrics),
        *slack_compat.ROUTES,
        web.get("/openapi.json", openapi_handler),
        web.get("/", console.page),
        web.get(r"/{asset:favicon\.ico|console/[a-z]+\.(?:js|css)}", console.static),
        web.route("*", "/{path:" + ANY + "*}", no_route),
    ]  # last: unknown paths and methods
    # Each handler answers its own errors: no middleware, see answers.py for why; each is reached
    # only by a caller the route table (auth.ROUTES) lets through. The storm's handler does both
    # itself (one coroutine fewer per request); the front doors answer in Slack's shapes and check
    # their own credential (a token in the path or the body).
    own = {post_event, *slack_compat.HANDLERS}
    app.add_routes(
        web.RouteDef(r.method, r.path, r.handler if r.handler in own else answers_errors(guarded(r.handler)), r.kwargs)
        for r in routes
    )
    app[GUARD] = Guard(app[TOKENS], app.router.routes(), settings)
    return app
