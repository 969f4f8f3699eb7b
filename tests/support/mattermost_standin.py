"""A local stand-in for a Mattermost incoming webhook: what it takes, what it makes of it, whom it mentions.

An aiohttp server on 127.0.0.1 in a thread (and event loop) of its own, as the Slack stand-in. One hook
lives at ``webhook_url`` (``/hooks/{key}``); another key, or any after ``delete_webhook()``, is answered
as Mattermost answers it: ``400`` with an AppError, ``{"id": "web.incoming_webhook.invalid.app_error",
"message": "Invalid webhook.", ..., "status_code": 400}``. A post is answered ``200 ok`` (text/plain).

- **What Mattermost makes of a post**, kept in ``Received``: Slack's forms rewritten in the text, the
  attachments' pretext, text and title and the fields' values (``<!channel>``, ``<!here>``, ``<!all>``
  become ``@channel``..., ``<@ID>`` becomes ``@username`` for a user in ``users``), then
  ``<url|text>`` in the text made a markdown link: ``message`` and ``attachments`` are what Mattermost
  stores, ``raw`` what was sent. ``mentions`` lists what Mattermost's mention parser finds in the
  message and the attachments' pretext, text and field values, code spans and blocks left out:
  ``@channel``, ``@here``, ``@all``, any other ``@word`` (a user, or one it would tell the sender is
  not in the channel) and ``users``' names. A well-behaved sender of event text leaves it empty. (A
  port of ``ProcessSlackText``, ``CreateWebhookPost``, ``getMentionsEnabledFields`` and
  ``StandardMentionParser.ProcessText`` of mattermost/mattermost ``server/channels/app``.)
- **Refusals** (``refusals``): no text and no attachments (``web.incoming_webhook.text.app_error``,
  as Mattermost); more than 16,383 characters (runes) in the text and the attachments' strings
  together: ``400`` ``web.incoming_webhook.split_props_length.app_error``. Mattermost itself splits a
  longer text into several posts; the stand-in refuses, so that a test notices a sender that lets it.
- **Rate limit** (``throttled``): Mattermost's API rate limit with its default settings (System
  Console > Rate Limiting: 10 requests per second, a burst of 100, per remote address), a GCRA as the
  ``throttled`` library Mattermost uses; ``rate=(per_second, burst)``, ``None`` to switch it off (as a
  server's default is). Over it: ``429``, body ``limit exceeded``, headers ``X-RateLimit-Limit``
  (burst + 1), ``X-RateLimit-Remaining``, ``X-RateLimit-Reset`` and ``Retry-After`` (whole seconds,
  rounded up), as ``server/channels/app/ratelimit.go``. Only accepted calls count.
- **Scripted answers**, served in order before it answers on its own (``script``): ``(429,
  retry_after)``, ``(404,)`` (the hook's channel is gone), any other status (a plain body), ``("ok",)``.

Docs: https://developers.mattermost.com/integrate/webhooks/incoming/,
https://developers.mattermost.com/integrate/reference/message-attachments/,
https://docs.mattermost.com/administration-guide/configure/rate-limiting-configuration-settings.html
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from aiohttp import web
from served import Served

KEY = "standinhookkey0000000000000"
POST = 16_383
SYSTEM = ("@channel", "@here", "@all")
_ANNOUNCEMENTS = {"<!channel>": "@channel", "<!here>": "@here", "<!all>": "@all"}
_LINK_WITH_TEXT = re.compile(r"<([^\n<|>]+)\|([^|\n>]+)>")
_CODE = re.compile(r"```.*?(```|$)|`[^`\n]*`", re.S)  # code blocks and spans: no mentions in them


@dataclass
class Received:
    """One post: as sent (``raw``), as Mattermost stores it, and the mentions it would notify."""

    text: str
    message: str
    attachments: list
    at: float
    raw: dict
    mentions: list = field(default_factory=list)


@dataclass(frozen=True)
class Refusal:
    at: float
    error: str  # Mattermost's AppError id
    reason: str
    body: dict = field(default_factory=dict, repr=False)


def _app_error(status: int, error: str, message: str) -> web.Response:
    body = {"id": error, "message": message, "detailed_error": "", "request_id": "standin", "status_code": status}
    return web.json_response(body, status=status)


def size(body: dict) -> int:
    """Characters of the post: its text and every string of its attachments."""

    def strings(value: object) -> int:
        if isinstance(value, str):
            return len(value)
        if isinstance(value, dict):
            return sum(strings(v) for k, v in value.items() if k not in ("color", "short"))
        return sum(strings(v) for v in value) if isinstance(value, list) else 0

    return strings(body.get("text") or "") + strings(body.get("attachments") or [])


def slack_text(text: str, users: dict[str, str]) -> str:
    """``ProcessSlackText``: ``<!channel>`` -> ``@channel``..., ``<@ID>`` -> ``@username`` for known ids."""
    for form, mention in _ANNOUNCEMENTS.items():
        text = text.replace(form, mention)
    return re.sub(r"<@([a-zA-Z0-9]+)>", lambda m: "@" + users[m[1]] if m[1] in users else m[0], text)


def _words(text: str) -> list[str]:
    """Mattermost's split: at anything but a letter, a number, ``:``, ``.``, ``-``, ``_`` or ``@``."""
    keep = [c if c in ":.-_@" or unicodedata.category(c)[0] in "LN" else " " for c in text]
    return "".join(keep).split()


