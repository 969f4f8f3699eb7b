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
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import math
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from aiohttp import web
from slack_directory import Directory
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.signature import SignatureVerifier

if TYPE_CHECKING:
    from socket_mode_standin import SocketModeStandin

TOKEN = "xoxb-test-token"
TEAM_ID = "T0STANDIN0"
APP_ID = "A0STANDIN0"
BOT_ID = "B0STANDIN0"
BOT_USER_ID = "U0STANDIN0"
WEBHOOK_CHANNEL_ID = "C0WEBHOOK00"  # the channel Slack fixed for the incoming webhook

MAX_TEXT = 40_000
MAX_BLOCKS = 50
SECTION_TEXT, SECTION_FIELDS, FIELD_TEXT = 3000, 10, 2000
HEADER_TEXT, CONTEXT_ELEMENTS, ACTIONS_ELEMENTS = 150, 10, 25
TEXT_OBJECT, MARKDOWN_TEXT, BLOCK_ID = 3000, 12_000, 255
BUTTON_TEXT, ACTION_ID, BUTTON_VALUE, URL = 75, 255, 2000, 3000
# static_select: placeholder, options (count, text, value); overflow: 2 to 5 options.
PLACEHOLDER, SELECT_OPTIONS, OPTION_TEXT, OPTION_VALUE, OVERFLOW_OPTIONS = 150, 100, 75, 150, 5

CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{8,}")
CHANNEL_NAME = re.compile(r"[a-z0-9_-]{1,80}")
TS = re.compile(r"\d+\.\d{6}")
# Message block types Slack knows but the stand-in does not inspect beyond block_id.
UNCHECKED_BLOCK_TYPES = {"image", "rich_text", "file", "video", "input", "table", "context_actions", "call"}


@dataclass
class Edit:
    """One accepted ``chat.update`` of a message: what it said afterwards."""

    at: float
    text: str
    blocks: list
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Received:
    """One accepted message. ``text``/``blocks`` are its current content; ``edits`` its history."""

    channel: str  # as the sender named it ("#alerts", or an id); "" for the webhook
    text: str
    blocks: list = field(default_factory=list)
    at: float = 0.0
    raw: dict = field(default_factory=dict)
    ts: str = ""
    channel_id: str = ""
    thread_ts: str | None = None  # the thread's root message ts, for a reply
    edits: list[Edit] = field(default_factory=list)
    # As the sender gave them (a front-door client's message is posted as sent):
    attachments: list = field(default_factory=list)
    username: str | None = None
    icon_emoji: str | None = None
    icon_url: str | None = None
    sent_thread_ts: str | None = None  # the thread_ts the sender named (thread_ts above is the thread's root)


@dataclass(frozen=True)
class Refusal:
    """A call the stand-in refused on its own (not a scripted answer, not a rate limit)."""

    at: float
    method: str  # "chat.postMessage", "chat.update" or "webhook"
    error: str  # Slack's error code, e.g. "invalid_blocks"
    reason: str
    body: dict = field(default_factory=dict, repr=False)


class Rejection(Exception):
    """Slack would answer ``{"ok": false, "error": error}``."""

    def __init__(self, error: str, reason: str, problems: list[str] | None = None) -> None:
        super().__init__(f"{error}: {reason}")
        self.error, self.reason, self.problems = error, reason, problems or []


class Throttled(Exception):
    """Slack would answer 429 with ``Retry-After: retry_after``."""

    def __init__(self, retry_after: int, channel_id: str = "") -> None:
        super().__init__(f"rate limited for {retry_after}s")
        self.retry_after, self.channel_id = retry_after, channel_id


# ---------------------------------------------------------------- channels and timestamps


def channel_id_for(channel: str) -> str:
    """The channel id Slack answers for ``channel`` (a name or an id); ``ValueError`` if neither."""
    if CHANNEL_ID.fullmatch(channel):
        return channel
    name = channel.removeprefix("#").lower()
    if not CHANNEL_NAME.fullmatch(name):
        raise ValueError(f"not a channel name or id: {channel!r}")
    number = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % 36**10
    digits = ""
    for _ in range(10):
        number, digit = divmod(number, 36)
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[digit] + digits
    return "C" + digits


