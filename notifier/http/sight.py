"""An event read on sight: the storm path of ``POST /v1/events``.

In a storm nearly every event is decided on this replica: a level known full, or an alert
repeat known firing. Such a decision reads only an event's facts (``models.Facts``): its
category, severity, status, fields and key. :func:`read_on_sight` reads a body of the usual
shape (its links too: real tools' alerts carry a runbook link) straight from its bytes into a
typed record in one call in C (msgspec), checking every bound ``models.Event`` checks, in half
the time of pydantic's fast path (0.65 us against 1.32 for storm.py's plain bodies; a body with
a link: see ``bench/RESULTS.md``, the ``alerts-links`` storm of ``bench/storm.py``).

Anything else gets ``None`` and is read by ``input.parse_event``, which gives every answer:
``null`` values, a key the record does not name (``source`` too), a key written twice,
a value out of bounds. So the record accepts a subset of what ``parse_event`` accepts, with
the same facts (``tests/unit/test_sight.py`` holds it to that). An event read on sight that
this replica cannot decide is read again by ``parse_event`` on its way to the store: it needs
the whole event, and the store's round trip dwarfs a second reading.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from ..models import MAX_URL, URL_PATTERN, Severity, Status
from ..settings import CATEGORY_RE
from .input import no_key_repeated

_Text = Annotated[str, msgspec.Meta(min_length=1, max_length=3000)]
_Title = Annotated[str, msgspec.Meta(max_length=150)]
_FieldName = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
_FieldValue = Annotated[str, msgspec.Meta(max_length=1000)]
_Fields = Annotated[dict[_FieldName, _FieldValue], msgspec.Meta(max_length=20)]
_Key = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
# models.Link's pattern, checked by read_on_sight: a msgspec pattern would cost as much and more
# (msgspec calls re.search). Without its anchors, for fullmatch: Python's "$" takes a final "\n".
_URL = re.compile(URL_PATTERN.removeprefix("^").removesuffix("$")).fullmatch


class SeenLink(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A link with ``models.Link``'s bounds; its url's pattern is checked by :func:`read_on_sight`."""

    text: Annotated[str, msgspec.Meta(min_length=1, max_length=75)]
    url: Annotated[str, msgspec.Meta(max_length=MAX_URL)]


class Seen(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An event of the usual shape, with ``models.Event``'s bounds (no ``null``)."""

    # Checked by read_on_sight with settings.CATEGORY_RE, once per new category. Not a msgspec
    # pattern: msgspec searches with it on every body, 0.37 us, half of all its reading.
    category: str
    text: _Text
    title: _Title | None = None
    severity: Severity = "info"
    fields: _Fields = {}
    dedup_key: _Key | None = None
    status: Status = "firing"
    links: Annotated[tuple[SeenLink, ...], msgspec.Meta(max_length=5)] = ()


_decode = msgspec.json.Decoder(Seen).decode
_valid: dict[str, None] = {}  # categories found valid: a storm's events share a few, met again and again
MAX_VALID = 10_000  # categories come from clients: then the oldest are checked again


def read_on_sight(raw: bytes) -> Seen | None:
    """``raw`` read as an event of the usual shape, else None (read it with ``input.parse_event``)."""
    try:
        seen = _decode(raw)
    except (msgspec.MsgspecError, ValueError):  # ValueError: bytes that are not UTF-8
        return None
    if seen.category not in _valid and not _valid_category(seen.category):
        return None
    # msgspec keeps the last of a key written twice, where parse_event refuses it: count the
    # keys kept against the text. A key given its default value is not counted, so the count
    # is low and the body goes to parse_event: never a repeated key read here.
    keys = 2 + len(seen.fields) + (seen.title is not None) + (seen.severity != "info") + bool(seen.fields)
    keys += (seen.dedup_key is not None) + (seen.status != "firing")
    if seen.links:
        for link in seen.links:
            if _URL(link.url) is None:
                return None
        keys += 1 + 2 * len(seen.links)  # "links", and each link's text and url
    return seen if keys == raw.count(b":") or no_key_repeated(raw, keys) else None


def _valid_category(category: str) -> bool:
    if CATEGORY_RE.fullmatch(category) is None:
        return False
    if len(_valid) >= MAX_VALID:
        del _valid[next(iter(_valid))]
    _valid[category] = None
    return True
