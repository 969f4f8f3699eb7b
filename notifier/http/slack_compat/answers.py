"""The front doors' answers, in Slack's shapes: the one place that writes them.

The incoming-webhook door answers as Slack's webhooks: ``200`` and ``ok`` in
``text/plain``, or a status and the error code as the body (``400 invalid_payload``,
``404 no_service`` ...). The Web API door answers as Slack's Web API: HTTP ``200``
with ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``. A message the limits
refused is answered as a success with ``X-Notifier-Outcome: dropped``, or, for a
token with ``refusal: "429"``, with Slack's own 429 and ``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ...errors import InDoubt, StoreUnavailable
from ..answers import STORE_RETRY_AFTER, UNREADABLE, json_response, log_unavailable, logged_path, retry_after_header
from ..state import METRICS
from ..wire import Answer, head
from .payload import SlackError

log = logging.getLogger(__name__)

OUTCOME = "X-Notifier-Outcome"
TEXT_TYPE = {"Content-Type": "text/plain; charset=utf-8"}
# Incoming webhooks answer an error with a status and its code (Slack's changelog of 2016-05-17).
WEBHOOK_STATUS = {
    "invalid_payload": 400,
    "no_text": 400,
    "invalid_blocks": 400,
    "action_prohibited": 403,
    "access_denied": 403,
    "no_service": 404,
    "channel_not_found": 404,
    "request_too_large": 413,
    "rate_limited": 429,
    "internal_error": 500,
    "service_unavailable": 503,
}
_API_STATUS = {
    "access_denied": 403,
    "request_too_large": 413,
    "internal_error": 500,
    "service_unavailable": 503,
}  # else HTTP 200
_ACCEPTED, _DROPPED = {OUTCOME: "accepted"}, {OUTCOME: "dropped"}
# The heads of a webhook's ``ok``, built once: a storm's answer.
_OK = {False: head(200, {**TEXT_TYPE, **_ACCEPTED}), True: head(200, {**TEXT_TYPE, **_DROPPED})}


def webhook_ok(dropped: bool) -> web.Response:
    """``200 ok``: posted, or (``dropped``) refused by the limits, which the client need not know."""
    return Answer(_OK[dropped], b"ok")


def webhook_error(code: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """An incoming webhook's error: its status, and its code as the body."""
    return web.Response(status=WEBHOOK_STATUS.get(code, 400), text=code, headers={**TEXT_TYPE, **(headers or {})})


def webhook_rate_limited(retry_after: float) -> web.Response:
    """Slack's 429 for a token that asked for it (``refusal: "429"``)."""
    headers = {**retry_after_header(retry_after), **_DROPPED}
    return json_response({"ok": False, "error": "rate_limited"}, 429, headers)


def api_ok(body: Mapping[str, Any], dropped: bool = False) -> web.Response:
    """A Web API success: ``{"ok": true, ...}``."""
    return json_response({"ok": True, **body}, 200, _DROPPED if dropped else _ACCEPTED)


def api_error(code: str, status: int = 200, headers: Mapping[str, str] | None = None, **more: Any) -> web.Response:
    """A Web API error: HTTP 200 (as Slack, unless ``status``) with ``{"ok": false, "error": code}``."""
    return json_response({"ok": False, "error": code, **more}, status, headers)


def api_rate_limited(retry_after: float) -> web.Response:
    """Slack's Web API 429 for a token that asked for it (``refusal: "429"``)."""
    return api_error("ratelimited", 429, {**retry_after_header(retry_after), **_DROPPED})


def webhook_failure(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The webhook door's answer to what went wrong while taking a message."""
    code, headers = _failure(request, exc)
    return webhook_error(code, headers)


def api_failure(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The Web API door's answer to what went wrong while taking a call."""
    code, headers = _failure(request, exc)
    if isinstance(exc, SlackError) and code == "invalid_blocks" and exc.detail:  # as Slack: what is wrong, where
        errors = exc.detail.split("; ")
        return api_error(code, errors=errors, response_metadata={"messages": [f"[ERROR] {e}" for e in errors]})
    return api_error(code, _API_STATUS.get(code, 200), headers)


def _failure(request: web.Request, exc: Exception) -> tuple[str, Mapping[str, str] | None]:
    """Slack's code for ``exc`` and the headers of its answer; counted as a refused request."""
    if isinstance(exc, SlackError):
        code, headers = exc.code, None
    elif isinstance(exc, web.HTTPRequestEntityTooLarge):  # aiohttp stops any body past client_max_size
        code, headers = "request_too_large", None
    elif isinstance(exc, UNREADABLE):  # a body aiohttp cannot decode: what Slack says of a bad payload
        code, headers = "invalid_payload", None
    elif isinstance(exc, (StoreUnavailable, InDoubt)):  # an event in doubt too: the client may retry
        log_unavailable(exc)
        code, headers = "service_unavailable", retry_after_header(STORE_RETRY_AFTER)
    else:
        log.exception("unexpected error on %s %s", request.method, logged_path(request), exc_info=exc)
        code, headers = "internal_error", None
    metrics = request.app.get(METRICS)
    if metrics is not None:
        metrics.rejected.labels(str(WEBHOOK_STATUS.get(code, 400))).inc()
    return code, headers
