"""Records the gateway passes around: the event a service posts, the decision on it, the answers."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .settings import CATEGORY_PATTERN

ANONYMOUS = "anonymous"  # the source of every event when no tokens are configured
Severity = Literal["info", "warning", "error", "critical"]
Status = Literal["firing", "resolved"]
SEVERITIES: tuple[str, ...] = Severity.__args__  # type: ignore[attr-defined]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]
FieldName = Annotated[str, Field(min_length=1, max_length=100)]
FieldValue = Annotated[str, Field(max_length=1000)]
# An absolute http(s) URL of printable ASCII with a host: what Slack takes as a button's url.
URL_PATTERN = r"^https?://[A-Za-z0-9\[][!-~]*$"
MAX_URL = 3000  # characters of a button's url (Block Kit)


class Link(BaseModel):
    """A link button on an event's message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=75, description="the button's label")
    url: str = Field(max_length=MAX_URL, pattern=URL_PATTERN, description="http:// or https://")


class Event(BaseModel):
    """One notification request (``POST /v1/events``)."""

    # Only keys are cached while parsing: caching every string value too (pydantic's default)
    # made the fast path cost 2.45 us instead of 1.62 us on a storm of 5,000 distinct alerts, and
    # cost a little even on repeated bodies (cProfile of a served gateway, storm.py's bodies).
    model_config = ConfigDict(extra="ignore", frozen=True, cache_strings="keys")

    category: str = Field(pattern=CATEGORY_PATTERN, description="1-64 of A-Z a-z 0-9 _ . : -")
    text: str = Field(min_length=1, max_length=3000)
    title: str | None = Field(None, max_length=150)
    severity: Severity = "info"
    # Bounds as types (not a validator), so /openapi.json states them too.
    fields: dict[FieldName, FieldValue] = Field(default_factory=dict, max_length=20)
    dedup_key: str | None = Field(None, min_length=1, max_length=200)
    status: Status = "firing"
    links: list[Link] = Field(default_factory=list, max_length=5)


class Facts(Protocol):
    """What an event's path and a decision on this replica read of it: an :class:`Event`, or
    the record of one read on sight (``http/sight.py``) on a storm's path."""

    @property
    def category(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def fields(self) -> dict[str, str]: ...
    @property
    def dedup_key(self) -> str | None: ...


class Outcome(str, Enum):
    """What the limiter decided for one event."""

    ACCEPTED = "accepted"  # admitted by every level and queued
    DROPPED = "dropped"  # refused by a level; counted, digested, never sent
    DUPLICATE = "duplicate"  # its dedup_key (same status) was admitted within the window
    RESOLVED = "resolved"  # the resolution of an admitted alert: rides on its admission
    REOPENED = "reopened"  # a resolved alert firing again, admitted: a reply in its thread
    SHADOW = "shadow"  # shadow mode: would have been dropped, admitted anyway


class Decision(NamedTuple):
    """The limiter's answer for one event (a tuple: an alert storm makes millions)."""

    outcome: Outcome
    id: str
    level: str = ""  # the refusing level's name, e.g. "global" or "category"
    rule: str = ""  # the refusing rule, e.g. "10/30m"
    retry_after: float = 0.0  # seconds, rounded up to the millisecond
    value: str | None = None  # the event's value at the refusing level (None at the root)


# -- answers, as /openapi.json documents them --------------------------------------


class Accepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    id: str


class Duplicate(BaseModel):
    status: Literal["duplicate"] = "duplicate"
    id: str


class Resolved(BaseModel):
    status: Literal["resolved"] = "resolved"
    id: str = Field(description="the id of the alert's first event")


class Reopened(BaseModel):
    status: Literal["reopened"] = "reopened"
    id: str = Field(description="the id of the alert's first event")


class Dropped(BaseModel):
    status: Literal["dropped"] = "dropped"
    limit: str = Field(description="the level that refused it, e.g. global or category")
    value: str | None = Field(None, description="the event's value at that level; absent for the root")
    rule: str
    retry_after: float


class Problem(BaseModel):
    error: str
    details: list[Any] = []
