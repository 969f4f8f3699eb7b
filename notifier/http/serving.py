"""Serving the application: aiohttp's runner, with the storm's route answered before the router.

aiohttp's application finds each request's route itself (``Application._handle``): it resolves the
path through the router (a coroutine per candidate resource), builds a match, adds the application
to it and freezes it, and only then calls the handler. For the storm's one route that work gives the
same answer every time, and it is a visible part of what a refused event costs: the gateway beside
the bare app on one core served 0.87 of its rate with it, 0.94 without (``bench/RESULTS.md``). So
the server answers ``POST /v1/events`` with a match built once, and hands every other request, and
any storm request that asks for ``Expect: 100-continue``, to the application unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from aiohttp import hdrs, web
from aiohttp.web_runner import GracefulExit

log = logging.getLogger("notifier")

STORM = ("POST", "/v1/events")  # the route answered before the router: its method and exact path
SHUTDOWN_TIMEOUT = 10.0  # seconds a stop waits for requests in flight


def shortcut(server: web.Server, app: web.Application) -> None:
    """Make ``server`` (``app``'s) answer the storm's route without the router; call it before the
    first connection (each connection takes the server's handler when it opens)."""
    if app.middlewares:  # the shortcut would pass them by
        raise RuntimeError("the storm's shortcut does not run middlewares: the application has some")
    method, path = STORM
    match = _match(app, method, path)
    handler, routed = match.handler, server.request_handler

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.raw_path == path and request.method == method and hdrs.EXPECT not in request.headers:
            request._match_info = match  # what the router would have set (aiohttp keeps no public setter)
            return await handler(request)
        return await routed(request)

    server.request_handler = answer  # type: ignore[assignment]  # the application's server makes web.Request


def _match(app: web.Application, method: str, path: str) -> web.UrlMappingMatchInfo:
    """The frozen match the router gives ``method path`` (it holds no part of the path, so one serves all)."""
    for route in app.router.routes():
        resource = route.resource
        if route.method == method and resource is not None and resource.canonical == path:
            match = web.UrlMappingMatchInfo({}, route)
            match.add_app(app)
            match.freeze()
            return match
    raise LookupError(f"no route for {method} {path}")


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


async def _serve(app: web.Application, sock: socket.socket) -> None:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT, handle_signals=True)
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
