"""``GET /v1/audit``: the audit log, newest first, filtered and a page at a time.

``since`` and ``until`` (unix seconds or ISO 8601 with an offset) bound when, inclusive;
``action`` and ``by`` pick entries; ``limit`` (default 100, at most 1,000) sizes the page and
``before`` (an entry id, the previous page's ``next``) goes on to older entries. Entries are
written where each change is applied (``store/audit.py``); this only reads them.
"""

from __future__ import annotations

import re

from aiohttp import web

from ..store.audit import Query
from .answers import ApiError, json_response
from .input import invalid
from .state import GATEWAY
from .windows import instant

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_FILTER = 200  # characters of an action or an author asked for
ENTRY_ID = r"^[0-9]{1,19}-[0-9]{1,19}$"  # a stream entry id (ms-seq), kept below 2**64 by its length
_ENTRY_ID = re.compile(ENTRY_ID)
_ASKED = {
    "since": "from this time on (unix seconds or ISO 8601 with an offset)",
    "until": "up to this time",
    "action": "only this action, e.g. override.put",
    "by": "only this author: a token's name, or slack:<user id>",
    "limit": f"entries per page, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT})",
    "before": "older than this entry id (the previous page's next)",
}
KNOWN = frozenset(_ASKED)
_TIME = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e11}  # ISO 8601 is read too
_SCHEMAS = {
    "since": _TIME,
    "until": _TIME,
    "action": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER},
    "by": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "before": {"type": "string", "pattern": ENTRY_ID},
}
# The query's parameters as /openapi.json describes them, beside the code that reads them.
PARAMETERS = [
    {"name": name, "in": "query", "description": description, "schema": _SCHEMAS[name]}
    for name, description in _ASKED.items()
]


async def get_audit(request: web.Request) -> web.StreamResponse:
    """``GET /v1/audit?since=&until=&action=&by=&limit=&before=``: ``{"entries": [...], "next": id | null}``."""
    page = await request.app[GATEWAY].audit.page(_query(request))
    return json_response({"entries": page.entries, "next": page.next})


def _query(request: web.Request) -> Query:
    """The query's parameters, checked: a bad one is a 400 or 422 naming it, and nothing is read."""
    params = request.query
    for name in KNOWN:
        if len(params.getall(name, [])) > 1:
            raise invalid(name, "give it once")
    before = params.get("before")
    if before is not None and not _ENTRY_ID.fullmatch(before):
        raise ApiError(400, "bad before: give an entry's id (or the previous page's next) as it was")
    return Query(
        since_ms=_ms("since", params.get("since")),
        until_ms=_ms("until", params.get("until")),
        action=_filter("action", params.get("action")),
        by=_filter("by", params.get("by")),
        limit=_limit(params.get("limit")),
        before=before,
    )


def _ms(field: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value: float | str = float(text)
    except ValueError:
        value = text
    return instant(field, value) // 1000


def _filter(field: str, text: str | None) -> str | None:
    if text is not None and not 1 <= len(text) <= MAX_FILTER:
        raise invalid(field, f"1-{MAX_FILTER} characters")
    return text


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise invalid("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(text)
