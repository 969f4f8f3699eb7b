"""The answers of the gateway's routes as models, for ``/openapi.json`` (``openapi.py``).

Requests are described by the models that validate them (``models.Event``, the
Alertmanager payload, ``limits.OverrideRequest``, ...); these describe what comes back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .alerts import PAGE


class CategoryCounts(BaseModel):
    accepted: int = Field(ge=0)
    dropped: int = Field(ge=0)


class DestinationCounts(BaseModel):
    delivered: int = Field(ge=0, description="messages it took (counted from this version on)")
    dead: int = Field(ge=0, description="messages dead-lettered there")
    paused_until: str | None = Field(description="until when a 429 pauses it (ISO 8601 UTC), or null")


class Stats(BaseModel):
    """``GET /v1/stats``: totals shared by all replicas; past the cap, ``(other)`` sums the rest of a
    level's values (and of the categories)."""

    model_config = ConfigDict(extra="allow")
    accepted: int = Field(ge=0)
    dropped: int = Field(ge=0)
    dropped_by_limit: dict[str, int] = Field(description="drops by the name of the level that refused them")
    by_category: dict[str, CategoryCounts]
    by_level: dict[str, dict[str, CategoryCounts]] = Field(
        description="per level below the root, per value: an event counts under its value at every level"
    )
    folded: int = Field(0, ge=0, description="admitted events summed up in a folded message after an outage")
    destinations: dict[str, DestinationCounts] = Field(
        default_factory=dict, description="per destination, by name (the first is the default)"
    )


class RuleUse(BaseModel):
    """One rule of one level in ``GET /v1/limits`` (global rules add ``shared`` and ``reserves``)."""

    model_config = ConfigDict(extra="allow")
    rule: str
    limit: int
    used: int
    remaining: int
    available_in: float
    next_free_in: float


class OverrideInForce(BaseModel):
    """An override: its rules, when it lapses (unix seconds, null = until removed), who set it."""

    model_config = ConfigDict(extra="allow")
    rules: str
    until: float | None
    by: str


class LevelUse(BaseModel):
    """One level of the tree: its key (null at the root), and per value its rules' use (the root: ``rules``)."""

    model_config = ConfigDict(extra="allow")
    name: str
    key: str | None
    rules: list[RuleUse] | None = None
    values: dict[str, list[RuleUse]] | None = None


class Limits(BaseModel):
    """``GET /v1/limits``: per level, value and rule, how much is used; the overrides in force.

    ``global`` is the root's rules and ``categories`` the values of the level named ``category``
    (as before the tree); ``overrides`` are named by the root's name, a category's name, or
    ``level=value``.
    """

    model_config = ConfigDict(extra="allow")
    levels: list[LevelUse]
    global_: list[RuleUse] = Field(alias="global")
    categories: dict[str, list[RuleUse]] | None = None
    overrides: dict[str, OverrideInForce]


class OverrideAnswer(BaseModel):
    """``PUT``/``DELETE /v1/limits/...``: the rules now in force for the level value."""

    level: str
    value: str | None = Field(None, description="given when the request named a level and a value")
    rules: str | None = Field(description="null after removing the override of a level the configuration no longer has")
    until: float | None
    by: str | None = None


class AlertOutcome(BaseModel):
    """The outcome of one alert: the event answer plus which alert it was.

    ``rejected`` (with ``error``): its category is not in ``NOTIFIER_CATEGORIES``. In a
    ``503`` only: ``outcome unknown`` and ``not replicated`` (with ``id``: it may be
    delivered), ``unavailable`` (the store did not decide it: it is never delivered).
    """

    model_config = ConfigDict(extra="allow")
    status: Literal[
        "accepted",
        "duplicate",
        "dropped",
        "resolved",
        "reopened",
        "rejected",
        "outcome unknown",
        "not replicated",
        "unavailable",
    ]
    category: str
    fingerprint: str


class AlertmanagerAnswer(BaseModel):
    """``POST /v1/alertmanager``: one outcome per alert, in order."""

    status: Literal["ok"]
    results: list[AlertOutcome]


class AlertmanagerUndecided(BaseModel):
    """``POST /v1/alertmanager`` when the store did not decide every alert: ``503``, so Alertmanager
    sends it again (its alerts are deduplicated). ``error`` is the plain one only when no alert was,
    or may have been, admitted; else ``outcome unknown`` (or ``not replicated``)."""

    error: str
    results: list[AlertOutcome]


