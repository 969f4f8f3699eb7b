"""The aiohttp application: wiring (``cleanup_ctx``) and routes."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator

import aiohttp
from aiohttp import web

from ..admission.overrides import WATCH_EVERY
from ..config import EMPTY, Config, fingerprint
from ..delivery.dead_letters import DeadLetters
from ..delivery.worker import Delivery
from ..gateway_ts import GatewayTs
from ..metrics import Metrics
from ..settings import Settings
from ..slack.names import Names, directories
from ..slack.templates import Templates
from ..slack.workspaces import Workspaces
from ..store.audit import Audit
from ..store.client import Store
from ..store.history import History
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..store.secret import ControlKey
from ..store.topology import connect
from ..tasks import cancel_and_wait, every
from . import admin, alerts, audit_log, console, history, limits, names, ops, readers, reload, slack_compat, windows
from .actions import post_action
from .alertmanager import post_alertmanager
from .answers import MAX_BODY, answers_errors, no_route
from .assemble import Deciding, Parts, deciding, sending
from .auth import GUARD, TOKENS, Guard, Tokens, get_token, guarded
from .events import post_event
from .openapi import openapi_handler
from .reload import RELOAD, Reloader
from .reload import WATCH_EVERY as RELOAD_WATCH
from .slack_links import learn_teams, socket_modes
from .state import CONFIG, GATEWAY, METRICS, SETTINGS, Gateway

ANY = r"[\s\S]"  # any character, a newline too (a path may hold %0A; "." would leave it to aiohttp's text 404)
GAUGES_EVERY = 5.0  # seconds between two reads of the global level's use for the gauges


async def gateway_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the store, Slack session and delivery worker; close them on shutdown."""
    settings, metrics, config = app[SETTINGS], app[METRICS], app[CONFIG]
    store = connect_store(settings)
    keys, scripts = Keys(settings.key_prefix), Scripts(store.redis, flags=not store.embedded)
    metrics.watch_store(store)
    parts = Parts(store, scripts, keys, settings, metrics, Audit(store, keys, *_audit_bounds(settings)))
    async with aiohttp.ClientSession() as session:
        outlets = sending(config, settings, session)
        decided = await deciding(parts, config, outlets.sinks.any_edits)
        gateway = app[GATEWAY] = _gateway(parts, decided)
        gateway.workspaces = Workspaces(outlets.destinations, outlets.sinks.named)
        gateway.destinations = tuple(d.name for d in outlets.destinations)
        gateway.socket_modes = socket_modes(gateway, session)
        templates = Templates(config.templates, lambda name: metrics.template_errors.labels(name).inc())
        policy = lambda: gateway.admission.limiter.policy  # noqa: E731 (the snapshot in force when asked)
        delivery = Delivery(
            store,
            scripts,
            keys,
            settings,
            outlets.sinks,
            metrics,
            policy,
            templates,
            gateway.control_key,
            outlets.clicks,
        )
        reloader = app[RELOAD] = Reloader(gateway, parts, session, delivery, templates, app[TOKENS], config)
        loops = [*_loops(gateway, reloader, session), console_parts(app, gateway, session)]
        await delivery.start()
        for client in gateway.socket_modes:
            await client.start()
        with _on_hangup(reloader):
            yield
        for client in gateway.socket_modes:
            await client.stop()
        await cancel_and_wait(loops)
        await delivery.stop()
        templates.close()
        await gateway.admission.limiter.flush()
        if gateway.admission.fallback:
            await gateway.admission.fallback.close()
        await reloader.close()
    await store.close()


def _audit_bounds(settings: Settings) -> tuple[int, int]:
    return settings.audit_max_entries, settings.audit_retention


def _gateway(parts: Parts, decided: Deciding) -> Gateway:
    store, scripts, keys, settings, metrics, audit = parts
    dead_letters, sent = DeadLetters(store, scripts, keys, audit), GatewayTs(store, scripts, keys)
    control_key = ControlKey(store, keys, settings.control_secret)
    return Gateway(
        settings,
        store,
        keys,
        scripts,
        decided.admission,
        decided.overrides,
        dead_letters,
        metrics,
        sent,
        control_key,
        audit,
    )


