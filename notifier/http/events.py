"""``POST /v1/events``: one event, decided and answered. The storm path: keep it thin."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..models import Decision, Outcome
from .answers import json_response, retry_after_header
from .input import parse_event, read_body
from .state import GATEWAY

_STATUS = {
    Outcome.ACCEPTED: 202,
    Outcome.SHADOW: 202,
    Outcome.RESOLVED: 202,
    Outcome.REOPENED: 202,
    Outcome.DUPLICATE: 200,
}

_TEXT = {outcome: outcome.value for outcome in Outcome}  # a lookup: the enum's .value is a Python descriptor


def decision_body(decision: Decision) -> dict[str, Any]:
    """The answer body of a decision, as the contract writes it."""
    if decision.outcome is Outcome.DROPPED:
        return {
            "status": "dropped",
            "limit": decision.level,
            "rule": decision.rule,
            "retry_after": decision.retry_after,
        }
    if decision.outcome is Outcome.SHADOW:
        return {
            "status": "accepted",
            "id": decision.id,
            "shadow": {"would_drop": True, "limit": decision.level, "rule": decision.rule},
        }
    return {"status": _TEXT[decision.outcome], "id": decision.id}


async def post_event(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    admission = gateway.admission
    event = parse_event(await read_body(request, gateway.settings.api_tokens), admission.limiter.policy)
    decision = await admission.decide(event)
    if decision.outcome is Outcome.DROPPED:
        return json_response(decision_body(decision), 429, retry_after_header(decision.retry_after))
    return json_response(decision_body(decision), _STATUS[decision.outcome])
