"""``GET /v1/names?ids=U1,C2``: the names of Slack users and channels, for showing beside their ids.

Names are asked of Slack once and kept for the fleet (``slack/names.py``); without a bot
token every name is ``null`` and ids are shown alone. Every id is checked against Slack's id
shapes before anything is read, and a request names at most :data:`MAX_IDS`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from ..slack.names import SLACK_ID, Names
from .answers import json_response
from .history import PROBLEM, doc_json
from .input import invalid

NAMES = web.AppKey("names", Names)
MAX_IDS = 100
ID_PATTERN = f"^{SLACK_ID.pattern}$"
IDS_PATTERN = f"^{SLACK_ID.pattern}(,{SLACK_ID.pattern}){{0,{MAX_IDS - 1}}}$"


class SlackNames(BaseModel):
    """Each id asked for, and its name (``#name`` for a channel); null when it is not known (yet)."""

    names: dict[str, str | None] = Field(description="id -> name, or null")


async def get_names(request: web.Request) -> web.StreamResponse:
    """``GET /v1/names?ids=``: ``{"names": {id: name | null}}``."""
    found = await request.app[NAMES].of(_ids(request))
    return json_response({"names": found})


def _ids(request: web.Request) -> list[str]:
    """The ids asked for: once, comma-separated, 1 to :data:`MAX_IDS`, each of a Slack id's shape; else a 422."""
    given = request.query.getall("ids", [])
    if len(given) != 1:
        raise invalid("ids", "give it once: ids separated by commas")
    ids = given[0].split(",")
    if not 1 <= len(ids) <= MAX_IDS:
        raise invalid("ids", f"1-{MAX_IDS} ids")
    wrong = next((i for i in ids if not SLACK_ID.fullmatch(i)), None)
    if wrong is not None:
        raise invalid("ids", f"not a Slack user or channel id: {wrong[:30]!r}")
    return ids


def paths() -> dict[str, Any]:
    """This route's part of ``/openapi.json``."""
    asked = [
        {
            "name": "ids",
            "in": "query",
            "required": True,
            "description": f"Slack user (U, W) and channel (C, G, D) ids, separated by commas, at most {MAX_IDS}",
            "schema": {"type": "string", "pattern": IDS_PATTERN},
        }
    ]
    refused = {"401": "missing or wrong bearer token", "403": "the token lacks scope read", "422": "ids invalid"}
    answers = {
        "200": doc_json("the name of each id", {"$ref": "#/components/schemas/SlackNames"}),
        **{status: doc_json(why, PROBLEM) for status, why in {**refused, "503": "store unreachable"}.items()},
    }
    get = {"summary": "Names of Slack users and channels", "security": [{}, {"bearer": []}], "parameters": asked}
    return {"/v1/names": {"get": {**get, "responses": answers}}}
