"""A local stand-in for Slack's Web API and incoming webhooks, for the real slack-sdk to talk to.

It runs an aiohttp server on 127.0.0.1 in a thread (and event loop) of its own, so tests of
in-process apps and of gateway processes alike can use it. Every call is logged with its time
and HTTP status; answers can be scripted (429 with Retry-After, 5xx, Slack errors) and are
served in order before it goes back to answering like Slack.

Besides scripted answers, it refuses what Slack refuses, and records each refusal with its
reason in ``refusals`` (a test of a well-behaved sender asserts ``standin.refusals == []``):

- Every block is also read and validated by slack-sdk's own Block Kit models (``Block.parse``,
  ``validate_json``): what they refuse is refused as ``invalid_blocks`` too.
- Message size and Block Kit limits, on ``chat.postMessage``, ``chat.update`` and the webhook:
  a message needs ``text`` or ``blocks`` (``no_text``); top-level ``text`` at most 40,000
  characters (``msg_too_long``); at most 50 blocks; section ``text`` at most 3,000 characters,
  at most 10 ``fields`` of at most 2,000 each, and text or fields present; header text
  (``plain_text``) at most 150; context at most 10 elements; actions at most 25 elements;
  button text at most 75, ``action_id`` at most 255, ``value`` at most 2,000, ``url`` at most
  3,000; markdown block text at most 12,000; ``block_id`` at most 255 and unique in the message;
  text objects of the right type with non-empty text; unknown block types. The Web API answers
  HTTP 200 ``{"ok": false, "error": "invalid_blocks", "errors": [...]}`` with Slack's
  ``"... [json-pointer:/blocks/0/text/text]"`` messages; the webhook answers HTTP 400 with the
  error code as its body. "Characters" are counted as Python ``len`` (code points).
- Channels: a name (``#alerts`` or ``alerts``) is answered with a stable id (``C`` and 10
  uppercase alphanumerics derived from the name); an id (``C``/``G``/``D`` + 8 or more
  uppercase alphanumerics) is kept. ``ts`` values are unique and increasing (``"%d.%06d"``).
- ``chat.update`` needs a channel id (``channel_not_found`` for a name, as Slack) and the ``ts``
  of a message it posted (``message_not_found``; ``cant_update_message`` for a webhook's).
- Threads: ``thread_ts`` must be the ``ts`` of a message in that channel (``thread_not_found``,
  or ``invalid_thread_ts`` when malformed). Real Slack is laxer here (it may accept an unknown
  ``thread_ts`` and drop the reply out of sight); the stand-in refuses so that a test notices.
- Rate limits: ``chat.update`` at most ``update_rate=(count, seconds)`` per workspace, default
  (50, 60) (Web API Tier 3, "50+ per minute"), always enforced unless ``update_rate=None``;
  ``chat.postMessage`` and the webhook at most ``post_rate=(count, seconds)`` per channel,
  default ``None`` (not enforced: Slack's "1 per second per channel, short bursts allowed" has no
  published burst size, and tests that post fast on purpose must not be throttled; pass
  ``post_rate=(1, 1)`` or similar to enforce it). Over budget: HTTP 429, ``{"ok": false, "error":
  "ratelimited"}`` and ``Retry-After`` (webhook: body ``rate_limited``), recorded in ``throttled``,
  not in ``refusals``. Windows slide; only accepted calls count.

Content checks come before rate limits, so a refused message is recorded even when throttled.

Socket Mode: ``SlackStandin(socket_mode=SocketModeStandin())`` (``socket_mode_standin.py``) also
answers ``apps.connections.open`` under ``api_url`` and serves the WebSockets it hands out; that
module says what it enforces. ``users.info`` and ``conversations.info`` answer from ``directory``
(``slack_directory.py``): the users a test adds, and the channels named so far.

Each accepted message keeps what its sender gave: text and blocks (``Received.text``/``blocks``,
current after edits), ``attachments``, ``username``, ``icon_emoji``, ``icon_url`` and the
``thread_ts`` it named (``sent_thread_ts``; ``thread_ts`` is the thread's root), and the whole
body in ``raw``; ``message_json`` shows them as Slack's answers do. Forms may carry ``blocks`` and
``attachments`` as JSON strings, and a webhook message may name a ``thread_ts`` too.

Where the limits come from:

- Block Kit reference: https://docs.slack.dev/reference/block-kit/blocks (section, header,
  context, actions, markdown blocks), https://docs.slack.dev/reference/block-kit/block-elements/button-element
  and https://docs.slack.dev/reference/block-kit/composition-objects/text-object
- chat.postMessage (50 blocks, 40,000 characters of text, errors):
  https://docs.slack.dev/reference/methods/chat.postMessage
- chat.update (Tier 3, channel id, blocks/text semantics, errors):
  https://docs.slack.dev/reference/methods/chat.update
- Rate limits (tiers, 1 message per second per channel, 429 + Retry-After):
  https://docs.slack.dev/apis/web-api/rate-limits
- Incoming webhook errors (HTTP status + plain code in the body):
  https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks
- Interactivity (block_actions payload, request signing):
  https://docs.slack.dev/reference/interaction-payloads/block_actions-payload and
  https://docs.slack.dev/authentication/verifying-requests-from-slack

This module keeps ``SlackStandin`` (serving, scripting, reading what arrived) and re-exports the
names tests import from it. The rest lives beside it: ``slack_ids.py`` (token, team and app ids,
channel ids, ``ts``), ``slack_blocks.py`` (the content checks, ``check_message``),
``slack_rates.py`` (rate windows), ``slack_answering.py`` (answering, refusing and accepting one
call; the ``Received`` records) and ``slack_payloads.py`` (interactivity payloads).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import TYPE_CHECKING

from aiohttp import web
from slack_answering import Answering, Edit, Received, Refusal, _check_token, _read_api_body
from slack_blocks import Rejection, block_problems, check_message, sdk_problems
from slack_directory import Directory
from slack_ids import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, TOKEN, WEBHOOK_CHANNEL_ID, channel_id_for
from slack_payloads import block_actions_payload, signed_action_request
from slack_rates import Throttled, max_in_window

if TYPE_CHECKING:
    from socket_mode_standin import SocketModeStandin

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "TOKEN",
    "WEBHOOK_CHANNEL_ID",
    "Edit",
    "Received",
    "Refusal",
    "Rejection",
    "SlackStandin",
    "Throttled",
    "_check_token",
    "_read_api_body",
    "block_actions_payload",
    "block_problems",
    "channel_id_for",
    "check_message",
    "sdk_problems",
    "signed_action_request",
]


# ---------------------------------------------------------------- the stand-in


class SlackStandin(Answering):
    """``chat.postMessage``/``chat.update`` under ``api_url`` and an incoming webhook at ``webhook_url``."""

    def __init__(
        self,
        post_rate: tuple[int, float] | None = None,
        update_rate: tuple[int, float] | None = (50, 60),
        post_latency: float = 0.0,
        socket_mode: SocketModeStandin | None = None,
        token: str = TOKEN,
        team_id: str = TEAM_ID,
    ) -> None:
        self.post_rate, self.update_rate = post_rate, update_rate
        self.token, self.team_id = token, team_id  # one workspace: its bot token, its team id (auth.test)
        self.socket_mode = socket_mode  # Slack's Socket Mode, served here too when given
        self.directory = Directory(token)  # users.info and conversations.info (slack_directory.py)
        self.post_latency = post_latency  # seconds each postMessage takes before it is answered (and stored)
        self.in_flight = 0  # postMessage calls received and not yet answered
        self.messages: list[Received] = []
        self.calls: list[tuple[float, int]] = []  # (time, status) of postMessage and webhook calls, refused too
        self.update_calls: list[tuple[float, int]] = []  # (time, status) of chat.update calls
        self.updates: list[tuple[float, str, str, str, list]] = []  # (time, channel_id, ts, text, blocks)
        self.refusals: list[Refusal] = []
        self.throttled: list[tuple[float, str, str, int]] = []  # (time, method, channel_id, retry_after)
        self._script: list[tuple] = []
        self._update_script: list[tuple] = []
        self._by_key: dict[tuple[str, str], Received] = {}
        self._post_times: dict[str, list[float]] = {}
        self._update_times: list[float] = []
        self._last_micros = 0
        self._lock = threading.RLock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._serving = False
        self.port = 0

    # -- addresses, scripting and reading what arrived

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/services/T000/B000/XXXX"

    def script(self, *answers: tuple) -> None:
        """Queue answers for postMessage and the webhook: ``(429, retry_after)``, ``(500,)``,
        ``("error", "channel_not_found")``, ``("ok",)`` (go on as Slack would)."""
        with self._lock:
            self._script.extend(answers)

    def script_update(self, *answers: tuple) -> None:
        """Queue answers for ``chat.update``, in the same forms as ``script``."""
        with self._lock:
            self._update_script.extend(answers)

    def texts(self) -> list[str]:
        with self._lock:
            return [m.text for m in self.messages]

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.messages)

    @staticmethod
    def channel_id(channel: str) -> str:
        """The id the stand-in answers for a channel name (or the id itself)."""
        return channel_id_for(channel)

    def message(self, ts: str, channel: str | None = None) -> Received | None:
        """The message with this ``ts`` (in ``channel``, a name or id, if given)."""
        with self._lock:
            if channel is not None:
                return self._by_key.get((channel_id_for(channel), ts))
            return next((m for m in self.messages if m.ts == ts), None)

    def replies(self, ts: str, channel: str | None = None) -> list[Received]:
        """The replies in the thread of the message ``ts``, oldest first."""
        with self._lock:
            wanted = channel_id_for(channel) if channel is not None else None
            return [m for m in self.messages if m.thread_ts == ts and wanted in (None, m.channel_id)]

    def life(self, ts: str) -> str:
        """One message's life as recorded here: its post, edits and thread replies, in time order."""
        message = self.message(ts)
        if message is None:
            raise KeyError(ts)

        def stamp(at: float) -> str:
            clock = time.strftime("%H:%M:%S", time.gmtime(at))
            return f"{clock}.{int(at % 1 * 1000):03d} UTC (+{at - message.at:.3f}s)"

        def first_line(text: str) -> str:
            return text.split("\n", 1)[0] + (" | " + " | ".join(text.split("\n")[1:]) if "\n" in text else "")

        events = [(message.at, f"post  {stamp(message.at)}: {first_line(message.raw.get('text', ''))}")]
        events += [(e.at, f"edit  {stamp(e.at)}: {first_line(e.text)}") for e in message.edits]
        events += [(r.at, f"reply {stamp(r.at)}: {first_line(r.text)}") for r in self.replies(ts)]
        return "\n".join(line for _, line in sorted(events))

    def message_json(self, ts: str, channel: str | None = None) -> dict:
        """The message as Slack shows it (in API answers and interaction payloads)."""
        with self._lock:
            message = self.message(ts, channel)
            if message is None:
                raise KeyError(ts)
            return self._message_json(message)

    def max_in_window(self, kind: str, seconds: float, channel: str | None = None) -> int:
        """Most accepted calls of ``kind`` ("post": postMessage and webhook; "update") in any
        ``seconds``-long sliding window, optionally in one ``channel`` (name or id)."""
        with self._lock:
            if kind == "update":
                wanted = channel_id_for(channel) if channel is not None else None
                times = [t for t, cid, *_ in self.updates if wanted in (None, cid)]
            elif kind == "post":
                lists = [self._post_times.get(channel_id_for(channel), [])] if channel else self._post_times.values()
                times = sorted(t for ts in lists for t in ts)
            else:
                raise ValueError(f"kind must be 'post' or 'update', not {kind!r}")
        return max_in_window(times, seconds)

    # -- life cycle

    def start(self) -> SlackStandin:
        self._thread = threading.Thread(target=self._run, name="slack-standin", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or not self._serving:
            raise RuntimeError("the Slack stand-in did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or not loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve())
            self._serving = True
        finally:  # a failure to serve propagates (the thread prints it) and start() raises
            self._ready.set()
            if not self._serving:
                loop.close()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/api/chat.postMessage", self._post_message)
        app.router.add_post("/api/chat.update", self._update)
        app.router.add_post("/api/auth.test", self._auth_test)
        if self.socket_mode is not None:  # before the catch-all below, which answers unknown_method
            self.socket_mode.add_routes(app)
        self.directory.add_routes(app)
        app.router.add_post("/api/{method}", self._unknown_method)
        app.router.add_post("/services/{path:.*}", self._webhook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    # -- HTTP handlers

    async def _post_message(self, request: web.Request) -> web.Response:
        with self._lock:
            self.in_flight += 1
        try:
            if self.post_latency:
                await asyncio.sleep(self.post_latency)
            return await self._api_call(request, "chat.postMessage", self._script, self.calls, self._accept_post)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _update(self, request: web.Request) -> web.Response:
        return await self._api_call(request, "chat.update", self._update_script, self.update_calls, self._accept_update)

    async def _auth_test(self, request: web.Request) -> web.Response:
        try:
            await _read_api_body(request, self.token)
        except Rejection as rejection:
            return web.json_response({"ok": False, "error": rejection.error})
        answer = {"team_id": self.team_id, "team": "standin", "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        return web.json_response({"ok": True, "url": "https://standin.slack.com/", **answer})

    async def _unknown_method(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": False, "error": "unknown_method"}, status=404)

    async def _api_call(self, request: web.Request, method: str, script: list, log: list, accept) -> web.Response:
        try:
            body = await _read_api_body(request, self.token)
        except Rejection as rejection:
            return self._refuse_api(method, rejection, {}, log)
        scripted = self._scripted_api(self._next_answer(script), log)
        if scripted is not None:
            return scripted
        try:
            with self._lock:
                return web.json_response(accept(body))
        except Rejection as rejection:
            return self._refuse_api(method, rejection, body, log)
        except Throttled as throttled:
            return self._throttle(
                method, log, throttled, web.json_response({"ok": False, "error": "ratelimited"}, status=429)
            )

    async def _webhook(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._refuse_webhook(Rejection("invalid_payload", "the body is not JSON"), {})
        scripted = self._scripted_webhook(self._next_answer(self._script))
        if scripted is not None:
            return scripted
        try:
            with self._lock:
                self._accept_webhook(body if isinstance(body, dict) else {})
        except Rejection as rejection:
            return self._refuse_webhook(rejection, body)
        except Throttled as throttled:
            return self._throttle("webhook", self.calls, throttled, web.Response(status=429, text="rate_limited"))
        return web.Response(text="ok")
