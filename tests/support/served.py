"""A stand-in's server: an aiohttp app on 127.0.0.1 (a free port), in a thread and event loop of its own,
so tests of in-process apps and of gateway processes alike can call it. A stand-in subclasses
:class:`Served`, names itself (``service``) and adds its routes."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

from aiohttp import web

BODY_LIMIT = 16 * 1024 * 1024  # big bodies reach the stand-in's own checks, as they reach the service's


class Served:
    """Start, serve and stop; ``port`` once started."""

    service = "service"
    port = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _thread: threading.Thread | None = None

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def start(self) -> Any:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{self.service}-standin", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError(f"the {self.service} stand-in did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or not loop.is_running() or self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve())
        finally:
            self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=BODY_LIMIT)
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.port = sock.getsockname()[1]
