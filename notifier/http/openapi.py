"""``GET /openapi.json``: every route, described from the same pydantic models that validate it.

Request and answer bodies come from models (``models.Event`` and the answers,
the Alertmanager payload, ``limits.OverrideRequest`` and the answer models
below), so the schema cannot drift from the validation. Only the routing
(paths, statuses, headers) is written here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
from ..models import Accepted, Dropped, Duplicate, Event, Problem, Reopened, Resolved
from . import history, names
from .alertmanager import Payload
from .alerts import AckRequest
from .audit_log import PARAMETERS
from .limits import OverrideRequest
from .schemas import (
    AckAnswer,
    ActionAnswer,
    AlertmanagerAnswer,
    AlertmanagerUndecided,
    AuditPage,
    DeadLetters,
    Health,
    Limits,
    OpenAlerts,
    OverrideAnswer,
    Reloaded,
    ReloadRequest,
    Requeued,
    RequeueRequest,
    Stats,
    TokenAnswer,
    Window,
    WindowEnded,
    Windows,
)
from .slack_compat.openapi import front_door_paths
from .windows import NAME_PATTERN, WindowRequest

REF = "#/components/schemas/{model}"
Doc = dict[str, Any]

REQUESTS = (Event, Payload, OverrideRequest, RequeueRequest, AckRequest, WindowRequest, ReloadRequest)
ANSWERS = (
    Accepted,
    Resolved,
    Reopened,
    OpenAlerts,
    AckAnswer,
    Duplicate,
    Dropped,
    Problem,
    Stats,
    Limits,
    OverrideAnswer,
    AlertmanagerAnswer,
    AlertmanagerUndecided,
    DeadLetters,
    Requeued,
    ActionAnswer,
    Window,
    WindowEnded,
    Windows,
    TokenAnswer,
    Health,
    AuditPage,
    Reloaded,
    history.StatsHistory,
    names.SlackNames,
)


def _schemas() -> Doc:
    models = [(m, "validation") for m in REQUESTS] + [(m, "serialization") for m in ANSWERS]
    _, top = models_json_schema(models, ref_template=REF)  # type: ignore[arg-type]
    schemas: Doc = top["$defs"]
    return schemas


def _ref(*models: type[BaseModel]) -> Doc:
    refs = [{"$ref": REF.format(model=m.__name__)} for m in models]
    return refs[0] if len(refs) == 1 else {"oneOf": refs}


def _json(description: str, *models: type[BaseModel], headers: Doc | None = None) -> Doc:
    answer: Doc = {"description": description, "content": {"application/json": {"schema": _ref(*models)}}}
    if headers:
        answer["headers"] = headers
    return answer


RETRY_AFTER = {
    "Retry-After": {
        "description": "whole seconds to wait, rounded up",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}
UNAVAILABLE = {
    "503": _json(
        "store unreachable; nothing was counted and the event is never delivered. Except, with its id: "
        "{error: 'not replicated', id}, fewer than NOTIFIER_REDIS_MIN_REPLICAS replicas acknowledged in time; "
        "{error: 'outcome unknown', id}, the admission reached the store and its answer did not come in time. "
        "Those events may be delivered: send them again with the same dedup_key",
        Problem,
        headers=RETRY_AFTER,
    )
}
REFUSED = {
    "400": _json("not JSON (or not UTF-8, NaN, nested too deeply)", Problem),
    "401": _json("missing or wrong bearer token", Problem),
    "403": _json("the token lacks the route's scope (or may not post to the event's channel)", Problem),
    "413": _json("body over 64 KiB", Problem),
    "415": _json("not application/json", Problem),
    "422": _json("fields invalid; details name them", Problem),
    **UNAVAILABLE,
}
TOKEN: list[Doc] = [{}, {"bearer": []}]  # open unless tokens are configured (see auth.ROUTES for the scopes)


def _body(model: type[BaseModel], required: bool = True) -> Doc:
    return {"required": required, "content": {"application/json": {"schema": _ref(model)}}}


def _post(model: type[BaseModel], summary: str, answers: Doc, required: bool = True) -> Doc:
    return {
        "summary": summary,
        "security": TOKEN,
        "requestBody": _body(model, required),
        "responses": {**answers, **{status: doc for status, doc in REFUSED.items() if status not in answers}},
    }


def _get(model: type[BaseModel], summary: str, extra: Doc | None = None, content: bool = False) -> Doc:
    """A read; ``content``: it shows event content, so it needs the token (counts stay open)."""
    doc: Doc = {"summary": summary, "responses": {"200": _json(summary, model), **(extra or {})}}
    if content:
        doc["security"] = TOKEN
        doc["responses"]["401"] = REFUSED["401"]
        doc["responses"]["403"] = REFUSED["403"]
    return {"get": doc}


def _limits_paths() -> Doc:
    level = {
        "name": "level",
        "in": "path",
        "required": True,
        "description": "with a value: a level's name; alone: the root's name, or a category",
        "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_.:\-]{1,64}$"},
    }
    value = {
        "name": "value",
        "in": "path",
        "required": True,
        "description": "a value of the level (URL-encoded: #incidents is %23incidents; the request line of "
        "an HTTP server holds at most 8 KiB, so a value of 500 characters at most)",
        "schema": {"type": "string", "minLength": 1, "maxLength": 500},
    }
    return {
        "/v1/limits": _get(Limits, "Use of every level, value and rule, and the overrides in force", UNAVAILABLE),
        "/v1/limits/{level}": _override_ops([level], "the root's, or a category's"),
        "/v1/limits/{level}/{value}": _override_ops([level, value], "one value of a level's"),
    }


def _override_ops(parameters: list[Doc], what: str) -> Doc:
    changed = {"200": _json("the rules now in force", OverrideAnswer)}
    return {
        "parameters": parameters,
        "put": _post(OverrideRequest, f"Override {what} rules for the whole fleet", changed),
        "delete": {
            "summary": f"Remove the override of {what} rules",
            "security": TOKEN,
            "responses": {
                **changed,
                "404": _json("no override is in force", Problem),
                "401": REFUSED["401"],
                "403": REFUSED["403"],
                "422": REFUSED["422"],
                **UNAVAILABLE,
            },
        },
    }


def _event_paths() -> Doc:
    return {
        "/v1/events": {
            "post": _post(
                Event,
                "Post one event",
                {
                    "202": _json(
                        "admitted and queued, the resolution of an admitted alert, or a resolved alert firing again",
                        Accepted,
                        Resolved,
                        Reopened,
                    ),
                    "200": _json("its dedup_key (same status) was admitted within the category's window", Duplicate),
                    "429": _json("not admitted; nothing counted against any level", Dropped, headers=RETRY_AFTER),
                },
            )
        },
        "/v1/alertmanager": {
            "post": _post(
                Payload,
                "Alertmanager webhook (version 4)",
                {
                    "200": _json("one outcome per alert, even when some are dropped", AlertmanagerAnswer),
                    "503": _json(
                        "the store did not decide every alert; the outcome of each",
                        AlertmanagerUndecided,
                        headers=RETRY_AFTER,
                    ),
                },
            )
        },
        "/v1/slack/actions": {
            "post": {
                "summary": "Slack interactivity: the mute and unmute buttons (signed by Slack)",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {"payload": {"type": "string"}},
                                "required": ["payload"],
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json("applied", ActionAnswer),
                    "400": _json("unreadable", Problem),
                    "401": _json("bad or stale signature", Problem),
                    "404": _json("Slack actions are not configured", Problem),
                    **UNAVAILABLE,
                },
            }
        },
    }


def _alert_paths() -> Doc:
    key = [{"name": "dedup_key", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}]
    cursor = [{"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}}]
    acked = {
        "200": _json("the acknowledgement now", AckAnswer),
        "404": _json("no open alert has this dedup_key", Problem),
    }
    return {
        "/v1/alerts": {
            "get": {
                "summary": "Open alerts, newest first, a page at a time",
                "security": TOKEN,
                "parameters": cursor,
                "responses": {
                    "200": _json("a page of open alerts", OpenAlerts),
                    "400": _json("not a cursor of this gateway", Problem),
                    "401": REFUSED["401"],
                    "403": REFUSED["403"],
                    **UNAVAILABLE,
                },
            }
        },
        "/v1/alerts/{dedup_key}/ack": {
            "parameters": key,
            # Its body may be left out with tokens configured; {} always does (open mode needs JSON on a POST).
            "post": _post(AckRequest, "Acknowledge an open alert", acked),
            "delete": {
                "summary": "Lift an open alert's acknowledgement",
                "security": TOKEN,
                "responses": {
                    **acked,
                    "401": REFUSED["401"],
                    "403": REFUSED["403"],
                    "422": REFUSED["422"],
                    **UNAVAILABLE,
                },
            },
        },
    }


def _window_paths() -> Doc:
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string", "pattern": NAME_PATTERN}}]
    return {
        "/v1/windows": _get(Windows, "Maintenance windows not yet ended, and quiet hours", UNAVAILABLE),
        "/v1/windows/{name}": {
            "parameters": name,
            "put": _post(WindowRequest, "Open or change a maintenance window", {"200": _json("the window", Window)}),
            "delete": {
                "summary": "End a maintenance window now",
                "security": TOKEN,
                "responses": {
                    "200": _json("when it ended", WindowEnded),
                    "404": _json("no window of this name is open", Problem),
                    "401": REFUSED["401"],
                    "403": REFUSED["403"],
                    "422": REFUSED["422"],
                    **UNAVAILABLE,
                },
            },
        },
    }


def _audit_paths() -> Doc:
    answers = {"200": _json("a page of entries", AuditPage), "400": _json("before is not an entry id", Problem)}
    answers.update((status, REFUSED[status]) for status in ("401", "403", "422", "503"))
    summary = "The audit log: every change, who made it, newest first"
    get = {"summary": summary, "security": TOKEN, "parameters": PARAMETERS, "responses": answers}
    return {"/v1/audit": {"get": get}}


def _reload_paths() -> Doc:
    problems = _json("the file has problems (in details, as check-config prints them); nothing changed", Problem)
    answers = {"200": _json("the configuration file, read and in force", Reloaded), "422": problems}
    summary = "Read the configuration file again, without a restart (this replica)"
    return {"/v1/reload": {"post": _post(ReloadRequest, summary, answers, required=False)}}


def _ops_paths() -> Doc:
    text = {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}
    return {
        "/v1/stats": _get(Stats, "Totals shared by all replicas", UNAVAILABLE),
        "/v1/dead": _get(DeadLetters, "Dead letters and delivery counters", UNAVAILABLE, content=True),
        "/v1/dead/requeue": {
            "post": _post(
                RequeueRequest,
                "Move dead letters back into the outbox",
                {"200": _json("requeued", Requeued)},
            )
        },
        "/healthz": _get(Health, "The process serves"),
        "/readyz": _get(Health, "The store answers", {"503": _json("store unreachable", Problem)}),
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": text}}},
        "/v1/token": {
            "get": {
                "summary": "Who the given token is, and what it may do",
                "security": TOKEN,
                "responses": {"200": _json("the token's name and scopes", TokenAnswer), "401": REFUSED["401"]},
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }


@lru_cache(maxsize=1)
def spec() -> Doc:
    """The OpenAPI 3.1 document of the gateway (the front doors' part from ``slack_compat.openapi``)."""
    paths = {**_event_paths(), **_limits_paths(), **_alert_paths(), **_window_paths(), **_audit_paths()}
    paths.update({**_ops_paths(), **history.paths(), **names.paths(), **_reload_paths()})
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "notifier",
            "version": __version__,
            "description": "Slack notification gateway with fleet-wide rate limits.",
        },
        "paths": {**paths, **front_door_paths()},
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "required on changes and event content when tokens are configured, "
                    "with the route's scope (send, read, ack or admin)",
                }
            },
        },
    }


async def openapi_handler(request: web.Request) -> web.StreamResponse:
    """Serve the OpenAPI document."""
    return web.json_response(spec())
