"""Slack's Socket Mode: button clicks reach the gateway over a WebSocket it opens itself.

Behind a firewall Slack cannot POST clicks to ``/v1/slack/actions``. With an app-level token
(``xapp-...``) each replica opens one connection instead: ``apps.connections.open`` at the
configured Slack API URL answers a WebSocket URL, Slack sends ``interactive`` envelopes over it,
and the replica acks each by ``envelope_id`` once the click is recorded. Slack sends an envelope
again when no ack comes, so a click the store did not take is left un-acked on purpose.

slack-sdk's aiohttp ``SocketModeClient`` does the WebSocket work: the handshake, aiohttp's
heartbeat (a ping after ``ping_interval`` seconds without a frame; a link with no pong within
half that is closed), reading frames and sending acks. Its own reconnecting is switched off
(``auto_reconnect_enabled=False``) because it cannot promise what the gateway needs: it retries a
failed handshake on the same URL until that succeeds, bounds a hanging one only by aiohttp's
five minutes, logs every failed attempt (a refused token too) with a traceback, and answers
``disconnect`` in a task nobody awaits, which can outlive a shutdown.

Here one supervisor task asks for a URL, connects (``CONNECT_TIMEOUT`` per attempt), watches the
connection and starts again when it closes, when Slack sends ``disconnect``, or when the heartbeat
gives up on a silent link (``1.5 * ping_interval`` after its last frame). After a connection that
lived less than ``SHORT_LIFE`` it pauses about a second, so a flapping link cannot storm Slack.
With the default 3 s that is about 6 s at worst from a silent link to a new connection, about 1 s
after a close, a cut or a ``disconnect``: inside the 10 s promised (tests/unit/test_socket_mode.py
measures each). The SDK's log lines go to DEBUG; this module logs what an operator needs, each
kind of trouble at most once a minute, each kind of odd envelope once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)

Handle = Callable[[dict[str, Any]], Awaitable[bool]]

PING_INTERVAL = 3.0  # seconds: a silent link is given up after 1.5x this, well inside the 10 s promised
CONNECT_TIMEOUT = 5.0  # seconds for one handshake (the SDK retries inside it on the same URL)
HELLO_TIMEOUT = 5.0  # seconds a connection may stay without Slack's hello before it counts as failed
API_TIMEOUT = 5  # seconds for apps.connections.open
RETRY_PAUSE = (1.0, 10.0)  # seconds: first pause after a failed attempt, and the most it doubles to
SHORT_LIFE = 5.0  # seconds: a connection that ends sooner is followed by a pause, so a flapping link cannot storm
WATCH_EVERY = 0.2  # seconds between looks at the connection
STOP_GRACE = 2.0  # seconds a click being recorded gets at stop() to finish and be acked
CLOSE_TIMEOUT = 2.0  # seconds for a polite close; aiohttp waits 10 s for Slack's close reply otherwise
MAX_IN_FLIGHT = 64  # clicks handled at once; more are left un-acked for Slack to send again
LOG_EVERY = 60.0  # seconds between two log lines of the same trouble
MAX_KINDS = 256  # kinds remembered by a log limiter: they come from Slack's frames, so memory stays bounded
_NETWORK = (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError)

if TYPE_CHECKING:
    _Adapter = logging.LoggerAdapter[logging.Logger]
else:  # LoggerAdapter takes a type parameter only from Python 3.11
    _Adapter = logging.LoggerAdapter


class _SdkLog(_Adapter):
    """slack-sdk's log lines, all at DEBUG: it logs every retry, some with a traceback."""

    level = property(lambda self: self.logger.level)  # slack-sdk 3.33 reads its logger's level

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        super().log(logging.DEBUG, msg, *args, **kwargs)


