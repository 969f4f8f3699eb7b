"""``/v1/windows``: maintenance windows over HTTP, and the quiet hours in force or next.

``PUT /v1/windows/{name}`` opens or changes a window (``start`` defaults to now;
``end`` after it, or ``for`` a duration; at least one category or channel), ``DELETE`` ends it now
(``404`` when none is open), ``GET /v1/windows`` lists the maintenance windows
not yet ended and the quiet hours, each with its start and end (in force: its
own; else its next). Times answer in unix seconds with a millisecond fraction;
requests may give unix seconds or ISO 8601 with an offset. Bad input is ``422``
and changes nothing. Like overrides, windows use the store's clock and are in
force on every replica within a second (they share the overrides' version).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from ..rules import parse_duration_ms
from ..settings import CATEGORY_PATTERN
from ..windows import US, MaintenanceWindow, current_or_next
from .answers import ApiError, json_response
from .auth import CALLER
from .input import invalid, read_json, validated
from .state import GATEWAY, Gateway

NAME_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"
_NAME = re.compile(NAME_PATTERN)
Category = Annotated[str, Field(pattern=CATEGORY_PATTERN)]
Channel = Annotated[str, Field(min_length=1, max_length=80)]
Instant = StrictInt | StrictFloat | StrictStr  # unix seconds, or ISO 8601 with an offset


class WindowRequest(BaseModel):
    """The body of ``PUT /v1/windows/{name}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: Instant | None = Field(None, description="unix seconds or ISO 8601; default: now")
    end: Instant | None = Field(None, description="unix seconds or ISO 8601, after start")
    for_: str | None = Field(None, alias="for", description="instead of end: how long from start, e.g. 2h")
    categories: list[Category] = Field(default_factory=list, max_length=100)
    channels: list[Channel] = Field(default_factory=list, max_length=100)
    note: str = Field("", max_length=1000)
    via: Literal["api", "console", "cli"] = Field("api", description="the face it was made from, for the audit log")


async def put_window(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    who = request[CALLER].name
    name = _name(request)
    body = validated(WindowRequest, await read_json(request))
    start_us = 0 if body.start is None else instant("start", body.start)
    end_us, for_us = _end(body)
    if not body.categories and not body.channels:
        raise invalid("categories", "name at least one category or channel")
    unknown = [c for c in body.categories if not gateway.admission.limiter.policy.allows(c)]
    if unknown:
        raise invalid("categories", f"unknown categories {', '.join(map(repr, unknown))}")
    if start_us and end_us and end_us <= start_us:
        raise invalid("end", "must be after start")
    asked = MaintenanceWindow(name, start_us, end_us, tuple(body.categories), tuple(body.channels), body.note, who)
    try:
        window = await gateway.overrides.put_window(asked, for_us, body.via)
    except ValueError as exc:  # the store's clock says the end has passed
        raise invalid("end", str(exc)) from exc
    return json_response(window_view(window, await gateway.store.server_time_us(gateway.keys.windows)))


async def delete_window(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    who = request[CALLER].name
    name = _name(request)
    ended = await gateway.overrides.end_window(name, who)
    if ended is None:
        raise ApiError(404, f"no maintenance window {name} is open")
    return json_response({"name": name, "end": round(ended / US, 3)})


async def get_windows(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    now_us = await gateway.store.server_time_us(gateway.keys.windows)
    return json_response(windows_view(gateway, now_us))


def windows_view(gateway: Gateway, now_us: int) -> dict[str, Any]:
    """Maintenance windows not yet ended (newest policy snapshot), and quiet hours per channel."""
    policy = gateway.admission.limiter.policy
    maintenance = sorted(policy.maintenance.values(), key=lambda w: (w.start_us, w.name))
    quiet = []
    for channel, windows in sorted(policy.quiet.items()):
        span = current_or_next(windows, now_us)
        quiet.append(
            {
                "channel": channel,
                "windows": "; ".join(w.text for w in windows),
                "start": None if span is None else round(span.start_us / US, 3),
                "end": None if span is None else round(span.end_us / US, 3),
                "in_force": span is not None and span.start_us <= now_us,
            }
        )
    return {"maintenance": [window_view(w, now_us) for w in maintenance if w.end_us > now_us], "quiet_hours": quiet}


def window_view(window: MaintenanceWindow, now_us: int) -> dict[str, Any]:
    return {
        "name": window.name,
        "start": round(window.start_us / US, 3),
        "end": round(window.end_us / US, 3),
        "categories": list(window.categories),
        "channels": list(window.channels),
        "note": window.note,
        "by": window.by,
        "in_force": window.start_us <= now_us < window.end_us,
    }


def _name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not _NAME.fullmatch(name):
        raise invalid("name", "must be 1-64 of A-Z a-z 0-9 _ . : -")
    return name


def _end(body: WindowRequest) -> tuple[int, int]:
    """``end`` as an instant (us), or 0 and the length ``for`` gives (us): exactly one of them."""
    if (body.end is None) == (body.for_ is None):
        raise invalid("end", "give end or for (how long from start), not both")
    if body.end is not None:
        return instant("end", body.end), 0
    try:
        length_ms = parse_duration_ms(str(body.for_))
    except ValueError as exc:
        raise invalid("for", str(exc)) from exc
    if length_ms < 1:
        raise invalid("for", "must be a positive duration, e.g. 2h")
    return 0, length_ms * 1000


def instant(field: str, value: float | str) -> int:
    """Unix seconds or ISO 8601 (with an offset) as microseconds."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as exc:
            raise invalid(field, "must be unix seconds or ISO 8601, e.g. 2026-11-24T22:00:00Z") from exc
        if moment.tzinfo is None:
            raise invalid(field, "ISO 8601 needs an offset (Z, +01:00, ...): a local time is ambiguous")
        seconds = moment.timestamp()
    else:
        seconds = float(value)
    if not 0 < seconds < 1e11:
        raise invalid(field, "must be a time between 1970 and the year 5138")
    return round(seconds * US)