class DeadLetter(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    category: str
    channel: str
    reason: str
    dead_id: str
    dead_at_ms: int


class DeadLetters(BaseModel):
    """``GET /v1/dead``: the oldest dead letters and the fleet's delivery counters."""

    count: int = Field(ge=0)
    entries: list[DeadLetter]
    counters: dict[str, int]


class RequeueRequest(BaseModel):
    """``POST /v1/dead/requeue``: no body (or no ``ids``) requeues every dead letter."""

    model_config = ConfigDict(extra="allow")
    ids: list[str] | None = Field(None, min_length=1)
    via: Literal["api", "console", "cli"] = Field("api", description="the face it was made from, for the audit log")


class ReloadRequest(BaseModel):
    """``POST /v1/reload``: no body, or an empty object (the file is the configuration's own)."""

    model_config = ConfigDict(extra="forbid")


class Reloaded(BaseModel):
    """``POST /v1/reload``: the configuration now in force."""

    status: Literal["reloaded"]
    config: str = Field(description="the SHA-256 of the configuration the replica runs now")


class Requeued(BaseModel):
    status: Literal["requeued"]
    count: int = Field(ge=0)
    ids: list[str]


class ActionAnswer(BaseModel):
    """``POST /v1/slack/actions``: the click was applied."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ok"]


class OpenAlert(BaseModel):
    """One open alert: firing, not resolved, within its window."""

    model_config = ConfigDict(extra="allow")
    dedup_key: str
    category: str
    severity: str
    text: str
    first_seen: float = Field(description="unix seconds")
    last_seen: float = Field(description="unix seconds")
    seen: int = Field(ge=1)
    acknowledged_by: str | None
    acknowledged_at: float | None = Field(description="unix seconds, or null")
    acknowledged_via: str | None = Field(description="slack (a click), api, console or cli; null when not acknowledged")
    escalations: int = Field(ge=0, description="escalation steps posted so far")
    held: bool
    channel: str | None = Field(description="the channel id Slack answered, once posted")
    ts: str | None = Field(description="the message's ts, once posted")


class OpenAlerts(BaseModel):
    """``GET /v1/alerts``: open alerts, newest first by first seen."""

    alerts: list[OpenAlert] = Field(max_length=PAGE)
    cursor: str | None = Field(description="the next page's cursor, or null on the last page")


class AckAnswer(BaseModel):
    """``POST``/``DELETE /v1/alerts/{dedup_key}/ack``: the alert's acknowledgement now."""

    dedup_key: str
    acknowledged_by: str | None
    acknowledged_at: float | None = Field(description="unix seconds, or null")
    acknowledged_via: str | None = Field(description="slack (a click), api, console or cli; null when not acknowledged")


class Window(BaseModel):
    """A maintenance window (``PUT /v1/windows/{name}``, ``GET /v1/windows``)."""

    name: str
    start: float = Field(description="unix seconds, a millisecond fraction")
    end: float
    categories: list[str]
    channels: list[str]
    note: str
    by: str
    in_force: bool


class WindowEnded(BaseModel):
    name: str
    end: float


class QuietHours(BaseModel):
    """One channel's quiet hours (``*``: every channel), in force or next."""

    channel: str
    windows: str
    start: float | None
    end: float | None
    in_force: bool


class Windows(BaseModel):
    """``GET /v1/windows``."""

    maintenance: list[Window]
    quiet_hours: list[QuietHours]


class Health(BaseModel):
    """``/healthz`` and ``/readyz``."""

    model_config = ConfigDict(extra="allow")
    status: str
    socket_mode: str | None = Field(
        None, description="/healthz: connected, connecting, off, or why the last attempt failed (refused: ...)"
    )
    config_error: list[str] | None = Field(
        None,
        description="/healthz: the problems of the configuration file's last reload (the replica runs the one before)",
    )


class TokenAnswer(BaseModel):
    """``GET /v1/token``: who the given token is, and what it may do."""

    name: str = Field(description="the token's name: the source of its events, the author of its changes")
    scopes: list[Literal["send", "read", "ack", "admin"]]
    channels: list[str] = Field(description="globs of the channels its messages may go to")
    open: bool = Field(description="true when no tokens are configured: every caller is anonymous")


class AuditEntry(BaseModel):
    """One change in the audit log: who made it, from where, to what, and what was there before and after."""

    id: str = Field(description="the entry's id; give it as before= for the older entries")
    at: str = Field(description="when, ISO 8601 UTC (the store's clock)")
    by: str = Field(description="the token's name; slack:<user id> for a click")
    via: Literal["api", "console", "cli", "slack"]
    action: str = Field(description="override.put, override.delete, window.open, window.end, ack, unack, requeue")
    target: dict[str, Any] = Field(description="level and value, window, alert (dedup_key, category), dead letters")
    before: Any = Field(description="what was there before, or null")
    after: Any = Field(description="what is there now, or null")


class AuditPage(BaseModel):
    """``GET /v1/audit``: entries, newest first."""

    entries: list[AuditEntry]
    next: str | None = Field(description="the id to give as before= for the next page, or null on the last")