class _LogLimit:
    """Logs each kind of trouble at most once per ``every`` seconds (``math.inf``: once)."""

    def __init__(self, every: float) -> None:
        self._every = every
        self._last: dict[str, float] = {}

    def __call__(self, kind: str, level: int, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log unless this kind was logged lately; answers whether it was logged."""
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self._every:
            return False
        if len(self._last) >= MAX_KINDS:
            self._last.clear()
        self._last[kind] = now
        log.log(level, message, *args, exc_info=exc_info)
        return True

    def forget(self, kind: str) -> None:
        """Log this kind again the next time."""
        self._last.pop(kind, None)


class _Client(SocketModeClient):
    """slack-sdk's client, its frames handed to ``on_frame`` as they come off the queue.

    The SDK's own ``process_message`` runs listeners in tasks nobody awaits and starts a reconnect
    of its own on ``disconnect``; here the supervisor decides, and knows every task it started.
    What else is used of the SDK (read in 3.48): ``connect()`` takes ``wss_uri`` when set, closes
    the old WebSocket first and starts the ping monitor and the receiver; the receiver queues text
    frames on ``message_queue``; ``send_socket_mode_response`` sends on the current WebSocket.
    """

    def __init__(self, on_frame: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_frame = on_frame

    async def process_message(self) -> None:
        raw = await self.message_queue.get()
        if isinstance(raw, str):
            self.on_frame(raw)


def _short(value: object) -> str:
    return repr(value)[:40]


def _click(envelope: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The ``block_actions`` payload of an envelope, or None and what else it is."""
    if envelope.get("type") != "interactive":
        return None, f"envelope type {_short(envelope.get('type'))}"
    payload = envelope.get("payload")
    if payload is None:
        return None, "interactive envelope without a payload"
    if not isinstance(payload, dict):
        return None, "interactive payload that is not an object"
    if payload.get("type") != "block_actions":
        return None, f"interactive payload type {_short(payload.get('type'))}"
    return payload, ""


def _refusal(exc: SlackApiError) -> tuple[str, float]:
    """Slack's error code (or the HTTP status, for an answer that is not Slack's JSON) and its Retry-After."""
    data, headers = getattr(exc.response, "data", None), getattr(exc.response, "headers", None) or {}
    error = data.get("error") if isinstance(data, dict) else None
    try:
        retry_after = float(headers.get("Retry-After") or 0)
    except ValueError:
        retry_after = 0.0
    return f"refused: {error or 'HTTP ' + str(getattr(exc.response, 'status_code', '?'))}", retry_after


def _frame(raw: str) -> dict[str, Any] | None:
    try:
        frame = json.loads(raw)
    except ValueError:
        return None
    return frame if isinstance(frame, dict) else None


class SocketMode:
    """This replica's Socket Mode connection, kept open from ``start()`` to ``stop()``.

    ``handle`` gets the ``block_actions`` payload of each click and answers True once it is
    recorded; the envelope is acked then. False, or an exception, leaves it un-acked, and Slack
    sends it again. Any other envelope is acked and otherwise ignored. ``session``, if given, is
    used for ``apps.connections.open``; slack-sdk's client keeps one of its own for the WebSocket.
    The keyword arguments are for tests and tuning: see ``PING_INTERVAL``, ``RETRY_PAUSE`` and
    ``MAX_IN_FLIGHT``.
    """

    def __init__(
        self,
        app_token: str,
        api_url: str,
        handle: Handle,
        session: aiohttp.ClientSession | None = None,
        *,
        ping_interval: float = PING_INTERVAL,
        retry_pause: tuple[float, float] = RETRY_PAUSE,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self._token = app_token
        self._handle = handle
        self._web = AsyncWebClient(base_url=api_url, session=session, timeout=API_TIMEOUT, retry_handlers=[])
        self._ping_interval = ping_interval
        self._retry_pause = retry_pause
        self._max_in_flight = max_in_flight
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._handling: set[asyncio.Task[None]] = set()  # clicks being recorded
        self._acking: set[asyncio.Task[None]] = set()  # acks of envelopes that are no click
        self._greeted: object = None  # the WebSocket that Slack's hello came on
        self._move = False  # Slack sent disconnect: open a new connection
        self._stopping = False
        self._problem: str | None = None  # why the last attempt failed, for status
        self._every_minute = _LogLimit(LOG_EVERY)
        self._once = _LogLimit(math.inf)

    @property
    def status(self) -> str:
        """One of connected, connecting, off, or why the last attempt failed (``refused: invalid_auth``)."""
        if self._runner is None:
            return "off"
        if self.connected:
            return "connected"
        return self._problem or "connecting"

    @property
    def connected(self) -> bool:
        """True while a connection is open and Slack has said hello on it."""
        session = self._client.current_session if self._client is not None else None
        return session is not None and not session.closed and session is self._greeted

    async def start(self) -> None:
        """Start connecting in the background and return at once."""
        if self._runner is None:
            self._stopping = False
            self._runner = asyncio.get_running_loop().create_task(self._run(), name="socket-mode")

    async def stop(self) -> None:
        """Close the connection and end every task this started; clicks in hand get ``STOP_GRACE``."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping = True  # frames still queued are left un-acked: Slack sends them again
        await cancel_and_wait([runner])
        if self._handling:
            await asyncio.wait(self._handling, timeout=STOP_GRACE)
        await cancel_and_wait([*self._handling, *self._acking])
        client, self._client = self._client, None
        if client is not None:
            await _close(client)
        self._greeted, self._problem = None, None

    # -- the supervisor

    async def _run(self) -> None:
        self._client = client = _Client(
            self._on_frame,
            app_token=self._token,
            web_client=self._web,
            # The SDK asks for a Logger but only calls logging methods, which an adapter has.
            logger=cast(logging.Logger, _SdkLog(logging.getLogger(__name__ + ".sdk"), {})),
            auto_reconnect_enabled=False,
            ping_interval=self._ping_interval,
        )
        failures = 0
        while True:
            try:
                failures = await self._round(client, failures)
            except Exception:  # a bug must not end the connection for good: log it, pause, go on
                self._every_minute("bug", logging.ERROR, "Slack Socket Mode failed; starting again", exc_info=True)
                failures += 1
            if failures:
                await asyncio.sleep(self._pause(failures))

    async def _round(self, client: _Client, failures: int) -> int:
        """One connection from URL to end; answers the failures so far (0 after a connection that lived)."""
        url = await self._ticket()
        if not await self._open(client, url):
            return failures + 1
        opened = time.monotonic()
        await self._watch(client)
        return 0 if time.monotonic() - opened > SHORT_LIFE else 1

    async def _ticket(self) -> str:
        """A WebSocket URL from apps.connections.open, asked for again (pausing longer) until Slack answers one."""
        failures = 0
        while True:
            retry_after = 0.0
            try:
                answer = await self._web.apps_connections_open(app_token=self._token)
                url = answer.get("url")
                if isinstance(url, str) and url:
                    return url
                problem = "refused: no url in the answer"
            except SlackApiError as exc:
                problem, retry_after = _refusal(exc)
            except _NETWORK as exc:
                problem = f"unreachable: {type(exc).__name__}"
            self._problem = problem
            self._trouble(problem, "Slack Socket Mode %s (apps.connections.open); asking again", problem)
            failures += 1
            await asyncio.sleep(max(retry_after, self._pause(failures)))

    async def _open(self, client: _Client, url: str) -> bool:
        client.wss_uri, self._move = url, False
        try:
            # connect() closes the old connection first, then opens the new one.
            await asyncio.wait_for(client.connect(), CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
        except asyncio.TimeoutError:
            self._problem = f"unreachable: no WebSocket within {CONNECT_TIMEOUT:.0f}s"
            self._trouble("handshake", "Slack Socket Mode: %s; trying again", self._problem)
            return False
        session = client.current_session
        self._problem = None
        return session is not None and not session.closed

    async def _watch(self, client: _Client) -> None:
        """Return once the connection is gone, Slack asked to move, or no hello came."""
        since = time.monotonic()
        while True:
            session = client.current_session
            if self._move:
                log.debug("Slack asked for a new Socket Mode connection")
                return
            if session is None or session.closed:
                self._trouble("lost", "Slack Socket Mode connection lost; reconnecting")
                return
            if session is not self._greeted and time.monotonic() - since > HELLO_TIMEOUT:
                self._problem = "no hello from Slack"
                self._trouble("hello", "Slack Socket Mode: no hello; reconnecting")
                return
            await asyncio.sleep(WATCH_EVERY)

    def _trouble(self, kind: str, message: str, *args: object) -> None:
        """A warning about the connection, at most once a minute; the next "connected" is logged after it."""
        if self._every_minute(kind, logging.WARNING, message, *args):
            self._every_minute.forget("connected")

    def _pause(self, failures: int) -> float:
        first, most = self._retry_pause
        return min(most, first * 2.0 ** min(failures - 1, 16)) * random.uniform(0.8, 1.2)

    # -- frames, clicks and acks

    def _on_frame(self, raw: str) -> None:
        if self._stopping:
            return
        frame = _frame(raw)
        if frame is None:
            self._odd("a frame that is not a JSON object (cannot be acked)")
            return
        if frame.get("type") == "hello":
            self._greeted = self._client.current_session if self._client is not None else None
            count = _short(frame.get("num_connections"))
            self._every_minute("connected", logging.INFO, "Slack Socket Mode connected (%s of this app)", count)
            return
        if frame.get("type") == "disconnect":
            log.debug("Slack sent disconnect (%s)", _short(frame.get("reason")))
            self._move = True
            return
        envelope_id = frame.get("envelope_id")
        if not isinstance(envelope_id, str) or not envelope_id:
            self._odd(f"a {_short(frame.get('type'))} frame without an envelope_id (cannot be acked)")
            return
        self._envelope(envelope_id, frame)

    def _envelope(self, envelope_id: str, frame: dict[str, Any]) -> None:
        payload, other = _click(frame)
        if payload is None:
            self._odd(other)
            self._spawn(self._acking, self._ack(envelope_id))
        elif len(self._handling) >= self._max_in_flight:
            busy = len(self._handling)
            self._every_minute("busy", logging.WARNING, "%d clicks in hand; more are left for Slack to resend", busy)
        else:
            self._spawn(self._handling, self._take(envelope_id, payload))

    def _odd(self, what: str) -> None:
        self._once(what, logging.WARNING, "Slack Socket Mode: ignoring %s (logged once)", what)

    def _spawn(self, tasks: set[asyncio.Task[None]], work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _take(self, envelope_id: str, payload: dict[str, Any]) -> None:
        try:
            recorded = await self._handle(payload)
        except Exception:
            self._every_minute("handle", logging.ERROR, "a click was not recorded; Slack will resend it", exc_info=True)
            return
        if recorded is True:
            await self._ack(envelope_id)

    async def _ack(self, envelope_id: str) -> None:
        client = self._client
        try:
            if client is None:
                raise ConnectionError("no connection")
            await client.send_socket_mode_response({"envelope_id": envelope_id})
        except Exception as exc:  # the connection went away, or was never there: Slack sends it again
            self._every_minute("ack", logging.WARNING, "could not ack an envelope (%s); Slack will resend it", exc)


async def _close(client: _Client) -> None:
    """Close slack-sdk's client for certain: its close() waits up to 10 s for the reply on a dead link."""
    try:
        await asyncio.wait_for(client.close(), CLOSE_TIMEOUT)  # type: ignore[no-untyped-call]
    except Exception:  # a link that is already gone may fail to close politely; what is left is done below
        log.debug("closing the Socket Mode connection", exc_info=True)
    client.closed = True
    tasks = (client.message_processor, client.current_session_monitor, client.message_receiver)
    left = [task for task in tasks if task is not None]
    for future in left:
        future.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    await client.aiohttp_client_session.close()
