"""Open alerts: ``GET /v1/alerts``, and acknowledging one (``POST``/``DELETE /v1/alerts/{dedup_key}/ack``).

``admit.lua`` keeps an index of the open alerts in the store (record key -> first
seen, and dedup_key -> record key); ``timers.lua`` takes out the ones whose window
ended, so the index is bounded by what the limits admitted. A page reads at most
``PAGE`` alerts whatever a client sends; the cursor is opaque (where the last page
ended: its first-seen time and record). The list holds event text, so with
tokens configured it needs the scope ``read``; acknowledging needs ``ack``. Each acknowledgement
says where it came from: ``slack`` (a click, whose ``<@U...>`` Slack vouches for) or the face of
an HTTP call (``api``, ``console``, ``cli``), whose ``by`` is only what the caller wrote.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ..delivery.edits import Record
from ..store.audit import Change
from ..store.client import as_text
from ..store.keys import key_digest
from .answers import ApiError, json_response
from .auth import CALLER
from .input import read_json, validated
from .state import GATEWAY, Gateway

PAGE = 500  # alerts per page, at most
TIES = 512  # alerts that may share one first-seen time (one admission call decides up to 256)
MAX_KEY = 200  # characters of a dedup_key
SLACK: Final = "slack"
API: Final = "api"


class AckRequest(BaseModel):
    """The optional body of ``POST /v1/alerts/{dedup_key}/ack``."""

    model_config = ConfigDict(extra="ignore")

    by: str | None = Field(None, min_length=1, max_length=64, description="who acknowledges; else the author")
    via: Literal["api", "console", "cli"] = Field(API, description="the face it was made from (never slack)")


async def acknowledge(gateway: Gateway, record: str, by: str, source: str, author: str) -> dict[str, Any] | None:
    """Acknowledge (``by`` set) or unacknowledge (``by`` empty) the alert at ``record``; None when not open.

    Recorded in the audit log here, for every face, as made by ``author`` (a token's name, or
    ``slack:<user id>``); ``by`` is what the alert shows.
    """
    keys, store = gateway.keys, gateway.store
    args = ["ack", by, source] if by else ["unack"]
    reply = await store.run(gateway.scripts.ack, [record, keys.edits], args)
    if not int(reply[0]):
        return None
    who, at, via = as_text(reply[1]), as_text(reply[2]), as_text(reply[3])
    was_by, was_via = as_text(reply[4]), as_text(reply[5])
    before = {"by": was_by, "via": was_via} if was_by else None
    after = {"by": who, "via": via} if who else None
    target = await _alert_target(gateway, record)
    await gateway.audit.record(Change("ack" if by else "unack", target, author, source, before, after))
    return {
        "acknowledged_by": who or None,
        "acknowledged_at": round(int(at) / 1e6, 3) if at else None,
        "acknowledged_via": via or None,
    }


async def _alert_target(gateway: Gateway, record: str) -> dict[str, str | None]:
    """An alert as the audit log names it: its dedup_key and category (never its text)."""
    raw = await gateway.store.call(gateway.store.redis.hget, record, "e")
    entry = Record(record, {"e": as_text(raw)}).event_entry if raw else None
    key = entry.event.get("dedup_key") if entry else None
    return {"dedup_key": str(key) if key else None, "category": entry.category if entry else None}


async def post_ack(request: web.Request) -> web.StreamResponse:
    """``POST /v1/alerts/{dedup_key}/ack``, optionally with ``{"by": "..."}``."""
    gateway = request.app[GATEWAY]
    key = _dedup_key(request)
    body = await _ack_request(request)
    return await _acked(gateway, key, body.by or request[CALLER].name, request[CALLER].name, body.via)


async def delete_ack(request: web.Request) -> web.StreamResponse:
    """``DELETE /v1/alerts/{dedup_key}/ack``."""
    gateway = request.app[GATEWAY]
    return await _acked(gateway, _dedup_key(request), "", request[CALLER].name)


async def _acked(gateway: Gateway, key: str, by: str, author: str, via: str = API) -> web.Response:
    record = await gateway.store.call(gateway.store.redis.hget, gateway.keys.alerts_index, key_digest(key))
    answer = await acknowledge(gateway, as_text(record), by, via, author) if record else None
    if answer is None:
        raise ApiError(404, "no open alert has this dedup_key")
    return json_response({"dedup_key": key, **answer})


def _dedup_key(request: web.Request) -> str:
    key = request.match_info["dedup_key"]
    if not 1 <= len(key) <= MAX_KEY:
        raise ApiError(422, "invalid fields: dedup_key", [{"field": "dedup_key", "message": f"1-{MAX_KEY} characters"}])
    return key


async def _ack_request(request: web.Request) -> AckRequest:
    if not request.body_exists:
        return AckRequest(by=None, via=API)
    return validated(AckRequest, await read_json(request))


# ---------------------------------------------------------------- the list


async def get_alerts(request: web.Request) -> web.StreamResponse:
    """``GET /v1/alerts[?cursor=C]``: open alerts, newest first by first seen, ``PAGE`` at most."""
    gateway = request.app[GATEWAY]
    after = _read_cursor(request.query.get("cursor"), gateway)
    candidates, full = await _candidates(gateway, after)
    alerts, last, cut = await _page(gateway, candidates)
    more = cut or full
    return json_response({"alerts": alerts, "cursor": _cursor(last, gateway) if more and last else None})


async def _candidates(gateway: Gateway, after: tuple[int, str] | None) -> tuple[list[tuple[str, int]], bool]:
    """Record keys from the index after the cursor, newest first: a page's worth, and some to spare;
    and whether the index may hold more."""
    redis = gateway.store.redis
    top = "+inf" if after is None else after[0]
    raw = await gateway.store.call(
        redis.zrevrangebyscore, gateway.keys.alerts_open, top, "-inf", start=0, num=PAGE + TIES, withscores=True
    )
    found = [(as_text(member), int(score)) for member, score in raw]
    if after is not None:  # members of one score come in reverse order: those up to the cursor were shown
        found = [(m, s) for m, s in found if s != after[0] or m < after[1]]
    return found, len(raw) == PAGE + TIES


async def _page(
    gateway: Gateway, candidates: list[tuple[str, int]]
) -> tuple[list[dict[str, Any]], tuple[int, str] | None, bool]:
    """The open alerts among ``candidates`` (a page at most), where the page ended, and whether it
    ended before the candidates did."""
    alerts: list[dict[str, Any]] = []
    last: tuple[int, str] | None = None
    for start in range(0, len(candidates), 100):
        chunk = candidates[start : start + 100]
        pipe = gateway.store.redis.pipeline(transaction=False)
        for member, _ in chunk:
            pipe.hgetall(member)
        for (member, score), raw in zip(chunk, await gateway.store.call(pipe.execute), strict=True):
            if len(alerts) == PAGE:
                return alerts, last, True
            last = (score, member)
            view = alert_view(Record(member, {as_text(k): as_text(v) for k, v in (raw or {}).items()}))
            if view is not None:
                alerts.append(view)
    return alerts, last, False


def alert_view(record: Record) -> dict[str, Any] | None:
    """One open alert as ``GET /v1/alerts`` shows it; None when the record is no open alert."""
    entry = record.event_entry
    if entry is None or not record.open:
        return None
    event, fields, posted = entry.event, record.fields, record.posted
    at = record.acknowledged_at_us
    return {
        "dedup_key": event.get("dedup_key"),
        "id": fields.get("id"),
        "category": entry.category,
        "severity": event.get("severity", "info"),
        "title": event.get("title"),
        "text": event.get("text"),
        "first_seen": round(int(fields.get("first") or fields.get("last") or 0) / 1e6, 3),
        "last_seen": round(int(fields.get("last") or 0) / 1e6, 3),
        "seen": int(fields.get("n", 1)),
        "reopened": int(fields.get("reopened", 0)),
        "acknowledged_by": record.acknowledged_by,
        "acknowledged_at": None if at is None else round(at / 1e6, 3),
        "acknowledged_via": record.acknowledged_via,
        "escalations": int(fields.get("escn", 0)),
        "held": bool(fields.get("held")),  # its post waits for the hand-over of a window
        "channel": posted.channel_id if posted else None,
        "ts": posted.ts if posted and posted.ts else None,
    }


def _cursor(last: tuple[int, str], gateway: Gateway) -> str:
    score, member = last
    raw = json.dumps([score, member.removeprefix(gateway.keys.base)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_cursor(text: str | None, gateway: Gateway) -> tuple[int, str] | None:
    if text is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        score, member = json.loads(raw)
        if type(score) is not int or not isinstance(member, str) or not member.startswith("alert:"):
            raise ValueError("not a cursor of this gateway")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad cursor: give the cursor of the previous page as it was") from exc
    return score, gateway.keys.base + member