def _ts(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds}.{fraction:06d}"


# ---------------------------------------------------------------- Block Kit limits

Problem = tuple[str, str]  # (json pointer, message)


def _too_long(value: object, limit: int, pointer: str) -> list[Problem]:
    if value is None:
        return []
    if not isinstance(value, str):
        return [(pointer, "must be a string")]
    return [(pointer, f"must be less than {limit + 1} characters")] if len(value) > limit else []


def _text_object(obj: object, pointer: str, limit: int, plain_only: bool = False) -> list[Problem]:
    types = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    if not isinstance(obj, dict) or obj.get("type") not in types:
        return [(pointer, f"must be a text object of type {' or '.join(types)}")]
    if not isinstance(obj.get("text"), str) or not obj["text"]:
        return [(pointer + "/text", "must be more than 0 characters")]
    return _too_long(obj["text"], limit, pointer + "/text")


def _items(items: object, pointer: str, limit: int) -> list[Problem]:
    if not isinstance(items, list) or not items:
        return [(pointer, "must be a non-empty array")]
    return [(pointer, f"no more than {limit} items allowed")] if len(items) > limit else []


def _button(element: dict, p: str) -> list[Problem]:
    problems = _text_object(element.get("text"), p + "/text", BUTTON_TEXT, plain_only=True)
    problems += _too_long(element.get("value"), BUTTON_VALUE, p + "/value")
    problems += _too_long(element.get("url"), URL, p + "/url")
    if element.get("style") not in (None, "primary", "danger"):
        problems.append((p + "/style", "must be primary or danger"))
    return problems


def _options(element: dict, p: str, limit: int) -> list[Problem]:
    options = element.get("options")
    problems = _items(options, p + "/options", limit)
    for i, option in enumerate(options if isinstance(options, list) else []):
        if not isinstance(option, dict):
            problems.append((f"{p}/options/{i}", "must be an option object"))
            continue
        problems += _text_object(option.get("text"), f"{p}/options/{i}/text", OPTION_TEXT, plain_only=True)
        if not isinstance(option.get("value"), str) or not option["value"]:
            problems.append((f"{p}/options/{i}/value", "must be more than 0 characters"))
        problems += _too_long(option.get("value"), OPTION_VALUE, f"{p}/options/{i}/value")
    return problems


def _static_select(element: dict, p: str) -> list[Problem]:
    problems = _options(element, p, SELECT_OPTIONS)
    if "placeholder" in element:
        problems += _text_object(element["placeholder"], p + "/placeholder", PLACEHOLDER, plain_only=True)
    return problems


def _overflow(element: dict, p: str) -> list[Problem]:
    problems = _options(element, p, OVERFLOW_OPTIONS)
    options = element.get("options")
    if isinstance(options, list) and len(options) < 2:
        problems.append((p + "/options", "must provide at least 2 items"))
    return problems


ELEMENT_CHECKS = {"button": _button, "static_select": _static_select, "overflow": _overflow}


def _element(element: object, p: str) -> list[Problem]:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        return [(p, "must be an element object with a type")]
    problems = _too_long(element.get("action_id"), ACTION_ID, p + "/action_id")
    check = ELEMENT_CHECKS.get(element["type"])
    return problems + (check(element, p) if check else [])


def _section(block: dict, p: str) -> list[Problem]:
    if "text" not in block and "fields" not in block:
        return [(p, "must provide either text or fields")]
    problems = _text_object(block["text"], p + "/text", SECTION_TEXT) if "text" in block else []
    if "fields" in block:
        fields = block["fields"]
        problems += _items(fields, p + "/fields", SECTION_FIELDS)
        for i, item in enumerate(fields if isinstance(fields, list) else []):
            problems += _text_object(item, f"{p}/fields/{i}", FIELD_TEXT)
    return problems + (_element(block["accessory"], p + "/accessory") if "accessory" in block else [])


def _header(block: dict, p: str) -> list[Problem]:
    return _text_object(block.get("text"), p + "/text", HEADER_TEXT, plain_only=True)