def mentions(text: str, names: set[str]) -> list[str]:
    """What ``StandardMentionParser.ProcessText`` finds in ``text``: system mentions, ``@word``s, ``names``."""
    found: list[str] = []

    def check(word: str) -> bool:
        if word.lower() in SYSTEM or word.lower() in names:
            found.append(word.lower())
            return True
        return False

    for word in _words(_CODE.sub(" ", text)):
        if word[0] == ":" and word[-1] == ":":
            continue  # an emoji
        word = word.lstrip(":.-_")
        candidate, matched = word, False  # the word, then without its trailing ".", "-", ":" or "_" one by one
        while candidate and not (matched := check(candidate)) and candidate[-1] in ".-:_":
            candidate = candidate[:-1]
        if matched or not word:
            continue
        if word.startswith("@"):  # someone, or someone not in the channel: Mattermost says so to the sender
            name = word[:-1] if word[-1] in ".-:" else word
            found += [name] if len(name) > 1 else []  # a bare "@" names no one
        else:
            found += [
                piece for piece in re.split(r"[.\-:]", word) if len(piece) > 1 and not check(piece) and piece[0] == "@"
            ]
    return found


class MattermostStandin(Served):
    """A Mattermost incoming webhook at ``webhook_url``, with Mattermost's answers and default rate limit."""

    service = "mattermost"

    def __init__(self, rate: tuple[float, int] | None = (10, 100), users: dict[str, str] | None = None) -> None:
        self.rate = rate
        self.users = users or {}  # user id -> username, for <@ID> and for mentions by name
        self.messages: list[Received] = []
        self.calls: list[tuple[float, int]] = []  # (time, status), refused ones too
        self.refusals: list[Refusal] = []
        self.throttled: list[tuple[float, str, int]] = []  # (time, remote address, retry_after)
        self.deleted = False
        self._script: list[tuple] = []
        self._tat: dict[str, float] = {}  # GCRA's theoretical arrival time per remote address
        self._lock = threading.RLock()

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{KEY}"

    def script(self, *answers: tuple) -> None:
        """Queue answers: ``(429, retry_after)``, ``(404,)``, ``(500,)``, ``("ok",)``."""
        with self._lock:
            self._script.extend(answers)

    def delete_webhook(self) -> None:
        """From now on the hook is unknown (``400 Invalid webhook.``), as after its deletion."""
        self.deleted = True

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.messages)

    # -- routes (the server's life cycle: served.py)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/hooks/{key}", self._hook)

    # -- the hook

    async def _hook(self, request: web.Request) -> web.Response:
        body = await _read(request)
        with self._lock:
            response = self._scripted()
            if response is None:  # not "or": an empty aiohttp response is a falsy mapping
                response = self._accept(request, body)
            self.calls.append((time.time(), response.status))
        return response

    def _scripted(self) -> web.Response | None:
        answer = self._script.pop(0) if self._script else ("ok",)
        if answer[0] == 429:
            return _too_many(self.rate or (10, 100), float(answer[1]))
        if answer[0] == 404:
            return _app_error(404, "app.channel.get.existing.app_error", "Unable to find the existing channel.")
        if isinstance(answer[0], int):
            return web.Response(status=answer[0], text="upstream trouble")
        return None

    def _accept(self, request: web.Request, body: dict | None) -> web.Response:
        if self.deleted or request.match_info["key"] != KEY:
            return _app_error(400, "web.incoming_webhook.invalid.app_error", "Invalid webhook.")
        if body is None:
            return self._refuse({}, "web.incoming_webhook.parse.app_error", "Unable to parse incoming data.")
        if not body.get("text") and not body.get("attachments"):
            return self._refuse(body, "web.incoming_webhook.text.app_error", "No text specified.")
        if size(body) > POST:
            return self._refuse(body, "web.incoming_webhook.split_props_length.app_error", f"{size(body)} > {POST}")
        wait = self._spend(request.remote or "")
        if wait:
            self.throttled.append((time.time(), request.remote or "", math.ceil(wait)))
            return _too_many(self.rate or (10, 100), wait)
        self.messages.append(self._post(body))
        return web.Response(text="ok", content_type="text/plain")

    def _refuse(self, body: dict, error: str, reason: str) -> web.Response:
        self.refusals.append(Refusal(time.time(), error, reason, body))
        return _app_error(400, error, reason)

    def _spend(self, key: str) -> float:
        """GCRA (``throttled``): 0 when a call is allowed now (and counted), else the seconds until it would be."""
        if self.rate is None:
            return 0.0
        per_second, burst = self.rate
        now, interval = time.monotonic(), 1 / per_second
        tat = max(self._tat.get(key, now), now) + interval
        wait = tat - interval * (burst + 1) - now
        if wait > 0:
            return wait
        self._tat[key] = tat
        return 0.0

    def _post(self, body: dict) -> Received:
        """The post Mattermost makes of ``body``, and whom it mentions."""
        text = str(body.get("text") or "")
        message = _LINK_WITH_TEXT.sub(r"[\2](\1)", slack_text(text, self.users))
        attachments = json.loads(json.dumps(body.get("attachments") or []))
        for attachment in attachments:
            for key in ("pretext", "text", "title"):
                attachment[key] = slack_text(str(attachment.get(key) or ""), self.users)
            for item in attachment.get("fields") or []:
                item["value"] = slack_text(str(item.get("value") or ""), self.users)
        names = {"@" + name.lower() for name in self.users.values()}
        parts = [message] + [a[k] for a in attachments for k in ("pretext", "text") if a[k]]
        parts += [f["value"] for a in attachments for f in a.get("fields") or [] if f.get("value")]
        found = [m for part in parts for m in mentions(part, names)]
        return Received(text, message, attachments, time.time(), body, found)


async def _read(request: web.Request) -> dict | None:
    """A JSON body, or Slack's form ``payload=`` (Mattermost takes both)."""
    raw = await request.text()
    if request.content_type == "application/x-www-form-urlencoded":
        raw = (parse_qs(raw).get("payload") or [""])[0]
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _too_many(rate: tuple[float, int], wait: float) -> web.Response:
    """Mattermost's 429 (``http.Error``: a text body) with the ``throttled`` library's headers."""
    headers = {
        "X-RateLimit-Limit": str(rate[1] + 1),
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(math.ceil(wait)),
        "Retry-After": str(math.ceil(wait)),
    }
    return web.Response(status=429, text="limit exceeded\n", headers=headers)
