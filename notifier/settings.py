"""Process settings, read once at start from ``NOTIFIER_*`` variables or an env file.

Limits here are the defaults; ``policy.Policy`` turns them into the hierarchy the
gateway enforces, with run-time overrides applied on top.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .errors import SettingsError
from .escalation import Step, parse_escalation
from .rules import Rules, parse_duration_ms, parse_rules, parse_share
from .secret_files import file_variables, read_secret_files
from .windows import QuietWindow, parse_quiet_hours
from .workers import parse_workers

ENV_PREFIX = "NOTIFIER_"
CATEGORY_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"
CATEGORY_RE = re.compile(CATEGORY_PATTERN)  # a category name: match it whole (fullmatch)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
GLOBAL = "global"  # the global level's name: no category may have it
SEVERITIES = ("info", "warning", "error", "critical")
MAX_MUTE_CHOICES = 5  # what one Slack menu shows without scrolling (an overflow menu holds 5)
MAX_CHOICE = 20  # characters of one mute choice: it is a select option's value and part of its label


def _comma_list(value: object) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(str(v).strip() for v in items if str(v).strip())


def _json_object(value: object) -> dict[str, Any]:
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


def _mute_choices(value: object) -> tuple[str, ...]:
    """1 to 5 distinct durations, each above 0, in the order given."""
    choices = _comma_list(value)
    if not 1 <= len(choices) <= MAX_MUTE_CHOICES:
        raise ValueError(f"give 1 to {MAX_MUTE_CHOICES} durations, e.g. 1h,4h,24h")
    if max(map(len, choices)) > MAX_CHOICE:
        raise ValueError(f"a duration is longer than {MAX_CHOICE} characters")
    lengths = [parse_duration_ms(choice) for choice in choices]
    if min(lengths) <= 0:
        raise ValueError("a mute must last longer than 0")
    if len(set(lengths)) != len(lengths):
        raise ValueError("a duration is given twice")
    return choices


def _quiet_hours(value: object) -> dict[str, tuple[QuietWindow, ...]]:
    """Channel (or ``*``) -> its windows; the first bad one named with its channel."""
    parsed = {}
    for channel, windows in _json_object(value).items():
        if not isinstance(windows, str):
            raise ValueError(f"the windows of {channel!r} must be a string, e.g. 'mon-fri 19:00-08:00 Europe/Berlin'")
        try:
            parsed[str(channel)] = parse_quiet_hours(windows)
        except ValueError as exc:
            raise ValueError(f"{channel!r}: {exc}") from None
    return parsed


def _severities(value: object) -> tuple[str, ...]:
    given = _comma_list(value)
    unknown = [s for s in given if s not in SEVERITIES]
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is not one of {', '.join(SEVERITIES)}")
    return given


def _shares(value: object) -> dict[str, Fraction]:
    return {name: parse_share(share) for name, share in _json_object(value).items()}


RulesSetting = Annotated[Rules, NoDecode, BeforeValidator(parse_rules)]
CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_list)]
DurationMs = Annotated[int, NoDecode, BeforeValidator(_duration)]
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_object)]
Share = Annotated[Fraction, NoDecode, BeforeValidator(parse_share)]
EscalationSetting = Annotated[dict[str, tuple[Step, ...]], NoDecode, BeforeValidator(parse_escalation)]


class Settings(BaseSettings):
    """The gateway's settings; the docstring under each is its description, from which ``settings.example.env``
    and the settings reference of the docs are generated (``docs/ref_settings.py``)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, arbitrary_types_allowed=True, use_attribute_docstrings=True
    )

    host: str = "127.0.0.1"
    """The address to listen on."""
    port: int = Field(8080, ge=0, le=65535)
    """The port to listen on."""
    redis_url: str | None = None
    """The shared store: a `redis://`, `rediss://` or `unix://` URL used by every replica. Unset: an embedded store in
    the process (one replica only). E.g. `redis://127.0.0.1:6379/0`."""
    redis_cluster: bool = False
    """Treat NOTIFIER_REDIS_URL as a seed node of a Redis Cluster."""
    redis_timeout: DurationMs = Field(1000, gt=0)
    """How long a request may wait for the store; past it (plus at most 0.5 s) it answers 503."""
    redis_sentinels: CommaList | None = None
    """Comma list of `host:port` of Redis Sentinels: the store is then the primary they name, followed through failovers
    (NOTIFIER_REDIS_URL, if set, gives only the password and the database). E.g.
    `10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379`."""
    redis_sentinel_master: str = Field("notifier", min_length=1)
    """The name the Sentinels monitor the primary under."""
    redis_min_replicas: int = Field(0, ge=0)
    """A 202 only once this many Redis replicas hold the event (`WAIT` after each write), else `503 not replicated`;
    delivery posts only what they hold. 0: no waiting (it must be 0 with the embedded store)."""
    global_limit: RulesSetting = parse_rules("100/30m")
    """Rules for all events together: `COUNT/DURATION` (unit ms, s, m, h or d; a bare number is seconds), several
    separated by commas, each of which must hold. Windows slide; a count of 0 mutes."""
    category_limit: RulesSetting = parse_rules("10/30m")
    """Rules for each category on its own."""
    category_limits: Annotated[dict[str, RulesSetting], NoDecode, BeforeValidator(_json_object)] = {}
    """Per-category rules overriding NOTIFIER_CATEGORY_LIMIT, as a JSON object. E.g. `{"error": "20/30m", "debug":
    "0/1h"}`."""
    categories: CommaList | None = None
    """Comma list of the allowed categories (others are refused with 422); unset: any valid name (1-64 of `A-Z a-z 0-9 _
    . : -`). E.g. `error,deploy,billing`."""
    max_categories: int = Field(1000, ge=1)
    """With NOTIFIER_CATEGORIES unset: how many categories /v1/stats, the metrics and digests name one by one; the rest
    are summed under `(other)` (totals stay exact)."""
    category_reserves: Annotated[dict[str, Fraction], NoDecode, BeforeValidator(_shares)] = {}
    """Fair shares: the part of the global level guaranteed to a category, as a JSON object of shares `N%` or `N.N%`.
    Under every global rule COUNT/DURATION a class with N% owns floor(N * COUNT / 100) slots no other class can take;
    with NOTIFIER_CRITICAL_RESERVE at most 100% in all. E.g. `{"payments": "10%", "security": "5%"}`."""
    critical_reserve: Share = Fraction(0)
    """The part of the global level guaranteed to events of severity critical."""
    slack_bot_token: str | None = None
    """A Slack bot token: messages go through chat.postMessage, and alerts are edited and threaded. Without it and
    without a webhook URL, messages are printed to the console (stdout). E.g. `xoxb-...`."""
    slack_webhook_url: str | None = None
    """Without a bot token: messages go through this incoming webhook (no edits, no threads). E.g.
    `https://hooks.slack.com/services/...`."""
    slack_api_url: str = "https://slack.com/api/"
    """The base URL of the Slack Web API (for a proxy, or a test)."""
    slack_channel: str | None = None
    """The default channel for chat.postMessage, where no route and no category channel names one. E.g. `#alerts`."""
    slack_signing_secret: str | None = None
    """The Slack app's signing secret. With it (and a bot token), messages carry controls (mute, acknowledge) and POST
    /v1/slack/actions takes Slack's signed clicks."""
    slack_app_token: str | None = None
    """An app-level token (`xapp-...`, with `connections:write`): with a bot token, Slack's clicks come over Socket
    Mode, one connection per replica, so the buttons work with no public URL and no signing secret."""
    control_secret: str | None = None
    """The secret that seals the controls of the gateway's messages, so that a click acts only on a control the gateway
    made. Unset: a random one is made and kept in the store, shared by the fleet; set it to keep the buttons of posted
    messages working after the store's data is lost."""
    category_channels: Annotated[dict[str, str], NoDecode, BeforeValidator(_json_object)] = {}
    """Per-category channels, as a JSON object: category -> channel. E.g. `{"db": "#team-db"}`."""
    channel_rate: RulesSetting = parse_rules("1/1s")
    """The delivery pace per Slack channel, shared by all replicas: one rule, with a count of 1 or more."""
    update_rate: RulesSetting = parse_rules("40/1m")
    """The budget for edits of posted messages (chat.update), shared by all replicas: Slack limits edits per workspace,
    not per channel."""
    mute_choices: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_mute_choices)] = ("1h", "4h", "24h")
    """The durations a message's mute control offers: 1 to 5, comma-separated. One choice is a button (`Mute db for
    1h`); several are a menu (`Mute db for...`, then `Mute for 4h`)."""
    escalation: EscalationSetting = {}
    """A JSON object, severity -> list of steps `DURATION MENTION`. When DURATION has passed since an alert's message
    was posted (or since it reopened) and it is still firing, not acknowledged and not muted, one replica posts `Not
    acknowledged after DURATION: MENTION` in its thread. Mentions: `<@U...>`, `<!subteam^S...>`, `<!here>`,
    `<!channel>`. E.g. `{"critical": ["5m <!subteam^S0ONCALL>", "20m <@U0LEAD>"]}`."""
    quiet_hours: Annotated[dict[str, tuple[QuietWindow, ...]], NoDecode, BeforeValidator(_quiet_hours)] = {}
    """A JSON object, channel (or `*` for every channel) -> windows `[DAYS ]HH:MM-HH:MM TIMEZONE` separated by `;`. DAYS
    (mon-fri, sat,sun, ...) are the days a window starts on (every day when omitted); an end at or before the start is
    on the next day; TIMEZONE is an IANA name (daylight saving time is honoured). Admitted events of a channel in quiet
    hours are held, and handed over when the window ends. E.g. `{"#team-db": "mon-fri 19:00-08:00 Europe/Berlin"}`."""
    hold_bypass: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_severities)] = ("critical",)
    """Comma list of severities that no quiet or maintenance window holds (posted at once)."""
    api_tokens: CommaList | None = None
    """Comma list of bearer tokens, each with every scope (named env-1, env-2, ... as the source of their events
    and the author of their changes). When set (or tokens are in the configuration file), every change (POST,
    PUT, DELETE) and every read of event content (/v1/dead, /v1/alerts) needs `Authorization: Bearer <token>`;
    counts (/v1/stats, /v1/limits, /metrics, /healthz, /readyz) stay open for monitoring. Tokens that may do only
    part of it: `notifier token new NAME --scopes send` and `tokens:` in NOTIFIER_CONFIG."""
    allowed_hosts: CommaList = ()
    """Comma list of host names a gateway bound to a loopback address answers besides loopback ones (`localhost`,
    `127.0.0.1`, `[::1]`), while no tokens are configured: a request whose `Host` names another is refused (403), so
    a web page cannot reach it by DNS rebinding. E.g. `notifier.internal`."""
    key_prefix: str = Field("notifier", pattern=r"^[A-Za-z0-9_.:\-]{1,64}$")
    """The prefix of every Redis key (keys look like `PREFIX:{PREFIX}:...`; the braces keep one deployment in one Redis
    Cluster slot)."""
    digest_interval: DurationMs = 300_000
    """How often a digest of suppressed notifications may be posted per channel; 0 turns digests off."""
    alertmanager_category_label: str = "alertname"
    """The Alertmanager label that becomes the category on /v1/alertmanager."""
    replica_id: str | None = None
    """This replica's name in the delivery consumer group; unset: `hostname:port`. A replica restarted with the same
    name resumes its own pending deliveries."""
    stale_after: DurationMs = Field(600_000, ge=0)
    """When the message a channel is about to post has waited longer than this (a Slack outage, a long backlog), every
    event waiting for that channel and older than this is folded into one message, and each alert among them is
    posted once as it stands now; 0 never folds."""
    delivery_max_attempts: int = Field(8, ge=1)
    """Failed sends (5xx, timeouts) before an event moves to the dead letters."""
    dead_letters_max: int = Field(10_000, ge=1)
    """The most dead letters kept (GET /v1/dead, POST /v1/dead/requeue); past it the oldest go first, so a channel that
    refuses every message cannot grow the store without bound."""
    claim_idle: DurationMs = Field(60_000, gt=0)
    """How long an outbox entry may sit unacknowledged before another replica takes it over."""
    shadow: bool = False
    """Shadow mode: decide and count as usual, but deliver everything (to tune limits safely)."""
    on_store_error: Literal["fail_closed", "fail_open"] = "fail_closed"
    """When the store is unreachable: `fail_closed` answers 503; `fail_open` admits through a limiter local to each
    process, its counts divided by NOTIFIER_REPLICAS."""
    replicas: int = Field(1, ge=1)
    """How many replicas share the limits, for the local limiter of `fail_open`."""
    workers: Annotated[int, NoDecode, BeforeValidator(parse_workers)] = 1
    """Gateway processes on this replica's port, each admitting and delivering (`notifier serve --workers N` is the
    same); `auto`: one per CPU the process may use. With `fail_open`, each worker's local limiter holds its share
    (NOTIFIER_REPLICAS x NOTIFIER_WORKERS). Kubernetes scales by pods: leave it at 1 there."""
    audit_retention: DurationMs = Field(90 * 86_400_000, gt=0)
    """How long the audit log keeps an entry (every change: overrides, windows, acknowledgements, requeues)."""
    audit_max_entries: int = Field(100_000, ge=1)
    """The most entries the audit log keeps, fleet-wide; the oldest go first."""
    log_level: str = "INFO"
    """DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    config: str | None = None
    """The configuration file (YAML): the limit tree (`levels`) and `routes`. With `levels` in it,
    NOTIFIER_GLOBAL_LIMIT, NOTIFIER_CATEGORY_LIMIT, NOTIFIER_CATEGORY_LIMITS, NOTIFIER_CATEGORY_RESERVES and
    NOTIFIER_CRITICAL_RESERVE must stay unset; with `routes`, NOTIFIER_CATEGORY_CHANNELS must. `notifier serve --config
    FILE` is the same. E.g. `notifier.yaml`."""

    @field_validator("category_limits", "category_channels", "category_reserves")
    @classmethod
    def _known_category_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        bad = [name for name in value if not CATEGORY_RE.fullmatch(name)]
        if bad:
            raise ValueError(f"invalid category name(s): {', '.join(map(repr, bad))}")
        if GLOBAL in value:
            raise ValueError(f"{GLOBAL!r} is the name of the global level, not a category")
        return value

    @field_validator("categories")
    @classmethod
    def _valid_categories(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            cls._known_category_names(dict.fromkeys(value))
        return value

    @field_validator("channel_rate", "update_rate")
    @classmethod
    def _one_pace_rule(cls, value: Rules) -> Rules:
        if len(value) != 1:
            raise ValueError("give exactly one rule, e.g. 1/1s")
        if value[0].count < 1:
            raise ValueError("a pace of 0 would never send; give at least 1, e.g. 1/1s")
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("xapp-"):
            raise ValueError("not an app-level token: it starts with xapp-")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(REDIS_SCHEMES):
            raise ValueError(f"{value!r} is not a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("redis_sentinels")
    @classmethod
    def _host_ports(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for address in value or ():
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{address!r} is not host:port")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @model_validator(mode="after")
    def _store_topology(self) -> Settings:
        if self.redis_sentinels and self.redis_cluster:
            raise ValueError(f"{ENV_PREFIX}REDIS_SENTINELS: a Redis Cluster has no Sentinels; unset one of the two")
        if self.redis_min_replicas and not (self.redis_url or self.redis_sentinels):
            raise ValueError(
                f"{ENV_PREFIX}REDIS_MIN_REPLICAS: the embedded store has no replicas; "
                f"it must be 0 unless {ENV_PREFIX}REDIS_URL or {ENV_PREFIX}REDIS_SENTINELS is set"
            )
        if self.workers > 1 and not (self.redis_url or self.redis_sentinels):
            raise ValueError(
                f"{ENV_PREFIX}WORKERS: the embedded store lives in one process; with {self.workers} workers "
                f"set {ENV_PREFIX}REDIS_URL or {ENV_PREFIX}REDIS_SENTINELS"
            )
        return self

    @model_validator(mode="after")
    def _reserves_fit(self) -> Settings:
        allowed = self.categories
        excluded = [c for c in self.category_reserves if allowed is not None and c not in allowed]
        if excluded:
            raise ValueError(
                f"{ENV_PREFIX}CATEGORY_RESERVES: reserve for {', '.join(map(repr, excluded))}, "
                f"which {ENV_PREFIX}CATEGORIES excludes"
            )
        total = sum(self.category_reserves.values(), self.critical_reserve)
        if total > 100:
            raise ValueError(
                f"{ENV_PREFIX}CATEGORY_RESERVES: reserves add up to {float(total):g}% with "
                f"{ENV_PREFIX}CRITICAL_RESERVE, more than 100%"
            )
        return self

    @property
    def consumer_name(self) -> str:
        """This replica's identity in the delivery consumer group."""
        return self.replica_id or f"{socket.gethostname()}:{self.port}"