def _context(block: dict, p: str) -> list[Problem]:
    elements = block.get("elements")
    problems = _items(elements, p + "/elements", CONTEXT_ELEMENTS)
    for i, element in enumerate(elements if isinstance(elements, list) else []):
        if isinstance(element, dict) and element.get("type") == "image":
            if not element.get("alt_text") or not (element.get("image_url") or element.get("slack_file")):
                problems.append((f"{p}/elements/{i}", "an image needs image_url and alt_text"))
        else:
            problems += _text_object(element, f"{p}/elements/{i}", TEXT_OBJECT)
    return problems


def _actions(block: dict, p: str) -> list[Problem]:
    elements = block.get("elements")
    problems = _items(elements, p + "/elements", ACTIONS_ELEMENTS)
    seen: set[str] = set()
    for i, element in enumerate(elements if isinstance(elements, list) else []):
        problems += _element(element, f"{p}/elements/{i}")
        action_id = element.get("action_id") if isinstance(element, dict) else None
        if action_id is not None and action_id in seen:
            problems.append((f"{p}/elements/{i}/action_id", f"duplicate action_id {action_id!r} in the block"))
        seen.add(action_id)
    return problems


def _markdown(block: dict, p: str) -> list[Problem]:
    text = block.get("text")
    if not isinstance(text, str) or not text:
        return [(p + "/text", "must be more than 0 characters")]
    return _too_long(text, MARKDOWN_TEXT, p + "/text")


BLOCK_CHECKS = {
    "section": _section,
    "header": _header,
    "context": _context,
    "actions": _actions,
    "markdown": _markdown,
    "divider": lambda block, p: [],
}


def _block(block: object, p: str, block_ids: set[str]) -> list[Problem]:
    if not isinstance(block, dict):
        return [(p, "must be a block object")]
    problems = _too_long(block.get("block_id"), BLOCK_ID, p + "/block_id")
    if block.get("block_id") in block_ids:
        problems.append((p + "/block_id", f"duplicate block_id {block['block_id']!r}"))
    if isinstance(block.get("block_id"), str):
        block_ids.add(block["block_id"])
    check = BLOCK_CHECKS.get(block.get("type"))
    if check is not None:
        return problems + check(block, p)
    if block.get("type") in UNCHECKED_BLOCK_TYPES:
        return problems
    return [*problems, (p + "/type", f"unknown block type {block.get('type')!r}")]


def block_problems(blocks: list) -> list[str]:
    """Slack's complaints about ``blocks``, as ``"message [json-pointer:/blocks/...]"``; [] if none."""
    problems = [("/blocks", f"no more than {MAX_BLOCKS} items allowed")] if len(blocks) > MAX_BLOCKS else []
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        problems += _block(block, f"/blocks/{i}", block_ids)
    return [f"{message} [json-pointer:{pointer}]" for pointer, message in problems]


def sdk_problems(blocks: list) -> list[str]:
    """What slack-sdk's Block Kit models refuse in ``blocks`` (types they do not know are left to the checks above)."""
    problems = []
    for i, block in enumerate(blocks):
        try:
            parsed = Block.parse(block)
            if parsed is not None:
                parsed.validate_json()
        except SlackObjectFormationError as exc:
            problems.append(f"{exc} (slack-sdk) [json-pointer:/blocks/{i}]")
    return problems


def check_message(body: dict) -> None:
    """Raise the ``Rejection`` Slack would answer for this message's content, if any."""
    text, blocks = body.get("text"), body.get("blocks")
    if not text and not blocks and not body.get("attachments"):
        raise Rejection("no_text", "a message needs text or blocks")
    if isinstance(text, str) and len(text) > MAX_TEXT:
        raise Rejection("msg_too_long", f"text has {len(text)} characters, more than {MAX_TEXT}")
    if blocks is None:
        return
    if not isinstance(blocks, list):
        raise Rejection("invalid_blocks_format", "blocks must be a JSON array")
    problems = block_problems(blocks) or sdk_problems(blocks)
    if problems:
        raise Rejection("invalid_blocks", "; ".join(problems), problems)


