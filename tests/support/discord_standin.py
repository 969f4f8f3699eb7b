"""A local stand-in for a Discord channel webhook: execute (``?wait=true``), edit, and Discord's answers.

An aiohttp server on 127.0.0.1 in a thread (and event loop) of its own, as the Slack stand-in. One
webhook lives at ``webhook_url``; another id or token, or any after ``delete_webhook()``, is answered
``404 {"message": "Unknown Webhook", "code": 10015}``.

- **Execute** (``POST``): with ``wait=true`` the created message object (``id``, ``content``,
  ``embeds``, ``mention_everyone``...), else ``204``; ``thread_id`` is recorded. **Edit** (``PATCH
  .../messages/{id}``): the edited message; an id it never made: ``404`` code ``10008`` (Unknown
  Message). A message keeps its current content and embeds, its edits, each call's ``allowed_mentions``
  (``allowed``) and whom Discord would have notified (``pinged``): mentions in ``content`` (embeds
  never ping) that ``allowed_mentions`` allows, or a webhook's default ``{"parse": ["users"]}``.
- **Refusals** (recorded in ``refusals``; a well-behaved sender leaves it empty): ``content`` over 2,000
  characters, more than 10 embeds, an embed's title over 256, description over 4,096, more than 25
  fields, a field name over 256 or empty, a value over 1,024 or empty, footer over 2,048, author name
  over 256, more than 6,000 of those together across embeds, a color outside 0..0xFFFFFF, an invalid
  ``allowed_mentions``: ``400 {"code": 50035, "errors": {...}, "message": "Invalid Form Body"}`` with
  Discord's error paths; a message with no content and no embeds: ``400 {"message": "Cannot send an
  empty message", "code": 50006}``. Lengths are code points after trimming whitespace, as Discord counts.
- **Rate limits** (recorded in ``throttled``, not refusals; only accepted calls count; windows slide):
  executions at most ``webhook_rate`` (default 5 per 2 s) per webhook and ``channel_rate`` (default 30
  messages per minute) per channel; edits at most ``edit_rate`` (default 5 per 2 s). Over: ``429`` as
  Discord answers it, JSON ``{"message": "You are being rate limited.", "retry_after": 1.234,
  "global": false}`` with ``Retry-After`` (seconds, rounded up), ``X-RateLimit-Limit``, ``-Remaining``,
  ``-Reset``, ``-Reset-After``, ``-Bucket`` and ``-Scope`` (``user`` for the webhook's bucket, ``shared``
  for the channel's, whose message is "The resource is being rate limited.").
- **Scripted answers**, first, in order (``script`` for executions, ``script_edit`` for edits): ``(429,
  retry_after)``, ``(404,)`` (Unknown Webhook), ``("gone",)`` (Unknown Message), ``(500,)``, ``("ok",)``.

Sources (https://discord.com/developers/docs/): resources/webhook, resources/message (embed limits,
allowed mentions), topics/rate-limits (429 body, headers), topics/opcodes-and-status-codes. The 5 per 2 s
and 30 a minute are what Discord's webhook buckets answer as widely observed (Discord gives no numbers).
"""

from __future__ import annotations

import bisect
import math
import re
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web
from served import Served

WEBHOOK_ID, TOKEN, CHANNEL_ID = "1100000000000000001", "standin-token", "1200000000000000002"
CONTENT, EMBEDS, EMBED_TOTAL = 2000, 10, 6000
EMBED_LIMITS = {"title": 256, "description": 4096}
FIELDS, FIELD_NAME, FIELD_VALUE, FOOTER, AUTHOR = 25, 256, 1024, 2048, 256
MENTION_TYPES = {"users", "roles", "everyone"}
WEBHOOK_DEFAULT = {"parse": ["users"]}  # allowed_mentions of a webhook call that gives none
Rate = tuple[int, float] | None  # (calls, seconds) in any sliding window; None: not enforced


@dataclass
class Received:
    """One message the webhook made: its current content and embeds, and what each call asked."""

    id: str
    content: str
    embeds: list
    at: float
    raw: dict  # the body of the execution
    thread_id: str | None = None
    allowed: list = field(default_factory=list)  # allowed_mentions of the post, then of each edit (None: absent)
    pinged: list = field(default_factory=list)  # who would have been notified, by any call: "@everyone", "<@1>"...
    edits: list = field(default_factory=list)  # (time, body, thread_id) of each accepted edit


