"""``GET /v1/stats/history``: events admitted and dropped per minute over the last hour, fleet-wide.

For the whole tree, or (``level`` and ``value``) one value of a level below the root, as
``/v1/stats`` names them in ``by_level``. The minutes come from the store's per-minute records
(``store/history.py``), oldest first; the last is the current minute so far. A minute no
replica recorded, or whose counters went back, is ``null``: unknown, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from ..store.history import History, fields_of
from .answers import ApiError, json_response
from .input import invalid
from .state import GATEWAY

HISTORY = web.AppKey("history", History)
MAX_VALUE = 500  # characters of a level value asked for (as /v1/limits/{level}/{value})
LEVEL_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"  # a level's name (config.py)
LEVEL_SCHEMA = {"type": "string", "pattern": LEVEL_PATTERN}
PROBLEM = {"$ref": "#/components/schemas/Problem"}


class MinuteCounts(BaseModel):
    """One minute: when it starts, and the events admitted and dropped in it (null: not known)."""

    at: int = Field(description="the minute's start, unix seconds")
    admitted: int | None = Field(ge=0)
    dropped: int | None = Field(ge=0)


class StatsHistory(BaseModel):
    """The last hour, minute by minute, for the whole tree or one level value."""

    level: str | None = Field(description="the level asked for; null: the whole tree")
    value: str | None
    now: float = Field(description="the store's time of the answer, unix seconds; the last minute counts up to it")
    minutes: list[MinuteCounts] = Field(description="60 minutes, oldest first, the current one last")


async def get_history(request: web.Request) -> web.StreamResponse:
    """``GET /v1/stats/history?level=&value=``: see the module's notes."""
    level, value = _asked(request)
    gateway = request.app[GATEWAY]
    if level is not None and level not in {one.name for one in gateway.admission.limiter.policy.tree[1:]}:
        raise ApiError(404, f"no level {level!r} below the root of the tree")
    await gateway.admission.limiter.flush()  # this replica's batched counts, as /v1/stats does
    series = await request.app[HISTORY].series(fields_of(level, value or ""))
    minutes = [{"at": m.at, "admitted": m.admitted, "dropped": m.dropped} for m in series.minutes]
    return json_response({"level": level, "value": value, "now": series.now_ms / 1000, "minutes": minutes})


def _asked(request: web.Request) -> tuple[str | None, str | None]:
    """``level`` and ``value``: both or neither, each once; a 422 naming the one that is wrong."""
    params = request.query
    for name in ("level", "value"):
        if len(params.getall(name, [])) > 1:
            raise invalid(name, "give it once")
    level, value = params.get("level"), params.get("value")
    if (level is None) != (value is None):
        raise invalid("value" if value is None else "level", "give level and value together, or neither")
    if level is not None and not re.fullmatch(LEVEL_PATTERN, level):
        raise invalid("level", "a level's name")
    if value is not None and not 1 <= len(value) <= MAX_VALUE:
        raise invalid("value", f"1-{MAX_VALUE} characters")
    return level, value


def paths() -> dict[str, Any]:
    """This route's part of ``/openapi.json`` (answers by reference to its models)."""
    asked = [
        {
            "name": "level",
            "in": "query",
            "description": "a level below the root",
            "schema": {"type": "string", "pattern": LEVEL_PATTERN},
        },
        {
            "name": "value",
            "in": "query",
            "description": "a value of that level",
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_VALUE},
        },
    ]
    answers = {
        "200": doc_json("per minute over the last hour", {"$ref": "#/components/schemas/StatsHistory"}),
        **{status: doc_json(why, PROBLEM) for status, why in REFUSED.items()},
    }
    summary = "Events admitted and dropped per minute over the last hour, fleet-wide"
    get = {"summary": summary, "security": [{}, {"bearer": []}], "parameters": asked, "responses": answers}
    return {"/v1/stats/history": {"get": get}}


REFUSED = {
    "401": "missing or wrong bearer token",
    "403": "the token lacks scope read",
    "404": "no such level below the root",
    "422": "level or value invalid, or one without the other",
    "503": "store unreachable",
}


def doc_json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An answer of ``/openapi.json``: JSON of ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}
