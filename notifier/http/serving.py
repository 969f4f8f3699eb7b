"""Serving the application: aiohttp's runner, with the storms' routes answered before the router.

aiohttp's application finds each request's route itself (``Application._handle``): it resolves the
path through the router (a coroutine per candidate resource), builds a match, adds the application
to it and freezes it, and only then calls the handler. For a storm's route that work gives the same
answer every time, and it is a visible part of what a refused event costs: the gateway beside the
bare app on one core served 0.87 of its rate with it, 0.94 without (``bench/RESULTS.md``). So the
server answers ``POST /v1/events`` with a match built once, and Slack's webhook path, when each of
its parts is one the router would give unchanged, with a match built from them. Every other request,
and any that asks for ``Expect: 100-continue``, goes to the application unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import Callable

from aiohttp import hdrs, web
from aiohttp.web_runner import GracefulExit

log = logging.getLogger("notifier")

EVENTS = "/v1/events"  # POST: the storm's route, answered with one match
WEBHOOK = "/services/{a}/{b}/{secret}"  # POST: Slack's incoming webhook, a match for its parts
PART = r"[A-Za-z0-9_\-]+"  # a part the router gives as it is: nothing to unquote, not a dot segment
SHUTDOWN_TIMEOUT = 10.0  # seconds a stop waits for requests in flight
KEEPALIVE = 75.0  # seconds an idle connection is kept (web.run_app's; aiohttp's server alone keeps one an hour)

Matcher = Callable[[str], "web.UrlMappingMatchInfo | None"]


def shortcut(server: web.Server, app: web.Application) -> None:
    """Make ``server`` (``app``'s) answer the storms' routes without the router; call it before the
    first connection (each connection takes the server's handler when it opens)."""
    if app.middlewares:  # the shortcut would pass them by
        raise RuntimeError("the storms' shortcut does not run middlewares: the application has some")
    events, webhook = _frozen(app, _route(app, EVENTS), {}), _matcher(app, _route(app, WEBHOOK))
    routed = server.request_handler

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and hdrs.EXPECT not in request.headers:
            path = request.raw_path
            match = events if path == EVENTS else webhook(path)
            if match is not None:
                request._match_info = match  # what the router would have set (aiohttp has no public setter)
                return await match.handler(request)
        return await routed(request)

    server.request_handler = answer  # type: ignore[assignment]  # the application's server makes web.Request


def _route(app: web.Application, canonical: str) -> web.AbstractRoute:
    for route in app.router.routes():
        if route.method == "POST" and route.resource is not None and route.resource.canonical == canonical:
            return route
    raise LookupError(f"no route for POST {canonical}")


def _frozen(app: web.Application, route: web.AbstractRoute, parts: dict[str, str]) -> web.UrlMappingMatchInfo:
    """The match the router gives a request of ``route`` with ``parts``."""
    match = web.UrlMappingMatchInfo(parts, route)
    match.add_app(app)
    match.freeze()
    return match


def _matcher(app: web.Application, route: web.AbstractRoute) -> Matcher:
    """A raw path's match for ``route`` (a pattern of ``{name}`` parts), or None for any path whose
    parts are not all ``PART``: the router then decides, unquoting and normalising as it does."""
    assert route.resource is not None
    literal = re.split(r"\{(\w+)\}", route.resource.canonical)  # text, name, text, ..., text
    pattern = "".join(re.escape(t) if i % 2 == 0 else f"(?P<{t}>{PART})" for i, t in enumerate(literal))
    fullmatch = re.compile(pattern).fullmatch

    def match(path: str) -> web.UrlMappingMatchInfo | None:
        found = fullmatch(path)
        return None if found is None else _frozen(app, route, found.groupdict())

    return match


def run(app: web.Application, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
    """Serve ``app`` on ``sock`` until ``SIGINT``/``SIGTERM``, then stop as ``web.run_app`` does: requests in
    flight get ``SHUTDOWN_TIMEOUT``, the cleanup contexts run, the loop is closed."""
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(app, sock))
    try:
        loop.run_until_complete(main)
    except (GracefulExit, KeyboardInterrupt):  # a signal: aiohttp's handler raises GracefulExit
        pass
    finally:
        if not main.done():
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
        _cancel_the_rest(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def make_runner(app: web.Application, signals: bool = True) -> web.AppRunner:
    """``app``'s runner, its server set as ``web.run_app`` sets it (no access log); ``signals``:
    ``SIGINT`` and ``SIGTERM`` stop it."""
    return web.AppRunner(
        app,
        access_log=None,
        keepalive_timeout=KEEPALIVE,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
        handle_signals=signals,
    )


async def _serve(app: web.Application, sock: socket.socket) -> None:
    runner = make_runner(app)
    await runner.setup()
    try:
        assert runner.server is not None  # set by setup()
        shortcut(runner.server, app)
        site = web.SockSite(runner, sock)
        await site.start()
        log.info("======== Running on %s ========", site.name)
        await asyncio.Event().wait()  # until a signal
    finally:
        await runner.cleanup()


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still running once the application has stopped, and let them end."""
    rest = asyncio.all_tasks(loop)
    for task in rest:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
