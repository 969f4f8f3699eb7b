"""A local stand-in for Slack's Web API and incoming webhooks, for the real slack-sdk to talk to.

It runs an aiohttp server in a thread of its own, so tests of in-process apps
and of gateway processes alike can use it. Each accepted message is recorded
with the time it arrived; answers can be scripted (429 with Retry-After, 5xx,
Slack errors) and are served in order before it goes back to ``ok``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

TOKEN = "xoxb-test-token"


@dataclass
class Received:
    channel: str
    text: str
    blocks: list = field(default_factory=list)
    at: float = 0.0
    raw: dict = field(default_factory=dict)


class SlackStandin:
    """``chat.postMessage`` at ``api_url`` and an incoming webhook at ``webhook_url``."""

    def __init__(self) -> None:
        self.messages: list[Received] = []
        self.calls: list[tuple[float, int]] = []  # (time, status) of every call, refused ones too
        self._script: list[tuple] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/services/T000/B000/XXXX"

    def script(self, *answers: tuple) -> None:
        """Queue answers: ``(429, retry_after)``, ``(500,)``, ``("error", "channel_not_found")``, ``("ok",)``."""
        with self._lock:
            self._script.extend(answers)

    def texts(self) -> list[str]:
        with self._lock:
            return [m.text for m in self.messages]

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.messages)

    def start(self) -> "SlackStandin":
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/api/chat.postMessage", self._post_message)
        app.router.add_post("/services/{path:.*}", self._webhook)
        runner = self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def _next_answer(self) -> tuple:
        with self._lock:
            return self._script.pop(0) if self._script else ("ok",)

    def _record(self, body: dict, status: int) -> None:
        with self._lock:
            now = time.time()
            self.calls.append((now, status))
            if status == 200:
                self.messages.append(Received(body.get("channel", ""), body.get("text", ""),
                                              body.get("blocks") or [], now, body))

    async def _post_message(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        body = await request.json() if request.content_type == "application/json" else dict(await request.post())
        if isinstance(body.get("blocks"), str):
            body["blocks"] = json.loads(body["blocks"])
        answer = self._next_answer()
        if answer[0] == 429:
            self._record(body, 429)
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(answer[1])})
        if isinstance(answer[0], int):
            self._record(body, answer[0])
            return web.Response(status=answer[0], text="upstream trouble")
        if answer[0] == "error":
            self._record(body, 400)
            return web.json_response({"ok": False, "error": answer[1]})
        self._record(body, 200)
        return web.json_response({"ok": True, "channel": body.get("channel"), "ts": f"{time.time():.6f}"})

    async def _webhook(self, request: web.Request) -> web.Response:
        body = await request.json()
        answer = self._next_answer()
        if isinstance(answer[0], int):
            self._record(body, answer[0])
            headers = {"Retry-After": str(answer[1])} if answer[0] == 429 else {}
            return web.Response(status=answer[0], text="rate_limited" if answer[0] == 429 else "error",
                                headers=headers)
        if answer[0] == "error":
            self._record(body, 404)
            return web.Response(status=404, text=answer[1])
        self._record(body, 200)
        return web.Response(text="ok")