def _loops(gateway: Gateway, reloader: Reloader, session: aiohttp.ClientSession) -> list[asyncio.Task[None]]:
    """The replica's background loops: team ids, overrides, the levels' gauges, the file's changes."""
    return [
        asyncio.create_task(learn_teams(gateway.workspaces, session)),
        asyncio.create_task(every("watching overrides", lambda: WATCH_EVERY, lambda: gateway.overrides.watch())),
        asyncio.create_task(
            every("updating level gauges", lambda: GAUGES_EVERY, lambda: limits.update_gauges(gateway))
        ),
        asyncio.create_task(every("watching the configuration file", lambda: RELOAD_WATCH, reloader.watch)),
    ]


@contextlib.contextmanager
def _on_hangup(reloader: Reloader) -> Iterator[None]:
    """``SIGHUP`` reads the configuration file again (where the platform has it, in the main thread)."""
    loop = asyncio.get_running_loop()
    hangup = getattr(signal, "SIGHUP", None)
    try:
        if hangup is not None:
            loop.add_signal_handler(hangup, lambda: loop.create_task(reloader.quietly("signal", "file")))
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (a test's app), or no signals
        hangup = None
    try:
        yield
    finally:
        if hangup is not None:
            loop.remove_signal_handler(hangup)


def connect_store(settings: Settings) -> Store:
    """The store the settings name (a single node, a Cluster or Sentinel's)."""
    return connect(
        settings.redis_url,
        settings.redis_cluster,
        settings.redis_timeout / 1000,
        settings.redis_min_replicas,
        settings.redis_sentinels or (),
        settings.redis_sentinel_master,
    )


def console_parts(app: web.Application, gateway: Gateway, session: aiohttp.ClientSession) -> asyncio.Task[None]:
    """The console's chart and names (http/history.py, http/names.py); the loop that samples each minute."""
    minutes = app[history.HISTORY] = History(gateway.store, gateway.scripts, gateway.keys)
    clients = lambda: directories(gateway.workspaces.all, session)  # noqa: E731 (those in force: reloads swap them)
    app[names.NAMES] = Names(clients, gateway.store, gateway.keys)
    return asyncio.create_task(every("sampling the counts of the minute", minutes.pause, minutes.sample))


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
        web.get("/v1/stats/history", history.get_history),
        web.get("/v1/names", names.get_names),
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
        web.post("/v1/reload", reload.post_reload),
        web.get("/healthz", ops.healthz),
        web.get("/readyz", ops.readyz),
        web.get("/metrics", ops.metrics),
        *slack_compat.ROUTES,
        web.get("/openapi.json", openapi_handler),
        web.get("/", console.page),
        web.get(r"/{asset:favicon\.ico|console/[A-Za-z][A-Za-z.]*\.(?:js|css)}", console.static),
        web.route("*", "/{path:" + ANY + "*}", no_route),
    ]  # last: unknown paths and methods
    # Each handler answers its own errors: no middleware, see answers.py for why; each is reached
    # only by a caller the route table (auth.ROUTES) lets through. The storm's handler does both
    # itself (one coroutine fewer per request); the front doors answer in Slack's shapes and check
    # their own credential (a token in the path or the body).
    own = {post_event, *slack_compat.HANDLERS}
    # Reads of the store wait their turn (readers.py): a burst of readers must not take admission's connections.
    free = {ops.healthz, ops.metrics, openapi_handler, console.page, console.static, get_token, no_route}
    reads, probes = asyncio.Semaphore(readers.AT_ONCE), asyncio.Semaphore(readers.PROBES_AT_ONCE)
    held = {r.handler: readers.bounded(r.handler, reads) for r in routes if r.method == "GET" and r.handler not in free}
    held[ops.readyz] = readers.bounded(ops.readyz, probes)
    app.add_routes(
        web.RouteDef(
            r.method,
            r.path,
            r.handler if r.handler in own else answers_errors(guarded(held.get(r.handler, r.handler))),
            r.kwargs,
        )
        for r in routes
    )
    app[GUARD] = Guard(app[TOKENS], app.router.routes(), settings)
    return app
