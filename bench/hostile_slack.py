"""The Slack stand-in of ``bench/hostile.py``: a local incoming webhook on a free port that
records every body and enforces Block Kit's size limits (400 ``invalid_blocks``), each answer
after an optional delay.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass

from aiohttp import web
from helpers import free_port

SECTION_TEXT_LIMIT, BLOCKS_LIMIT, FIELDS_LIMIT, TEXT_LIMIT = 3000, 50, 10, 40_000


# -- the Slack stand-in ------------------------------------------------------------------


def block_kit_problem(body: object) -> str | None:
    """Why Slack would refuse this webhook body for its size (``invalid_blocks``), or None."""
    if not isinstance(body, dict):
        return "body is not a JSON object"
    text = body.get("text") or ""
    if len(text) > TEXT_LIMIT:
        return f"text of {len(text)} characters"
    blocks = body.get("blocks") or []
    if len(blocks) > BLOCKS_LIMIT:
        return f"{len(blocks)} blocks"
    for block in blocks:
        if block.get("type") != "section":
            continue
        section = (block.get("text") or {}).get("text") or ""
        if len(section) > SECTION_TEXT_LIMIT:
            return f"section text of {len(section)} characters"
        if len(block.get("fields") or []) > FIELDS_LIMIT:
            return f"section with {len(block['fields'])} fields"
    return None


@dataclass
class Received:
    """One webhook call as the stand-in saw it."""

    at: float  # time.monotonic() on arrival
    text: str
    status: int
    problem: str


class SlackStandIn:
    """An incoming-webhook stand-in on a free port, served from a thread of its own.

    Records every body's text and answers 400 ``invalid_blocks`` when a body breaks
    Block Kit's size limits, else 200 ``ok``, each answer after ``delay`` seconds.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.port, self.delay = free_port(), delay
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> SlackStandIn:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the Slack stand-in did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=512 * 1024 * 1024)  # a digest may be huge: see it whole
        app.router.add_post("/hook", self._hook)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    async def _hook(self, request: web.Request) -> web.Response:
        at = time.monotonic()
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        problem = block_kit_problem(body)
        text = body.get("text", "") if isinstance(body, dict) else ""
        with self._lock:
            self.received.append(Received(at, text, 400 if problem else 200, problem or ""))
        if self.delay:
            await asyncio.sleep(self.delay)
        if problem:
            return web.Response(status=400, text="invalid_blocks")
        return web.Response(text="ok")


def wait_until_quiet(standin: SlackStandIn, quiet: float, at_least: float, timeout: float) -> float:
    """Wait until the stand-in got nothing for ``quiet`` s (and ``at_least`` s passed); the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        received = standin.snapshot()
        last = received[-1].at if received else started
        now = time.monotonic()
        if now - started >= at_least and now - max(last, started) >= quiet:
            break
        time.sleep(0.2)
    return time.monotonic() - started