@dataclass(frozen=True)
class Refusal:
    """A call the stand-in refused on its own, with Discord's code and what it said."""

    at: float
    method: str  # "execute" or "edit"
    code: int  # 50035 (Invalid Form Body), 50006 (empty message), 50109 (not JSON)
    reason: str
    body: dict = field(default_factory=dict, repr=False)


class Rejection(Exception):
    """Discord would answer 400 with this code, message and ``errors`` tree."""

    def __init__(self, code: int, message: str, errors: dict | None = None) -> None:
        super().__init__(f"{code} {message}: {errors or ''}")
        self.code, self.message, self.errors = code, message, errors


class Throttled(Exception):
    """Discord would answer 429: wait ``retry_after`` seconds for ``bucket``."""

    def __init__(self, retry_after: float, limit: int, bucket: str, scope: str) -> None:
        super().__init__(f"rate limited for {retry_after}s")
        self.retry_after, self.limit, self.bucket, self.scope = retry_after, limit, bucket, scope


def _length(value: object) -> int:
    return len(value.strip()) if isinstance(value, str) else 0


def _error(path: dict, keys: list, code: str, message: str) -> None:
    """Add Discord's ``{"a": {"0": {"b": {"_errors": [...]}}}}`` entry at ``keys`` of ``path``."""
    for key in keys:
        path = path.setdefault(str(key), {})
    path.setdefault("_errors", []).append({"code": code, "message": message})


