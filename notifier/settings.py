"""All configuration, read once at start from ``NOTIFIER_*`` variables or an env file."""

from __future__ import annotations

import json
import re
import socket
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .rules import Rule, parse_duration_ms, parse_rules

ENV_PREFIX = "NOTIFIER_"
CATEGORY_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"
_CATEGORY = re.compile(CATEGORY_PATTERN)


def _comma_list(value: object) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


def _json_object(value: object) -> dict:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(parsed, dict):
        raise ValueError("must be a JSON object")
    return parsed


def _duration(value: object) -> int:
    return value if isinstance(value, int) else parse_duration_ms(str(value))


Rules = Annotated[tuple[Rule, ...], NoDecode, BeforeValidator(parse_rules)]
CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_list)]
DurationMs = Annotated[int, NoDecode, BeforeValidator(_duration)]


class SettingsError(Exception):
    """A setting has a bad value; the message names the variable."""


class Settings(BaseSettings):
    """The gateway's settings; see ``settings.example.env`` for each one."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    redis_url: str | None = None
    redis_cluster: bool = False
    redis_timeout: DurationMs = 1000
    global_limit: Rules = parse_rules("100/30m")
    category_limit: Rules = parse_rules("10/30m")
    category_limits: Annotated[dict[str, Rules], NoDecode, BeforeValidator(_json_object)] = {}
    categories: CommaList | None = None
    slack_bot_token: str | None = None
    slack_webhook_url: str | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_channel: str | None = None
    category_channels: Annotated[dict[str, str], NoDecode, BeforeValidator(_json_object)] = {}
    channel_rate: Rules = parse_rules("1/1s")
    api_tokens: CommaList | None = None
    key_prefix: str = Field("notifier", pattern=r"^[A-Za-z0-9_.:\-]{1,64}$")
    digest_interval: DurationMs = 300_000
    alertmanager_category_label: str = "alertname"
    replica_id: str | None = None
    delivery_max_attempts: int = Field(8, ge=1)
    claim_idle: DurationMs = 60_000
    shadow: bool = False
    on_store_error: Literal["fail_closed", "fail_open"] = "fail_closed"
    replicas: int = Field(1, ge=1)
    log_level: str = "INFO"

    @field_validator("category_limits", "category_channels")
    @classmethod
    def _known_category_names(cls, value: dict) -> dict:
        bad = [name for name in value if not _CATEGORY.match(name)]
        if bad:
            raise ValueError(f"invalid category name(s): {', '.join(map(repr, bad))}")
        return value

    @field_validator("categories")
    @classmethod
    def _valid_categories(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            cls._known_category_names(dict.fromkeys(value))
        return value

    @field_validator("channel_rate")
    @classmethod
    def _one_pace_rule(cls, value: tuple[Rule, ...]) -> tuple[Rule, ...]:
        if len(value) != 1:
            raise ValueError("give exactly one rule, e.g. 1/1s")
        if value[0].count < 1:
            raise ValueError("a pace of 0 would never deliver; give at least 1, e.g. 1/1s")
        return value

    def rules_for(self, category: str) -> tuple[Rule, ...]:
        """The category level's rules for ``category`` (its override, else the default)."""
        return self.category_limits.get(category, self.category_limit)

    def channel_for(self, category: str) -> str:
        """The Slack channel events of ``category`` go to."""
        return self.category_channels.get(category) or self.slack_channel or "default"

    @property
    def consumer_name(self) -> str:
        """This replica's identity in the delivery consumer group."""
        return self.replica_id or f"{socket.gethostname()}:{self.port}"


def load_settings(env_file: str | None = None, **overrides: object) -> Settings:
    """Build the settings, turning a validation error into one line naming the variable."""
    try:
        return Settings(_env_file=env_file, **overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ENV_PREFIX + str(err["loc"][0]).upper() if err["loc"] else "settings"
        message = str(err["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"invalid setting {name}: {message}") from exc