def load_settings(env_file: str | None = None, **overrides: Any) -> Settings:
    """Build the settings, turning a validation error into one line naming the variable.

    A secret setting may come from a file (``NOTIFIER_<NAME>_FILE``, see ``secret_files``).
    """
    if env_file is not None and not Path(env_file).is_file():
        raise SettingsError(f"env file {env_file} does not exist or is not a file")
    given = {**_env_file_values(env_file), **os.environ}  # the environment wins, as pydantic-settings reads them
    files = read_secret_files(ENV_PREFIX, given)
    try:
        return Settings(_env_file=env_file, **{**files, **overrides})  # type: ignore[call-arg]
    except ValidationError as exc:
        raise SettingsError(_one_line(exc)) from exc


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    message = str(err["msg"]).removeprefix("Value error, ")
    if not err["loc"]:  # a check across settings names its variable in the message
        return f"invalid setting {message}"
    return f"invalid setting {ENV_PREFIX}{str(err['loc'][0]).upper()}: {message}"


def _env_file_values(env_file: str | None) -> dict[str, str]:
    """``NAME=value`` lines of an env file (the ``_FILE`` names are read from it too)."""
    if not env_file:
        return {}
    lines = Path(env_file).read_text(errors="replace").splitlines()
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#"))
    return {name.strip(): value.strip().strip("'\"") for name, value in pairs}


def unknown_variables(env_file: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Warnings for ``NOTIFIER_*`` names no setting has, each with the closest known name."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | file_variables(ENV_PREFIX)
    given = {name for name in (os.environ if environ is None else environ) if name.startswith(ENV_PREFIX)}
    if env_file:
        lines = Path(env_file).read_text(errors="replace").splitlines()
        given |= {line.split("=", 1)[0].strip() for line in lines if line.strip().startswith(ENV_PREFIX)}
    warnings = []
    suffixes = sorted(name.removeprefix(ENV_PREFIX) for name in known)
    for name in sorted(given - known):  # the shared prefix would make every name look close
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1)
        hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
        warnings.append(f"unknown setting {name} is ignored{hint}")
    return warnings
