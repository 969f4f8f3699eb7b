"""The event a service posts, validated with pydantic."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .settings import CATEGORY_PATTERN

Severity = Literal["info", "warning", "error", "critical"]
FieldName = Annotated[str, Field(min_length=1, max_length=100)]
FieldValue = Annotated[str, Field(max_length=1000)]


class Event(BaseModel):
    """One notification request (``POST /v1/events``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    category: str = Field(pattern=CATEGORY_PATTERN, description="1-64 of A-Z a-z 0-9 _ . : -")
    text: str = Field(min_length=1, max_length=3000)
    title: str | None = Field(None, max_length=150)
    severity: Severity = "info"
    # Bounds as types (not a validator), so /openapi.json states them too.
    fields: dict[FieldName, FieldValue] = Field(default_factory=dict, max_length=20)
    dedup_key: str | None = Field(None, min_length=1, max_length=200)


class Accepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    id: str


class Duplicate(BaseModel):
    status: Literal["duplicate"] = "duplicate"
    id: str


class Dropped(BaseModel):
    status: Literal["dropped"] = "dropped"
    limit: Literal["global", "category"]
    rule: str
    retry_after: float


class Problem(BaseModel):
    error: str
    details: list = []
