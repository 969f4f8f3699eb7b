"""Reading requests: the body's type and size, strict JSON, and the event in it.

Every body is checked before anything is counted (after the caller, ``auth.py``):
415 unless it is ``application/json``, 413 over 64 KiB (aiohttp stops reading it), 400 unless it is
strict UTF-8 JSON, 422 for anything else wrong, with ``details`` naming each
field. A storm's events are decided from what ``sight.py`` reads of them; any other
valid event takes a fast path here: pydantic parses and validates it straight from
the bytes. Anything else takes the strict path, which gives the precise answer.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from ..models import Event
from ..policy import GLOBAL, Policy
from .answers import ApiError

MAX_DEPTH = 64
SOURCE = "source"  # a key no body may have: the token names the source (the fast path sends it here)
M = TypeVar("M", bound=BaseModel)


async def read_json(request: web.Request) -> object:
    """The request body as JSON, refusing wrong types and oversized bodies."""
    check_post(request)
    return decode_json(await request.read())  # client_max_size stops any body past 64 KiB (413)


def check_post(request: web.Request) -> None:
    """Refuse a body that is not ``application/json`` (415)."""
    # The media type before any parameter (e.g. charset), read directly: aiohttp's
    # content_type runs a full header parser, a visible cost on every storm request.
    content_type = request.headers.get("Content-Type", "")
    if content_type != "application/json" and _media_type(content_type) != "application/json":
        raise ApiError(415, "Content-Type must be application/json")


def _media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # Two values for one key are read differently by different parsers: refuse them.
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def decode_json(raw: bytes) -> object:
    """Strict JSON: UTF-8, no NaN/Infinity, finite numbers, no duplicate keys, bounded nesting.

    The fast path is orjson, which already refuses NaN, Infinity, out-of-range
    numbers and bad UTF-8 but keeps the last of duplicate keys; when a key may
    have been repeated (see :func:`no_key_repeated`), the strict stdlib path
    decides, which also gives the precise error.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _decode_strictly(raw)
    keys = _count_keys(value, 0) if type(value) in (dict, list) else 0
    if keys is None or not no_key_repeated(raw, keys):
        return _decode_strictly(raw)
    return value


def no_key_repeated(raw: bytes, keys: int) -> bool:
    """True when ``keys``, the number of keys a parser kept from ``raw``, proves none was repeated.

    Every key in the text ends in ``"``, blanks and ``:``, and strings may hold
    more such spots, so the count of those spots (or of all colons, a cheaper
    upper bound) is at least the number of keys written. When it equals the
    number of keys kept, none was repeated. False may also mean "cannot tell".

    The spots are counted by the byte before each colon (a quote, or one of the
    four JSON blanks: the blanks before it go back to the key's quote), with
    ``bytes.count``: a colon in a string (a URL, a time) then costs 0.2 us, not the
    1.1 us of a regular expression (measured on a body with two links).
    """
    colons = raw.count(b":")
    if keys == colons:
        return True
    # No key's colon is followed by "/" (no JSON value starts so): a URL's "://" is in a string.
    # Two counts for a body with links, where the five below cost twice as much.
    if keys == colons - raw.count(b":/"):
        return True
    ends = raw.count(b'":') + raw.count(b" :") + raw.count(b"\t:") + raw.count(b"\n:") + raw.count(b"\r:")
    return keys == ends


def _count_keys(value: Any, depth: int) -> int | None:
    """Keys in all objects of ``value``; None when nested deeper than ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        return None
    count = len(value) if type(value) is dict else 0
    for item in value.values() if type(value) is dict else value:
        if type(item) is dict or type(item) is list:
            inner = _count_keys(item, depth + 1)
            if inner is None:
                return None
            count += inner
    return count


def _decode_strictly(raw: bytes) -> object:
    try:
        return json.loads(
            raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite
        )
    except _DuplicateKey as exc:
        raise ApiError(
            422, f"invalid fields: {exc.key} (duplicate key)", [{"field": exc.key, "message": "duplicate key"}]
        ) from exc
    except RecursionError as exc:
        raise ApiError(400, "body is not acceptable JSON: nested too deeply") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"body is not valid UTF-8 JSON: {exc}") from exc


def validation_details(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": ".".join(map(str, e["loc"])) or "body", "message": e["msg"]} for e in exc.errors()]


def parse_event(raw: bytes, policy: Policy) -> Event:
    """Decode and validate a body into an :class:`Event`, or raise a 4xx naming the problem."""
    event = _plain_event(raw)
    if event is None:
        event = _validated_event(decode_json(raw))
    problem = unknown_category(event.category, policy)
    if problem:
        raise ApiError(422, "invalid fields: category", [{"field": "category", "message": problem}])
    return event


def unknown_category(category: str, policy: Policy) -> str | None:
    """What is wrong with ``category``: the global level's name, or one ``NOTIFIER_CATEGORIES`` does not name."""
    if category == GLOBAL:
        return f"{GLOBAL!r} is the name of the global level, not a category"
    if category == policy.root.name:
        return f"{category!r} is the name of the root level, not a category"
    if policy.allows(category):
        return None
    return f"unknown category {category!r}"


# The model's own validator: ``Event.model_validate_json`` wraps it in a Python call that
# costs a quarter of its time (0.3 of 1.2 us, measured), on every request of a storm.
_validate_json = Event.__pydantic_validator__.validate_json


def _plain_event(raw: bytes) -> Event | None:
    """The event, if ``raw`` is a valid one with no unknown and no repeated key; else None.

    The fast path (a storm's events are read by ``sight.py`` first): pydantic parses
    and validates in one step. Every key it kept is counted against the text
    (:func:`no_key_repeated`); an unknown key, a repeated one or any error sends the
    body down the strict path, which gives the precise answer.
    """
    try:
        event = _validate_json(raw)
    except ValidationError:
        return None
    # pydantic's own record of the keys given (``model_fields_set`` is a property around it)
    keys = len(event.__pydantic_fields_set__) + len(event.fields) + 2 * len(event.links)  # a link: text and url
    # Most bodies have no colon but those after keys: one count, and no call, proves it.
    return event if keys == raw.count(b":") or no_key_repeated(raw, keys) else None


def _validated_event(body: object) -> Event:
    if isinstance(body, dict) and SOURCE in body:
        raise invalid(SOURCE, "the source of an event is the name of the token that sends it: leave it out")
    return validated(Event, body)


def validated(model: type[M], body: object) -> M:
    """``body`` (decoded JSON) as ``model``, or a 422 naming each field that is wrong."""
    if not isinstance(body, dict):
        raise ApiError(422, "body must be a JSON object", [{"field": "body", "message": "not an object"}])
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        details = validation_details(exc)
        raise ApiError(422, "invalid fields: " + ", ".join(d["field"] for d in details), details) from exc


def invalid(field: str, message: str) -> ApiError:
    """A 422 naming one field and what is wrong with it."""
    return ApiError(422, f"invalid fields: {field}", [{"field": field, "message": message}])