def _with_block_ids(blocks: list) -> list:
    """Blocks as Slack returns them: every block has a ``block_id`` (Slack makes one up if missing)."""
    out = []
    for block in blocks:
        if isinstance(block, dict) and "block_id" not in block:
            made_up = hashlib.sha1(json.dumps(block, sort_keys=True).encode()).hexdigest()[:5]
            out.append({**block, "block_id": made_up})
        else:
            out.append(block)
    return out


# ---------------------------------------------------------------- rate windows


def _spend(times: list[float], rate: tuple[int, float] | None, now: float, channel_id: str = "") -> None:
    """Raise ``Throttled`` when ``times`` already hold ``count`` calls within the last ``seconds``."""
    if rate is None:
        return
    count, seconds = rate
    first = bisect.bisect_right(times, now - seconds)
    if len(times) - first >= count:
        raise Throttled(max(1, math.ceil(times[len(times) - count] + seconds - now)), channel_id)


def _max_in_window(times: list[float], seconds: float) -> int:
    """The most of ``times`` (sorted) within any window ``[t, t + seconds)``."""
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


# ---------------------------------------------------------------- the stand-in


class SlackStandin:
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
        return _max_in_window(times, seconds)

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

    # -- scripted answers, refusals and throttling

    def _next_answer(self, script: list) -> tuple:
        with self._lock:
            return script.pop(0) if script else ("ok",)

    def _log(self, log: list, status: int) -> None:
        with self._lock:
            log.append((time.time(), status))

    def _scripted_api(self, answer: tuple, log: list) -> web.Response | None:
        if answer[0] == 429:
            self._log(log, 429)
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(answer[1])}
            )
        if isinstance(answer[0], int):
            self._log(log, answer[0])
            return web.Response(status=answer[0], text="upstream trouble")
        if answer[0] == "error":
            self._log(log, 400)  # Slack answers HTTP 200 with ok: false; logged as 400, as before
            return web.json_response({"ok": False, "error": answer[1]})
        return None

    def _scripted_webhook(self, answer: tuple) -> web.Response | None:
        if isinstance(answer[0], int):
            self._log(self.calls, answer[0])
            headers = {"Retry-After": str(answer[1])} if answer[0] == 429 else {}
            return web.Response(status=answer[0], text="rate_limited" if answer[0] == 429 else "error", headers=headers)
        if answer[0] == "error":
            self._log(self.calls, 404)
            return web.Response(status=404, text=answer[1])
        return None

    def _record_refusal(self, method: str, rejection: Rejection, body: dict, log: list) -> None:
        with self._lock:
            now = time.time()
            self.refusals.append(Refusal(now, method, rejection.error, rejection.reason, body))
            log.append((now, 400))

    def _refuse_api(self, method: str, rejection: Rejection, body: dict, log: list) -> web.Response:
        self._record_refusal(method, rejection, body, log)
        answer: dict = {"ok": False, "error": rejection.error}
        if rejection.problems:
            answer["errors"] = rejection.problems
            answer["response_metadata"] = {"messages": [f"[ERROR] {p}" for p in rejection.problems]}
        return web.json_response(answer)

    def _refuse_webhook(self, rejection: Rejection, body: dict) -> web.Response:
        self._record_refusal("webhook", rejection, body, self.calls)
        return web.Response(status=400, text=rejection.error)

    def _throttle(self, method: str, log: list, throttled: Throttled, response: web.Response) -> web.Response:
        with self._lock:
            now = time.time()
            self.throttled.append((now, method, throttled.channel_id, throttled.retry_after))
            log.append((now, 429))
        response.headers["Retry-After"] = str(throttled.retry_after)
        return response

    # -- accepting (called with the lock held; raise Rejection or Throttled to refuse)

    def _resolve_channel(self, channel: object) -> str:
        try:
            found = channel_id_for(str(channel or ""))
        except ValueError:
            raise Rejection("channel_not_found", f"no channel {channel!r}") from None
        if found != channel:  # a name: conversations.info names the id from now on
            self.directory.add_channel(found, str(channel).lower())
        return found

    def _thread_root(self, channel_id: str, thread_ts: object) -> str | None:
        if thread_ts in (None, ""):
            return None
        if not TS.fullmatch(str(thread_ts)):
            raise Rejection("invalid_thread_ts", f"{thread_ts!r} is not a valid thread_ts")
        parent = self._by_key.get((channel_id, str(thread_ts)))
        if parent is None:
            raise Rejection("thread_not_found", f"no message {thread_ts} in {channel_id}")
        return parent.thread_ts or parent.ts

    def _spend_post(self, channel_id: str, now: float) -> None:
        _spend(self._post_times.get(channel_id, []), self.post_rate, now, channel_id)

    def _next_ts(self, now: float) -> str:
        self._last_micros = max(self._last_micros + 1, int(now * 1_000_000))
        return _ts(self._last_micros)

    def _store(self, body: dict, channel_id: str, thread_ts: str | None, now: float) -> Received:
        message = Received(
            str(body.get("channel") or ""),
            str(body.get("text") or ""),
            body.get("blocks") or [],
            now,
            body,
            self._next_ts(now),
            channel_id,
            thread_ts,
            attachments=body.get("attachments") or [],
            username=body.get("username"),
            icon_emoji=body.get("icon_emoji"),
            icon_url=body.get("icon_url"),
            sent_thread_ts=str(body["thread_ts"]) if body.get("thread_ts") else None,
        )
        self.messages.append(message)
        self._by_key[(channel_id, message.ts)] = message
        self._post_times.setdefault(channel_id, []).append(now)
        self.calls.append((now, 200))
        return message

    def _accept_post(self, body: dict) -> dict:
        channel_id = self._resolve_channel(body.get("channel"))
        check_message(body)
        thread_ts = self._thread_root(channel_id, body.get("thread_ts"))
        now = time.time()
        self._spend_post(channel_id, now)
        message = self._store(body, channel_id, thread_ts, now)
        return {"ok": True, "channel": channel_id, "ts": message.ts, "message": self._message_json(message)}

    def _accept_webhook(self, body: dict) -> None:
        check_message(body)
        thread_ts = self._thread_root(WEBHOOK_CHANNEL_ID, body.get("thread_ts"))  # webhooks may reply in threads
        now = time.time()
        self._spend_post(WEBHOOK_CHANNEL_ID, now)
        self._store(body, WEBHOOK_CHANNEL_ID, thread_ts, now)

    def _find_for_update(self, body: dict) -> Received:
        channel = str(body.get("channel") or "")
        if not CHANNEL_ID.fullmatch(channel):
            raise Rejection("channel_not_found", f"chat.update needs a channel id, not {channel!r}")
        message = self._by_key.get((channel, str(body.get("ts") or "")))
        if message is None:
            raise Rejection("message_not_found", f"no message {body.get('ts')!r} in {channel}")
        if channel == WEBHOOK_CHANNEL_ID:
            raise Rejection("cant_update_message", "a message sent through an incoming webhook cannot be edited")
        return message

    def _accept_update(self, body: dict) -> dict:
        message = self._find_for_update(body)
        check_message(body)
        now = time.time()
        _spend(self._update_times, self.update_rate, now, message.channel_id)
        self._update_times.append(now)
        self._apply_edit(message, body, now)
        self.update_calls.append((now, 200))
        return {
            "ok": True,
            "channel": message.channel_id,
            "ts": message.ts,
            "text": message.text,
            "message": self._message_json(message),
        }

    def _apply_edit(self, message: Received, body: dict, now: float) -> None:
        # chat.update: text replaces the text; blocks replace the blocks, and text without
        # blocks removes them (https://docs.slack.dev/reference/methods/chat.update).
        if "text" in body:
            message.text = str(body["text"] or "")
        if "blocks" in body:
            message.blocks = body["blocks"] or []
        elif "text" in body:
            message.blocks = []
        if "attachments" in body:
            message.attachments = body["attachments"] or []
        message.edits.append(Edit(now, message.text, message.blocks, body))
        self.updates.append((now, message.channel_id, message.ts, message.text, message.blocks))

    def _message_json(self, message: Received) -> dict:
        shown = {
            "type": "message",
            "text": message.text,
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "team": self.team_id,
            "ts": message.ts,
            "blocks": _with_block_ids(message.blocks),
        }
        if message.thread_ts:
            shown |= {"thread_ts": message.thread_ts, "parent_user_id": BOT_USER_ID}
        if message.attachments:
            shown["attachments"] = message.attachments
        shown |= {k: v for k in ("username", "icon_emoji", "icon_url") if (v := getattr(message, k))}
        if message.edits:
            shown["edited"] = {"user": BOT_USER_ID, "ts": _ts(int(message.edits[-1].at * 1_000_000))}
        return shown


