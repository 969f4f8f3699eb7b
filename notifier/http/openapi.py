"""``GET /openapi.json``: the API described from the same pydantic models that validate it.

Request and answer bodies come from the models (``models.Event``, ``Accepted``,
``Duplicate``, ``Dropped``, ``Problem``, the Alertmanager payload and the
answer models below), so the schema cannot drift from the validation. Only the
routing (paths, statuses, headers) is written here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from .. import __version__
from ..models import Accepted, Dropped, Duplicate, Event, Problem
from .alertmanager import Payload

REF = "#/components/schemas/{model}"
Doc = dict[str, Any]


class LevelCounts(BaseModel):
    """Drops by the level that refused them."""

    model_config = ConfigDict(extra="allow")
    global_: int = Field(alias="global", ge=0)
    category: int = Field(ge=0)


class CategoryCounts(BaseModel):
    accepted: int = Field(ge=0)
    dropped: int = Field(ge=0)


class Stats(BaseModel):
    """``GET /v1/stats``: totals shared by all replicas."""

    model_config = ConfigDict(extra="allow")
    accepted: int = Field(ge=0)
    dropped: int = Field(ge=0)
    dropped_by_limit: LevelCounts
    by_category: dict[str, CategoryCounts]


class RuleUse(BaseModel):
    """One rule of one level in ``GET /v1/limits``."""

    model_config = ConfigDict(extra="allow")
    rule: str
    limit: int
    used: int
    remaining: int
    available_in: float
    next_free_in: float


class Limits(BaseModel):
    """``GET /v1/limits``: per level and rule, how much is used."""

    model_config = ConfigDict(extra="allow")
    global_: list[RuleUse] = Field(alias="global")
    categories: dict[str, list[RuleUse]]


class AlertOutcome(BaseModel):
    """The outcome of one alert: the event answer plus which alert it was.

    ``rejected`` (with ``error``): its category is not in ``NOTIFIER_CATEGORIES``.
    """

    model_config = ConfigDict(extra="allow")
    status: Literal["accepted", "duplicate", "dropped", "rejected"]
    category: str
    fingerprint: str


class AlertmanagerAnswer(BaseModel):
    """``POST /v1/alertmanager``: one outcome per alert, in order."""

    status: Literal["ok"]
    results: list[AlertOutcome]


class Health(BaseModel):
    """``/healthz`` and ``/readyz``."""

    model_config = ConfigDict(extra="allow")
    status: str


MODELS = (Event, Accepted, Duplicate, Dropped, Problem, Payload, Stats, Limits, AlertmanagerAnswer, Health)


def _schemas() -> Doc:
    _, top = models_json_schema(
        [(m, "validation" if m in (Event, Payload) else "serialization") for m in MODELS], ref_template=REF
    )
    schemas: Doc = top["$defs"]
    return schemas


def _json(model: type[BaseModel], description: str, headers: Doc | None = None) -> Doc:
    answer: Doc = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
    }
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
REFUSED = {
    "400": _json(Problem, "not JSON (or not UTF-8, NaN, nested too deeply)"),
    "401": _json(Problem, "missing or wrong bearer token"),
    "413": _json(Problem, "body over 64 KiB"),
    "415": _json(Problem, "not application/json"),
    "422": _json(Problem, "fields invalid; details name them"),
    "503": _json(Problem, "store unreachable; nothing was counted", RETRY_AFTER),
}


def _post(model: type[BaseModel], summary: str, answers: Doc) -> Doc:
    return {
        "post": {
            "summary": summary,
            "security": [{}, {"bearer": []}],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
            },
            "responses": {**answers, **REFUSED},
        }
    }


def _get(model: type[BaseModel], summary: str, extra: Doc | None = None) -> Doc:
    return {"get": {"summary": summary, "responses": {"200": _json(model, summary), **(extra or {})}}}


@lru_cache(maxsize=1)
def spec() -> Doc:
    """The OpenAPI 3.1 document of the gateway."""
    unavailable = {"503": _json(Problem, "store unreachable", RETRY_AFTER)}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "notifier",
            "version": __version__,
            "description": "Slack notification gateway with fleet-wide rate limits.",
        },
        "paths": {
            "/v1/events": _post(
                Event,
                "Post one event",
                {
                    "202": _json(Accepted, "admitted by every level and queued for delivery"),
                    "200": _json(Duplicate, "dedup_key seen within the category's longest window"),
                    "429": _json(Dropped, "not admitted; nothing counted against any level", RETRY_AFTER),
                },
            ),
            "/v1/alertmanager": _post(
                Payload,
                "Alertmanager webhook (version 4)",
                {
                    "200": _json(AlertmanagerAnswer, "one outcome per alert, even when some are dropped"),
                },
            ),
            "/v1/stats": _get(Stats, "Totals shared by all replicas", unavailable),
            "/v1/limits": _get(Limits, "Use of every level and rule", unavailable),
            "/healthz": _get(Health, "The process serves"),
            "/readyz": _get(Health, "The store answers", {"503": _json(Problem, "store unreachable")}),
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "required on POST when NOTIFIER_API_TOKENS is set",
                }
            },
        },
    }


async def openapi_handler(request: web.Request) -> web.Response:
    """Serve the OpenAPI document."""
    return web.json_response(spec())
