"""The front doors' handlers: read the caller and the message, take it, answer in Slack's shape.

Thin on purpose: reading is ``payload.py``, the event and its decision ``intake.py``,
the answers ``answers.py``. Each handler answers its own errors in its door's shape
(the app does not wrap them in ``http.answers.answers_errors``, whose answers are the
gateway's own JSON).
"""

from __future__ import annotations

import hashlib
from typing import Any

from aiohttp import web

from ...models import Outcome
from ..auth import EVERYONE, GUARD, HOST_REFUSED, TOKENS, Caller
from ..state import GATEWAY
from .answers import (
    api_error,
    api_failure,
    api_ok,
    api_rate_limited,
    webhook_failure,
    webhook_ok,
    webhook_rate_limited,
)
from .intake import Taken, refused_on_sight, take, update
from .payload import Post, SlackError, api_body, read_post, webhook_body

SEND = "send"
FORBIDDEN = "action_prohibited"  # the webhook's answer to a channel its token may not post to
DROPPED = Outcome.DROPPED
TEAM_ID, BOT_ID = "T0NOTIFIER", "B0NOTIFIER"
SHOWN = ("text", "blocks", "attachments", "thread_ts", "username", "icon_emoji", "icon_url", "metadata")


async def post_webhook(request: web.Request) -> web.StreamResponse:
    """``POST /services/{a}/{b}/{secret}``: Slack's incoming webhook, the secret a token with scope send."""
    try:
        caller = webhook_caller(request)
        raw, content_type = await request.read(), request.headers.get("Content-Type", "")
        gateway = request.app[GATEWAY]
        decision, asked = refused_on_sight(gateway, caller, raw, content_type)
        if decision is None:  # a message that goes on, or of another shape: read all of it
            post = read_post(webhook_body(raw, content_type), "invalid_payload", "invalid_blocks", caller.mentions)
            decision = (await take(gateway, caller, post, None, FORBIDDEN, asked)).decision
        dropped = decision.outcome is DROPPED
        if dropped and caller.refusal == "429":
            return webhook_rate_limited(decision.retry_after)
        return webhook_ok(dropped)
    except Exception as exc:
        return webhook_failure(request, exc)


async def post_message(request: web.Request) -> web.StreamResponse:
    """``POST /api/chat.postMessage``: answered at once with a gateway ts, mapped to Slack's once posted."""
    try:
        caller, post = await read_call(request)
        gateway = request.app[GATEWAY]
        ts = await gateway.sent.issue()
        taken = await take(gateway, caller, post, ts, "channel_not_found")
        return _answer(caller, taken, {"channel": taken.channel, "ts": ts, "message": shown(post, ts, caller)})
    except Exception as exc:
        return api_failure(request, exc)


async def chat_update(request: web.Request) -> web.StreamResponse:
    """``POST /api/chat.update``: the message named by ``ts`` is edited within the edit budget."""
    try:
        caller, post = await read_call(request)
        if not post.ts:
            raise SlackError("message_not_found", "no ts")
        if not post.channel:
            raise SlackError("channel_not_found", "no channel")
        taken = await update(request.app[GATEWAY], caller, post)
        text = post.message.get("text", "")
        answer = {"channel": post.channel, "ts": post.ts, "text": text, "message": shown(post, post.ts, caller)}
        return _answer(caller, taken, answer)
    except Exception as exc:
        return api_failure(request, exc)


async def auth_test(request: web.Request) -> web.StreamResponse:
    """``POST /api/auth.test``: who the token is."""
    try:
        caller, _ = await read_caller(request)
        return api_ok(
            {
                "url": f"{request.scheme}://{request.host}/",
                "team": "notifier",
                "user": caller.name,
                "team_id": TEAM_ID,
                "user_id": user_id(caller.name),
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        )
    except Exception as exc:
        return api_failure(request, exc)


async def unknown_method(request: web.Request) -> web.StreamResponse:
    """Any other Web API method: Slack's ``unknown_method``."""
    return api_error("unknown_method", 404)


def _answer(caller: Caller, taken: Taken, body: dict[str, Any]) -> web.StreamResponse:
    if taken.dropped and caller.refusal == "429":
        return api_rate_limited(taken.decision.retry_after)
    return api_ok(body, taken.dropped)


async def read_call(request: web.Request) -> tuple[Caller, Post]:
    """The caller of a Web API call that sends a message (scope send), and the message."""
    caller, body = await read_caller(request, SEND)
    return caller, read_post(body, "invalid_arguments", "msg_too_long", caller.mentions)


async def read_caller(request: web.Request, scope: str | None = None) -> tuple[Caller, dict[str, Any]]:
    """The caller of a Web API call and its arguments. A token in the ``Authorization`` header is
    checked before the body is read (a wrong one is ``invalid_auth`` whatever the body); else the
    body's ``token`` field is the token."""
    header = bearer(request)
    caller = identify(request, header, scope) if header else None
    try:
        body = api_body(await request.read(), request.headers.get("Content-Type", ""))
    except SlackError:
        if caller is None and not request.app[TOKENS].open:  # no token in a header, none readable in the body
            raise SlackError("not_authed", "no token") from None
        raise
    return caller or identify(request, body.get("token"), scope), body


def webhook_caller(request: web.Request) -> Caller:
    """The caller whose token is the webhook's secret (any secret while no tokens are configured)."""
    tokens = request.app[TOKENS]
    if tokens.open:
        return anyone(request)
    caller = tokens.identify(request.match_info["secret"])
    if caller is None:
        raise SlackError("no_service", "unknown secret")
    if not caller.may(SEND):
        raise SlackError("action_prohibited", f"token {caller.name!r} lacks scope {SEND!r}")
    return caller


def bearer(request: web.Request) -> str:
    """The token of an ``Authorization: Bearer`` header, or ""."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else ""


def identify(request: web.Request, presented: object, scope: str | None = None) -> Caller:
    """The caller whose token is ``presented``, with ``scope``; else Slack's error for it."""
    tokens = request.app[TOKENS]
    if tokens.open:
        return anyone(request)
    if not isinstance(presented, str) or not presented:
        raise SlackError("not_authed", "no token")
    caller = tokens.identify(presented)
    if caller is None:
        raise SlackError("invalid_auth", "unknown token")
    if scope is not None and not caller.may(scope):
        raise SlackError("missing_scope", f"token {caller.name!r} lacks scope {scope!r}")
    return caller


def anyone(request: web.Request) -> Caller:
    """The caller in open mode, from a ``Host`` the gateway answers (``Guard.host_allowed``)."""
    if not request.app[GUARD].host_allowed(request):
        raise SlackError("access_denied", HOST_REFUSED)
    return EVERYONE


def user_id(name: str) -> str:
    """A stable Slack-like user id for a token's name."""
    return "U" + hashlib.sha256(name.encode()).hexdigest()[:10].upper()


def shown(post: Post, ts: str, caller: Caller) -> dict[str, Any]:
    """The message as Slack's answers show it."""
    own = {name: post.message[name] for name in SHOWN if name in post.message}
    return {"type": "message", "user": user_id(caller.name), "bot_id": BOT_ID, **own, "ts": ts}