async def _read_api_body(request: web.Request, expected: str = TOKEN) -> dict:
    """The Web API arguments (JSON body or form), with ``blocks`` decoded; checks the token."""
    try:
        if request.content_type == "application/json":
            body = await request.json()
            token = None
        else:
            body = dict(await request.post())
            token = body.pop("token", None)  # Slack takes the token as a form field too
    except ValueError:
        raise Rejection("invalid_json", "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Rejection("invalid_json", "the body is not a JSON object")
    _check_token(request.headers.get("Authorization", ""), token, expected)
    for name in ("blocks", "attachments"):  # form posts (and some JSON ones) carry them as JSON strings
        if isinstance(body.get(name), str):
            try:
                body[name] = json.loads(body[name])
            except ValueError:
                raise Rejection(f"invalid_{name}_format", f"{name} is not valid JSON") from None
    return body


def _check_token(authorization: str, form_token: str | None, expected: str = TOKEN) -> None:
    token = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else form_token
    if not token:
        raise Rejection("not_authed", "no token")
    if token != expected:
        raise Rejection("invalid_auth", "wrong token")


# ---------------------------------------------------------------- interactivity


def signed_action_request(secret: str, payload: dict, timestamp: float | None = None) -> tuple[bytes, dict]:
    """The body and headers Slack sends to an interactivity URL for ``payload``, signed with ``secret``.

    ``application/x-www-form-urlencoded`` with one field, ``payload`` (the JSON); ``X-Slack-Signature``
    is ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``.
    """
    stamp = str(int(time.time() if timestamp is None else timestamp))
    body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return body, headers


def _find_button(message: dict, action_id: str) -> tuple[str, dict]:
    """The ``block_id`` of the block holding the button ``action_id``, and the button itself."""
    for block in message.get("blocks") or []:
        candidates = (block.get("elements") or []) if block.get("type") == "actions" else [block.get("accessory")]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    return "", {}


def block_actions_payload(
    action_id: str,
    value: str | None,
    user_id: str,
    channel_id: str,
    message_ts: str,
    message: dict,
    *,
    username: str = "someone",
    channel_name: str = "alerts",
    response_url: str = "https://hooks.slack.com/actions/T0STANDIN0/1/standin",
) -> dict:
    """A ``block_actions`` payload for a click on the element ``action_id`` of ``message``, as Slack sends it.

    A button's action carries its ``value`` (none for a link button, which Slack opens); a select's
    or an overflow menu's carries the chosen option as ``selected_option`` (``value`` names it).
    """
    block_id, element = _find_button(message, action_id)
    kind = element.get("type", "button")
    action: dict = {"action_id": action_id, "block_id": block_id or "standin", "type": kind}
    if kind in ("static_select", "overflow"):
        chosen = [o for o in element.get("options") or [] if o.get("value") == value]
        if not chosen:
            raise ValueError(f"{action_id!r} offers no option {value!r}")
        action["selected_option"] = chosen[0]
        if kind == "static_select":
            action["placeholder"] = element.get("placeholder")
    elif value is not None:
        action["value"] = value
    action["action_ts"] = f"{time.time():.6f}"
    if element.get("text"):
        action["text"] = element["text"]
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": username, "name": username, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "standin-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel_id, "is_ephemeral": False},
        "trigger_id": "1000000000000.1000000000.standin",
        "team": {"id": TEAM_ID, "domain": "standin"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [action],
    }