def _too_long(errors: dict, keys: list, value: object, limit: int) -> int:
    if _length(value) > limit:
        _error(errors, keys, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")
    return _length(value)


def _check_field(errors: dict, keys: list, item: dict) -> int:
    size = 0
    for name, limit in (("name", FIELD_NAME), ("value", FIELD_VALUE)):
        if not _length(item.get(name)):
            _error(errors, [*keys, name], "BASE_TYPE_REQUIRED", "This field is required")
        size += _too_long(errors, [*keys, name], item.get(name), limit)
    return size


def _check_embed(errors: dict, keys: list, embed: dict) -> int:
    """Discord's complaints about one embed, added to ``errors``; the characters it counts in the 6,000."""
    size = sum(_too_long(errors, [*keys, k], embed.get(k), limit) for k, limit in EMBED_LIMITS.items())
    size += _too_long(errors, [*keys, "footer", "text"], (embed.get("footer") or {}).get("text"), FOOTER)
    size += _too_long(errors, [*keys, "author", "name"], (embed.get("author") or {}).get("name"), AUTHOR)
    if "author" in embed and not _length((embed.get("author") or {}).get("name")):
        _error(errors, [*keys, "author", "name"], "BASE_TYPE_REQUIRED", "This field is required")
    color = embed.get("color", 0)
    if not isinstance(color, int) or not 0 <= color <= 0xFFFFFF:
        _error(errors, [*keys, "color"], "NUMBER_TYPE_MAX", "int value should be <= 16777215 and >= 0.")
    fields = embed.get("fields") or []
    if len(fields) > FIELDS:
        _error(errors, [*keys, "fields"], "BASE_TYPE_MAX_LENGTH", f"Must be {FIELDS} or fewer in length.")
    return size + sum(_check_field(errors, [*keys, "fields", i], f) for i, f in enumerate(fields))


def _check_mentions(errors: dict, allowed: object) -> None:
    if allowed is None:
        return
    parse = allowed.get("parse") if isinstance(allowed, dict) else None
    if not isinstance(allowed, dict) or not set(parse or []) <= MENTION_TYPES:
        _error(errors, ["allowed_mentions", "parse"], "ENUM_TYPE_COERCE", "Value must be one of {'users', ...}.")
    elif any(k in allowed and t in (parse or []) for k, t in (("users", "users"), ("roles", "roles"))):
        _error(errors, ["allowed_mentions"], "SET_TYPE_ALREADY_CONTAINS_VALUE", "parse and ids are exclusive")


def check_body(body: dict, editing: bool = False) -> None:
    """Raise the ``Rejection`` Discord would answer for this body, if any."""
    errors: dict = {}
    embeds = body.get("embeds") or []
    _too_long(errors, ["content"], body.get("content"), CONTENT)
    if len(embeds) > EMBEDS:
        _error(errors, ["embeds"], "BASE_TYPE_MAX_LENGTH", f"Must be {EMBEDS} or fewer in length.")
    total = sum(_check_embed(errors, ["embeds", i], e) for i, e in enumerate(embeds))
    if total > EMBED_TOTAL:
        _error(errors, ["embeds"], "MAX_EMBED_SIZE_EXCEEDED", f"Embed size exceeds maximum size of {EMBED_TOTAL}")
    _check_mentions(errors, body.get("allowed_mentions"))
    if errors:
        raise Rejection(50035, "Invalid Form Body", errors)
    if not editing and not _length(body.get("content")) and not embeds:
        raise Rejection(50006, "Cannot send an empty message")


def pings(content: str, allowed: dict | None) -> list[str]:
    """Who Discord would notify for ``content`` under ``allowed`` (a webhook's default when None)."""
    allowed = WEBHOOK_DEFAULT if allowed is None else allowed
    parse = set(allowed.get("parse") or [])
    found = re.findall(r"@everyone|@here", content) if "everyone" in parse else []
    for kind, pattern in (("users", r"<@!?(\d+)>"), ("roles", r"<@&(\d+)>")):
        listed = {str(i) for i in allowed.get(kind) or []}
        found += [f"<{kind}:{i}>" for i in re.findall(pattern, content) if kind in parse or i in listed]
    return found


class DiscordStandin(Served):
    """A Discord channel webhook at ``webhook_url``, with Discord's limits, answers and rate limits."""

    service = "discord"

    def __init__(
        self, webhook_rate: Rate = (5, 2.0), channel_rate: Rate = (30, 60.0), edit_rate: Rate = (5, 2.0)
    ) -> None:
        self.rates = {"webhook": webhook_rate, "channel": channel_rate, "edit": edit_rate}
        self.messages: list[Received] = []
        self.calls: list[tuple[float, str, int]] = []  # (time, "execute"/"edit", status), refused ones too
        self.refusals: list[Refusal] = []
        self.throttled: list[tuple[float, str, float]] = []  # (time, bucket, retry_after)
        self.deleted = False
        self._script: dict[str, list[tuple]] = {"execute": [], "edit": []}
        self._times: dict[str, list[float]] = {"webhook": [], "channel": [], "edit": []}
        self._by_id: dict[str, Received] = {}
        self._serial = 0
        self._lock = threading.RLock()

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/webhooks/{WEBHOOK_ID}/{TOKEN}"

    def script(self, *answers: tuple) -> None:
        """Queue answers for executions: ``(429, retry_after)``, ``(500,)``, ``(404,)``, ``("ok",)``."""
        with self._lock:
            self._script["execute"].extend(answers)

    def script_edit(self, *answers: tuple) -> None:
        """Queue answers for edits, as ``script``; ``("gone",)`` answers Unknown Message."""
        with self._lock:
            self._script["edit"].extend(answers)

    def delete_webhook(self) -> None:
        """From now on the webhook is unknown (``404``, code ``10015``), as after its deletion in Discord."""
        self.deleted = True

    def message(self, message_id: str) -> Received | None:
        with self._lock:
            return self._by_id.get(message_id)

    # -- routes (the server's life cycle: served.py)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/webhooks/{id}/{token}", self._execute)
        app.router.add_patch("/api/webhooks/{id}/{token}/messages/{message}", self._edit)

    # -- HTTP handlers

    async def _execute(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "execute", self._accept_execute)

    async def _edit(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "edit", self._accept_edit)

    async def _handle(self, request: web.Request, method: str, accept) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        with self._lock:
            try:
                response = self._answer(request, method, body, accept)
            except Rejection as rejection:
                self.refusals.append(Refusal(time.time(), method, rejection.code, rejection.message, body or {}))
                errors = {"errors": rejection.errors} if rejection.errors else {}
                response = web.json_response(
                    {"code": rejection.code, "message": rejection.message, **errors}, status=400
                )
            except Throttled as throttled:
                self.throttled.append((time.time(), throttled.bucket, throttled.retry_after))
                response = _too_many(throttled)
            self.calls.append((time.time(), method, response.status))
        return response

    def _answer(self, request: web.Request, method: str, body: object, accept) -> web.StreamResponse:
        response = self._scripted(method)  # "is None", not "or": an empty aiohttp response is a falsy mapping
        if response is None:
            response = self._known(request)
        return accept(request, body) if response is None else response

    def _scripted(self, method: str) -> web.StreamResponse | None:
        answer = self._script[method].pop(0) if self._script[method] else ("ok",)
        if answer[0] == 429:
            return _too_many(Throttled(float(answer[1]), 5, "scripted", "user"))
        if answer[0] in (404, "gone"):
            return _unknown("Webhook" if answer[0] == 404 else "Message")
        if isinstance(answer[0], int):
            return web.Response(status=answer[0], text="upstream trouble")
        return None

    def _known(self, request: web.Request) -> web.StreamResponse | None:
        info = request.match_info
        if self.deleted or info["id"] != WEBHOOK_ID or info["token"] != TOKEN:
            return _unknown("Webhook")
        return None

    # -- accepting (called with the lock held; raise Rejection or Throttled to refuse)

    def _accept_execute(self, request: web.Request, body: object) -> web.StreamResponse:
        if not isinstance(body, dict):
            raise Rejection(50109, "The request body contains invalid JSON.")
        check_body(body)
        now = time.time()
        self._spend(now, ("webhook", "user"), ("channel", "shared"))
        self._serial += 1
        ident, content = str(1_300_000_000_000_000_000 + self._serial), str(body.get("content") or "")
        message = Received(ident, content, list(body.get("embeds") or []), now, body, request.query.get("thread_id"))
        self._note_mentions(message, body)
        self.messages.append(message)
        self._by_id[message.id] = message
        if request.query.get("wait", "false").lower() not in ("true", "1"):
            return web.Response(status=204)
        return web.json_response(self._message_json(message))

    def _accept_edit(self, request: web.Request, body: object) -> web.StreamResponse:
        message = self._by_id.get(request.match_info["message"])
        if message is None:
            return _unknown("Message")
        if not isinstance(body, dict):
            raise Rejection(50109, "The request body contains invalid JSON.")
        check_body({"content": message.content, "embeds": message.embeds, **body}, editing=True)
        now = time.time()
        self._spend(now, ("edit", "user"))
        message.content = str(body.get("content", message.content) or "")
        message.embeds = list(body.get("embeds", message.embeds) or [])
        message.edits.append((now, body, request.query.get("thread_id")))
        self._note_mentions(message, body)
        return web.json_response(self._message_json(message, edited=now))

    def _note_mentions(self, message: Received, body: dict) -> None:
        allowed = body.get("allowed_mentions")
        message.allowed.append(allowed)
        if "content" in body:  # an edit that leaves the content parses nothing anew
            message.pinged += pings(message.content, allowed)

    def _spend(self, now: float, *buckets: tuple[str, str]) -> None:
        """Count a call in each of ``buckets`` (name, scope), or raise ``Throttled`` and count it in none."""
        for bucket, scope in buckets:
            rate, times = self.rates[bucket], self._times[bucket]
            if rate is not None and len(times) - bisect.bisect_right(times, now - rate[1]) >= rate[0]:
                wait = times[len(times) - rate[0]] + rate[1] - now
                raise Throttled(round(wait, 3), rate[0], bucket, scope)
        for bucket, _ in buckets:
            self._times[bucket].append(now)

    def _message_json(self, message: Received, edited: float | None = None) -> dict:
        """The message object Discord answers (the fields a webhook's sender reads)."""
        author = {"id": WEBHOOK_ID, "username": "notifier", "bot": True, "discriminator": "0000"}
        shown = {"id": message.id, "type": 0, "channel_id": message.thread_id or CHANNEL_ID, "author": author}
        shown |= {"webhook_id": WEBHOOK_ID, "content": message.content, "embeds": message.embeds, "flags": 0}
        shown |= {"mention_everyone": any(p.startswith("@") for p in message.pinged), "mentions": []}
        shown |= {"mention_roles": [], "timestamp": _iso(message.at), "edited_timestamp": edited and _iso(edited)}
        return shown


def _too_many(throttled: Throttled) -> web.Response:
    """Discord's 429: JSON body with ``retry_after`` in seconds, and its rate limit headers."""
    wait = max(throttled.retry_after, 0.001)
    shared = throttled.scope == "shared"
    body = {
        "message": "The resource is being rate limited." if shared else "You are being rate limited.",
        "retry_after": wait,
        "global": False,
    }
    headers = {
        "Retry-After": str(math.ceil(wait)),
        "X-RateLimit-Limit": str(throttled.limit),
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": f"{time.time() + wait:.3f}",
        "X-RateLimit-Reset-After": f"{wait:.3f}",
        "X-RateLimit-Bucket": f"standin-{throttled.bucket}",
        "X-RateLimit-Scope": throttled.scope,
    }
    return web.json_response(body, status=429, headers=headers)


def _unknown(what: str) -> web.Response:
    """Discord's 404 for a webhook (10015) or a message (10008) it does not know."""
    return web.json_response({"message": f"Unknown {what}", "code": 10015 if what == "Webhook" else 10008}, status=404)


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}+00:00"
