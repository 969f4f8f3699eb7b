"""A stand-in for Slack's Socket Mode, served by the Web API stand-in (``slack_standin.SlackStandin``).

``SlackStandin(socket_mode=SocketModeStandin())`` answers ``apps.connections.open`` under its
``api_url``, where a gateway also finds ``chat.postMessage``, and serves the WebSockets it hands
out from the same aiohttp server, in the stand-in's thread and loop.

A test drives it from its own event loop. Actions are coroutines run on the stand-in's loop
(``asyncio.run_coroutine_threadsafe``): ``push`` an envelope (a click by default), ``send_raw`` a
frame, ``disconnect`` (Slack's message), ``close`` (a close frame), ``drop`` (the TCP connection
cut: a network failure), ``stall`` (a link gone silent: no frames, no pongs) and ``refuse`` (new
connections refused for a while). What happened is read under a lock (``connections``, ``acks``,
``calls()``, ``garbage``) or awaited (``wait_ack``, ``wait_connection``). ``connection=id`` picks
a connection; ``None`` means the newest open one.

What it enforces, as Slack does:

- ``apps.connections.open`` takes an app-level token (``xapp-``) in the ``Authorization: Bearer``
  header only. Errors answer HTTP 200 with ``ok: false``: ``not_authed`` (no token in the header),
  ``not_allowed_token_type`` (not ``xapp-``, e.g. a bot token), ``invalid_auth`` (an ``xapp-``
  token it does not know). Success: ``{"ok": true, "url": "ws://127.0.0.1:PORT/link/?ticket=...
  &app_id=..."}``. Every call is recorded (time, token, outcome).
- Slack calls its URLs temporary and answers a new one per call. Here a URL opens one connection
  (an unknown or used ticket is refused before the upgrade, HTTP 401), so a client that reuses an
  old URL is noticed; with ``ticket_ttl`` a URL also expires that many seconds after it was given.
- On connect: ``{"type": "hello", "num_connections": N, "debug_info": {...}, "connection_info":
  {"app_id": ...}}``, N counting the app's open connections, this one included.
- Envelopes: ``{"envelope_id", "type", "accepts_response_payload", "payload"}`` (and
  ``retry_attempt``/``retry_reason`` when given). A JSON object with an ``envelope_id`` from the
  client is an ack (``payload`` optional), recorded in ``acks`` with time and connection, or in
  ``stray_acks`` if no such envelope was pushed; any other frame goes to ``garbage``. Slack wants
  the ack within 3 seconds; the test judges (``Ack.at - Pushed.at``).
- ``disconnect``: ``{"type": "disconnect", "reason": ..., "debug_info": {"host": ...}}``; Slack's
  reasons are ``warning`` (the connection closes soon), ``refresh_requested`` and ``link_disabled``
  (Socket Mode turned off). The stand-in closes the connection only when asked (``close_after``).
- Slack allows up to 10 connections per app; they are counted (``open_connections(app_token)``),
  an eleventh is not refused.

Where from: https://docs.slack.dev/apis/events-api/using-socket-mode (hello, envelopes, acks,
disconnect reasons, 10 connections), https://docs.slack.dev/reference/methods/apps.connections.open
(token in the header, the answer, errors), and the fields slack-sdk reads and writes
(``slack_sdk.socket_mode.request.SocketModeRequest``, ``.response.SocketModeResponse``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import WSCloseCode, WSMsgType, web
from slack_standin import APP_ID

APP_TOKEN = "xapp-1-A0STANDIN0-1-standin"  # the app-level token of the stand-in's app (APP_ID)
HOST = "applink-standin"  # debug_info.host, as Slack names its link servers
POLL = 0.01  # seconds between looks while a test waits for an ack or a connection

T = TypeVar("T")


@dataclass
class Connection:
    """One WebSocket connection; ``closed_at`` is set when it ends (``how_closed`` says how)."""

    id: int
    app_token: str
    app_id: str
    opened_at: float
    greeted: bool = False  # the hello has been sent
    closed_at: float | None = None
    how_closed: str = ""  # "client", "closed" (by the stand-in), "dropped", "stalled", "shutdown"
    received: list = field(default_factory=list, repr=False)  # every frame the client sent (JSON or text)
    ws: web.WebSocketResponse | None = field(default=None, repr=False)
    transport: asyncio.Transport | None = field(default=None, repr=False)

    @property
    def open(self) -> bool:
        return self.closed_at is None


@dataclass(frozen=True)
class Pushed:
    """An envelope sent to a connection."""

    envelope_id: str
    at: float
    connection: int
    envelope: dict = field(repr=False)


@dataclass(frozen=True)
class Ack:
    """An ack the client sent: ``{"envelope_id": ...}``, with its ``payload`` if any."""

    envelope_id: str
    at: float
    connection: int
    payload: Any = None


@dataclass(frozen=True)
class OpenCall:
    """One ``apps.connections.open`` call and how it was answered ("ok" or Slack's error)."""

    at: float
    token: str
    outcome: str


class SocketModeStandin:
    """Slack's Socket Mode for tests: ``apps.connections.open`` and the WebSockets it hands out."""

    def __init__(self, app_tokens: dict[str, str] | None = None, ticket_ttl: float | None = None) -> None:
        self.app_tokens = dict(app_tokens) if app_tokens is not None else {APP_TOKEN: APP_ID}  # token -> app id
        self.ticket_ttl = ticket_ttl  # seconds a URL stays good; None: until used
        self.connections: list[Connection] = []
        self.pushed: list[Pushed] = []
        self.acks: list[Ack] = []
        self.stray_acks: list[Ack] = []
        self.garbage: list[tuple[float, int, str]] = []  # (time, connection, text) of frames that are no ack
        self.open_calls: list[OpenCall] = []
        self._tickets: dict[str, tuple[str, str, float]] = {}  # ticket -> (app token, app id, handed out at)
        self._refuse_until = 0.0
        self._refuse_error: str | None = None
        self._timers: set[asyncio.Task] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- wiring: SlackStandin calls this in its _serve(), on its own loop

    def add_routes(self, app: web.Application) -> None:
        """Serve ``apps.connections.open`` and the WebSocket; added before the stand-in's catch-all."""
        self._loop = asyncio.get_running_loop()
        app.router.add_post("/api/apps.connections.open", self._connections_open)
        app.router.add_get("/link/", self._link)
        app.on_shutdown.append(self._shutdown)

    # -- reading what happened (any thread)

    def open_connections(self, app_token: str | None = None) -> list[Connection]:
        """The connections open now (of one app token, if given), oldest first."""
        with self._lock:
            return [c for c in self.connections if c.open and app_token in (None, c.app_token)]

    def acked(self, envelope_id: str) -> Ack | None:
        """The first ack of ``envelope_id``, or None."""
        with self._lock:
            return next((a for a in self.acks if a.envelope_id == envelope_id), None)

    def pushed_envelope(self, envelope_id: str) -> Pushed | None:
        with self._lock:
            return next((p for p in self.pushed if p.envelope_id == envelope_id), None)

    def calls(self, token: str | None = None) -> list[OpenCall]:
        """The ``apps.connections.open`` calls (with one token, if given)."""
        with self._lock:
            return [c for c in self.open_calls if token in (None, c.token)]

    async def wait_ack(self, envelope_id: str, timeout: float = 3.0) -> Ack:
        """The ack of ``envelope_id`` once it has come; ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (ack := self.acked(envelope_id)) is None:
            if time.monotonic() > deadline:
                with self._lock:
                    seen = [a.envelope_id for a in self.acks]
                raise TimeoutError(f"no ack of {envelope_id} within {timeout}s; acked: {seen}")
            await asyncio.sleep(POLL)
        return ack

    async def wait_connection(
        self, after: float = 0.0, timeout: float = 10.0, app_token: str | None = None
    ) -> Connection:
        """The first open connection greeted with hello that opened after ``after`` (a ``time.time()``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                fresh = [
                    c
                    for c in self.connections
                    if c.open and c.greeted and c.opened_at > after and app_token in (None, c.app_token)
                ]
            if fresh:
                return fresh[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no new Socket Mode connection within {timeout}s: {self.connections}")
            await asyncio.sleep(POLL)

    # -- actions (from the test's loop; they run on the stand-in's)

    async def push(self, payload: Any, envelope_type: str = "interactive", connection: int | None = None, **extra):
        """Send an envelope (a click, by default) and answer its ``envelope_id`` (a str).

        ``extra`` sets or adds fields: ``envelope_id`` (to send one again), ``retry_attempt``,
        ``retry_reason``, ``accepts_response_payload`` (False unless given).
        """
        envelope = {"envelope_id": str(uuid.uuid4()), "type": envelope_type, "accepts_response_payload": False}
        envelope |= {"payload": payload, **extra}
        await self._on_loop(self._send(connection, json.dumps(envelope), envelope))
        return envelope["envelope_id"]

    async def send_raw(self, text: str, connection: int | None = None) -> None:
        """Send any text frame as it is (an unreadable envelope, say)."""
        await self._on_loop(self._send(connection, text, None))

    async def disconnect(
        self, reason: str = "refresh_requested", connection: int | None = None, close_after: float | None = None
    ) -> int:
        """Send Slack's ``disconnect`` message; close the connection ``close_after`` seconds later if given."""
        frame = json.dumps({"type": "disconnect", "reason": reason, "debug_info": {"host": HOST}})
        return await self._on_loop(self._disconnect(connection, frame, close_after))

    async def close(self, connection: int | None = None, code: int = WSCloseCode.OK) -> int:
        """Close a connection with a close frame, as a server going away politely does."""
        return await self._on_loop(self._close(self._pick(connection), code))

    async def drop(self, connection: int | None = None) -> int:
        """Cut a connection without a close frame: what a client sees when the network fails."""
        return await self._on_loop(self._drop(connection))

    async def stall(self, connection: int | None = None, seconds: float = 60.0) -> int:
        """Let a connection go silent (a half-open link): no frames either way, pings unanswered.

        It counts as closed from now on (nothing passes on it); the TCP connection is cut after
        ``seconds``, or when the stand-in stops.
        """
        return await self._on_loop(self._stall(connection, seconds))

    async def refuse(self, seconds: float, error: str | None = None) -> None:
        """Refuse new connections for ``seconds``: WebSocket handshakes answer HTTP 503, or, given
        ``error``, ``apps.connections.open`` answers ``{"ok": false, "error": error}``."""
        with self._lock:
            self._refuse_until = time.time() + seconds
            self._refuse_error = error

    # -- the stand-in's loop

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        if self._loop is None:
            coro.close()
            raise RuntimeError("not serving: pass it to SlackStandin(socket_mode=...) and start that")
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def _pick(self, connection: int | None) -> Connection:
        with self._lock:
            candidates = [c for c in self.connections if c.open and connection in (None, c.id)]
        if not candidates:
            raise RuntimeError(f"no open Socket Mode connection {connection if connection is not None else ''}")
        return candidates[-1]

    async def _send(self, connection: int | None, text: str, envelope: dict | None) -> None:
        chosen = self._pick(connection)
        if envelope is not None:  # recorded first: the ack may come back before send_str returns
            with self._lock:
                self.pushed.append(Pushed(envelope["envelope_id"], time.time(), chosen.id, envelope))
        await chosen.ws.send_str(text)

    async def _disconnect(self, connection: int | None, frame: str, close_after: float | None) -> int:
        chosen = self._pick(connection)
        await chosen.ws.send_str(frame)
        if close_after is not None:
            self._later(close_after, lambda: self._close(chosen, WSCloseCode.OK))
        return chosen.id

    async def _close(self, chosen: Connection, code: int) -> int:
        self._mark_closed(chosen, "closed")
        await chosen.ws.close(code=code)
        return chosen.id

    async def _drop(self, connection: int | None) -> int:
        chosen = self._pick(connection)
        self._mark_closed(chosen, "dropped")
        chosen.transport.abort()
        return chosen.id

    async def _stall(self, connection: int | None, seconds: float) -> int:
        chosen = self._pick(connection)
        self._mark_closed(chosen, "stalled")
        chosen.transport.pause_reading()  # pings are no longer read, so no pong goes back
        self._later(seconds, chosen.transport.abort)
        return chosen.id

    def _later(self, seconds: float, action: Callable[[], Any]) -> None:
        async def run() -> None:
            await asyncio.sleep(seconds)
            if asyncio.iscoroutine(done := action()):
                await done

        task = asyncio.get_running_loop().create_task(run())
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def _mark_closed(self, connection: Connection, how: str) -> None:
        with self._lock:
            if connection.closed_at is None:
                connection.closed_at, connection.how_closed = time.time(), how

    async def _shutdown(self, app: web.Application) -> None:
        for timer in list(self._timers):
            timer.cancel()
        with self._lock:
            live = [c for c in self.connections if c.how_closed in ("", "stalled")]
        for connection in live:
            self._mark_closed(connection, "shutdown")
            if connection.how_closed != "stalled":
                # A polite close frame; a client that does not answer must not hold the shutdown.
                with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                    await asyncio.wait_for(connection.ws.close(code=WSCloseCode.GOING_AWAY), 1.0)
            connection.transport.abort()

    # -- HTTP and WebSocket handlers

    async def _connections_open(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        error = self._open_error(token)
        with self._lock:
            self.open_calls.append(OpenCall(time.time(), token, error or "ok"))
        if error:
            return web.json_response({"ok": False, "error": error})
        ticket = secrets.token_urlsafe(12)
        app_id = self.app_tokens[token]
        with self._lock:
            self._tickets[ticket] = (token, app_id, time.time())
        return web.json_response({"ok": True, "url": f"ws://{request.host}/link/?ticket={ticket}&app_id={app_id}"})

    def _open_error(self, token: str) -> str | None:
        if not token:
            return "not_authed"
        if not token.startswith("xapp-"):
            return "not_allowed_token_type"
        if token not in self.app_tokens:
            return "invalid_auth"
        with self._lock:
            return self._refuse_error if time.time() < self._refuse_until else None

    async def _link(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            if time.time() < self._refuse_until and self._refuse_error is None:
                return web.Response(status=503, text="the stand-in refuses new connections for now")
            grant = self._tickets.pop(request.query.get("ticket", ""), None)
        if grant is not None and self.ticket_ttl is not None and time.time() - grant[2] > self.ticket_ttl:
            grant = None
        if grant is None:
            return web.Response(status=401, text="unknown or used ticket")
        ws = web.WebSocketResponse(autoping=True, timeout=2.0)
        await ws.prepare(request)
        connection, hello = self._register(grant, ws, request.transport)
        try:
            await ws.send_str(json.dumps(hello))
            connection.greeted = True
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._receive(connection, message.data)
        except ConnectionError:
            pass  # the connection went away under us: recorded below
        finally:
            self._mark_closed(connection, "client")
        return ws

    def _register(self, grant: tuple, ws: web.WebSocketResponse, transport: Any) -> tuple[Connection, dict]:
        """The new connection, and its hello."""
        with self._lock:
            connection = Connection(len(self.connections) + 1, grant[0], grant[1], time.time(), ws=ws)
            connection.transport = transport
            self.connections.append(connection)
            count = sum(1 for c in self.connections if c.open and c.app_token == connection.app_token)
        return connection, {
            "type": "hello",
            "num_connections": count,
            "debug_info": {"host": HOST, "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": connection.app_id},
        }

    def _receive(self, connection: Connection, text: str) -> None:
        try:
            frame = json.loads(text)
        except ValueError:
            frame = None
        now = time.time()
        with self._lock:
            connection.received.append(frame if frame is not None else text)
            if not isinstance(frame, dict) or not isinstance(frame.get("envelope_id"), str):
                self.garbage.append((now, connection.id, text))
                return
            ack = Ack(frame["envelope_id"], now, connection.id, frame.get("payload"))
            known = any(p.envelope_id == ack.envelope_id for p in self.pushed)
            (self.acks if known else self.stray_acks).append(ack)
