"""How the Slack stand-in answers one call, and what it records of it.

The records (``Edit``, ``Received``, ``Refusal``); ``Answering``, the part of ``SlackStandin``
(``slack_standin.py``) that answers scripted answers, refuses, throttles and accepts messages
(storing them, applying edits, showing them as Slack does); and reading Web API bodies and tokens.
``Answering`` keeps no state of its own: it works on the attributes ``SlackStandin.__init__`` sets.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web
from slack_blocks import Rejection, _with_block_ids, check_message
from slack_directory import Directory
from slack_ids import APP_ID, BOT_ID, BOT_USER_ID, CHANNEL_ID, TOKEN, TS, WEBHOOK_CHANNEL_ID, _ts, channel_id_for
from slack_rates import Throttled, _spend


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


class Answering:
    """The answering half of ``SlackStandin``: scripted answers, refusals, throttling and accepting."""

    # Set by SlackStandin.__init__ (slack_standin.py):
    post_rate: tuple[int, float] | None
    update_rate: tuple[int, float] | None
    team_id: str
    directory: Directory
    messages: list[Received]
    calls: list[tuple[float, int]]
    update_calls: list[tuple[float, int]]
    updates: list[tuple[float, str, str, str, list]]
    refusals: list[Refusal]
    throttled: list[tuple[float, str, str, int]]
    _by_key: dict[tuple[str, str], Received]
    _post_times: dict[str, list[float]]
    _update_times: list[float]
    _last_micros: int
    _lock: threading.RLock

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
