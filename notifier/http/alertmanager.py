"""``POST /v1/alertmanager``: Prometheus Alertmanager's webhook payload (version 4), as events.

Each alert becomes one event. The answer is ``200`` with one outcome per alert
even when some are dropped, so Alertmanager never retries because of a limit;
``503`` when the store did not decide every alert, so it retries later (its
retries are duplicates). That ``503`` has the outcome of each alert too, and
its ``error`` is the plain one only when no alert of the payload was, or may
have been, admitted.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InDoubt, StoreUnavailable
from ..models import MAX_URL, URL_PATTERN, Event, Link, Severity
from .answers import UNAVAILABLE, ApiError, in_doubt, json_response, log_unavailable, unavailable
from .auth import CALLER, Caller
from .events import decision_body, forbidden_channel
from .input import read_json, unknown_category, validation_details
from .state import GATEWAY, Gateway

MAX_ALERTS = 1000
ADMITTED = frozenset(("accepted", "resolved", "reopened", "outcome unknown"))  # an alert's outcomes that may post
_NOT_CATEGORY = re.compile(r"[^A-Za-z0-9_.:\-]+")
_SEVERITIES: dict[str, Severity] = {
    "info": "info",
    "warning": "warning",
    "warn": "warning",
    "error": "error",
    "critical": "critical",
    "page": "critical",
}


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str = "firing"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    startsAt: str = ""
    fingerprint: str = ""
    generatorURL: str = ""


class Payload(BaseModel):
    """The parts of the webhook body the gateway reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")

    version: str = "4"
    status: str = ""
    alerts: list[Alert] = Field(max_length=MAX_ALERTS)


_URL = re.compile(URL_PATTERN)
# Where an alert's links come from, and their labels: the rule that fired, then its annotations.
_LINKS = (("Source", None), ("Runbook", "runbook_url"), ("Dashboard", "dashboard_url"))


def links_of(alert: Alert) -> list[Link]:
    """``generatorURL``, ``runbook_url`` and ``dashboard_url`` as link buttons.

    One Slack would refuse (not an absolute http(s) URL, or too long) is left out,
    never the alert: Alertmanager sends what its users configured.
    """
    urls = [(text, alert.annotations.get(name, "") if name else alert.generatorURL) for text, name in _LINKS]
    return [Link(text=text, url=url) for text, url in urls if len(url) <= MAX_URL and _URL.fullmatch(url)]


_TIMESTAMP = re.compile(r"^(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$")


def normal_time(stamp: str) -> str:
    """``startsAt`` at millisecond precision.

    Alertmanager writes nanoseconds in webhooks but milliseconds in its API, so
    the same alert seen both ways must give one dedup key.
    """
    match = _TIMESTAMP.match(stamp)
    if not match:
        return stamp
    head, fraction, zone = match.groups()
    return f"{head}.{(fraction or '').ljust(3, '0')[:3]}{'Z' if zone in ('Z', '+00:00') else zone}"


def category_of(alert: Alert, label: str) -> str:
    """The alert's category: the configured label, made a valid category name."""
    raw = alert.labels.get(label) or "alertmanager"
    return _NOT_CATEGORY.sub("_", raw)[:64] or "alertmanager"


def to_event(alert: Alert, label: str) -> Event:
    """One event per alert; its firing and resolved notifications share one dedup key.

    The key is the alert's fingerprint and ``startsAt`` (a new firing of the same
    alert starts a new key); the alert's status becomes the event's, so a
    resolution follows the alert lifecycle (a reply in its message's thread).
    """
    name = alert.labels.get("alertname", "alert")
    instance = alert.labels.get("instance")
    parts = [f"[{alert.status.upper()}] {name}" + (f" on {instance}" if instance else "")]
    parts += [alert.annotations[k] for k in ("summary", "description") if alert.annotations.get(k)]
    fields = {
        k: v[:1000]
        for k, v in sorted(alert.labels.items())
        if k not in ("alertname", "instance") and k and len(k) <= 100
    }
    identity = alert.fingerprint or "|".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
    if len(identity) > 150:  # the dedup key has room for 200 characters: a long identity is hashed
        identity = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return Event(
        category=category_of(alert, label),
        text="\n".join(parts)[:3000],
        title=f"{name} {alert.status}"[:150],
        severity=_SEVERITIES.get(alert.labels.get("severity", "").lower(), "warning"),
        fields=dict(list(fields.items())[:20]),
        dedup_key=_dedup_key(identity, normal_time(alert.startsAt)),
        status="resolved" if alert.status == "resolved" else "firing",
        links=links_of(alert),
    )


def _dedup_key(identity: str, starts_at: str) -> str:
    """``am:<identity>:<startsAt>``, hashed when longer than a dedup key may be (a payload's own oddity)."""
    key = f"am:{identity}:{starts_at}"
    return key if len(key) <= 200 else "am:" + hashlib.sha256(key.encode()).hexdigest()


async def post_alertmanager(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    caller = request[CALLER]
    body = await read_json(request)
    try:
        payload = Payload.model_validate(body)
        label = gateway.settings.alertmanager_category_label
        events = [to_event(alert, label) for alert in payload.alerts]
    except ValidationError as exc:
        raise ApiError(422, "not an Alertmanager webhook payload", validation_details(exc)) from exc
    outcomes = await asyncio.gather(*(alert_outcome(gateway, e, caller) for e in events), return_exceptions=True)
    results = [
        {
            **(undecided(request, o) if isinstance(o, BaseException) else o),
            "category": e.category,
            "fingerprint": a.fingerprint,
        }
        for o, e, a in zip(outcomes, events, payload.alerts, strict=True)
    ]
    failed = [o for o in outcomes if isinstance(o, (StoreUnavailable, InDoubt))]  # undecided() raised the rest
    if failed:
        log_unavailable(failed[0])
        return unavailable(request, {"error": payload_error(results), "results": results})
    return json_response({"status": "ok", "results": results})


def undecided(request: web.Request, exc: BaseException) -> dict[str, Any]:
    """The entry of an alert the store did not decide: in doubt (with its id), or unavailable."""
    if isinstance(exc, InDoubt):
        return {"status": in_doubt(request, exc), "id": exc.id}
    if isinstance(exc, StoreUnavailable):
        return {"status": "unavailable"}
    raise exc


def payload_error(results: list[dict[str, Any]]) -> str:
    """The ``error`` of a payload's 503: ``outcome unknown`` when an alert was or may have been
    admitted, ``not replicated`` when that is the only doubt, else the plain one (nothing posts)."""
    statuses = {result["status"] for result in results}
    if statuses & ADMITTED:
        return "outcome unknown"
    return "not replicated" if "not replicated" in statuses else UNAVAILABLE


async def alert_outcome(gateway: Gateway, event: Event, caller: Caller) -> dict[str, Any]:
    """One alert's entry in the webhook answer; its source is the caller's name.

    An alert of a category ``NOTIFIER_CATEGORIES`` does not name is refused on
    its own (never admitted, counted as a 422), and so is one routed to a channel
    the caller may not post to (a 403), not by failing the whole payload: a 4xx
    would make Alertmanager report the other alerts as failed.
    """
    admission = gateway.admission
    problem = unknown_category(event.category, admission.limiter.policy)
    if problem:
        gateway.metrics.rejected.labels("422").inc()
        return {"status": "rejected", "error": problem}
    path = admission.route(event, caller.name)
    if not caller.may_post_to(path.channel):
        gateway.metrics.rejected.labels("403").inc()
        return {"status": "rejected", "error": forbidden_channel(caller, path.channel)}
    return decision_body(await admission.decide_on(event, path, caller.name))
