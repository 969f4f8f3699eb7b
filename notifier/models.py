"""The event a service posts, validated with pydantic."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .settings import CATEGORY_PATTERN

Severity = Literal["info", "warning", "error", "critical"]


class Event(BaseModel):
    """One notification request (``POST /v1/events``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    category: str = Field(pattern=CATEGORY_PATTERN, description="1-64 of A-Z a-z 0-9 _ . : -")
    text: str = Field(min_length=1, max_length=3000)
    title: str | None = Field(None, max_length=150)
    severity: Severity = "info"
    fields: dict[str, str] = Field(default_factory=dict, max_length=20)
    dedup_key: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("fields")
    @classmethod
    def _bounded_fields(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not 1 <= len(name) <= 100 or len(text) > 1000:
                raise ValueError("field names are 1-100 characters and values up to 1000")
        return value


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
