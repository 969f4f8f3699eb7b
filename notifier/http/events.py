"""``POST /v1/events``: one event, decided and answered. The storm path: keep it thin."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..admission.admit import Admission
from ..models import Decision, Outcome
from ..routing import Path
from .answers import ApiError, error_answer, json_response, refusal_response
from .auth import EVERYONE, GUARD, Caller
from .input import check_post, parse_event, unknown_category
from .sight import Seen, read_on_sight
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
        if decision.value is None:
            return {
                "status": "dropped",
                "limit": decision.level,
                "rule": decision.rule,
                "retry_after": decision.retry_after,
            }
        return {
            "status": "dropped",
            "limit": decision.level,
            "value": decision.value,
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


def check_channel(caller: Caller, path: Path) -> None:
    """A 403 when ``path`` goes to a channel ``caller`` may not post to; before anything is counted."""
    if not caller.may_post_to(path.channel):
        raise ApiError(403, forbidden_channel(caller, path.channel))


def forbidden_channel(caller: Caller, channel: str) -> str:
    return f"token '{caller.name}' may not post to channel '{channel}'"


OnSight = tuple[Decision | None, Path | None, Seen | None]  # decided_on_sight's answer


def decided_on_sight(admission: Admission, caller: Caller, raw: bytes) -> OnSight:
    """An event read on sight (``sight.py``): this replica's decision, else None, its path when this
    replica was asked (the event goes to the store on it, neither routed nor asked again), and what
    was read. ``(None, None, None)`` when not read on sight: then ``parse_event`` reads it and
    answers anything wrong (422, or 403 for its channel)."""
    seen = read_on_sight(raw)
    if seen is None or unknown_category(seen.category, admission.limiter.policy):
        return None, None, None
    path = admission.route(seen, caller.name)
    if caller.bounded and not caller.may_post_to(path.channel):
        return None, None, None
    return admission.decide_here(seen, path), path, seen


async def post_event(request: web.Request) -> web.StreamResponse:
    """Decide one event. It answers its own errors (the app does not wrap it in ``answers_errors``):
    on the storm path every coroutine layer costs, measured in ``bench/RESULTS.md``. ``notifier serve``
    calls it before aiohttp's router (``serving.py``)."""
    try:
        app = request.app  # a property: read once
        gateway = app[GATEWAY]
        admission = gateway.admission
        caller = app[GUARD].caller(request)
        if caller is not EVERYONE:  # in open mode the guard has checked it (a change to a guarded route)
            check_post(request)
        raw = await request.read()
        decision, path, seen = decided_on_sight(admission, caller, raw)
        if decision is None and path is not None and seen is not None and seen.dedup_key is not None:
            # A repeat met with an aged read of the alert epoch waits for the next read here: the
            # full reader below costs more than the wait (bench/RESULTS.md, links-50).
            decision = await admission.decide_after_read(seen, path)
        if decision is None:
            event = parse_event(raw, admission.limiter.policy)
            if path is None:  # not read on sight: routed, checked and decided now
                path = admission.route(event, caller.name)
                if caller.bounded:
                    check_channel(caller, path)
                decision = await admission.decide_on(event, path, caller.name)
            else:  # asked on sight, and after a read if it aged: the store decides
                decision = await admission.decide_in_store(event, path, caller.name)
        if decision.outcome is Outcome.DROPPED:
            return refusal_response(decision_body(decision), decision.retry_after)
        return json_response(decision_body(decision), _STATUS[decision.outcome])
    except Exception as exc:
        return error_answer(request, exc)
