"""The configuration file (``NOTIFIER_CONFIG``): the limit tree, routes, tokens and templates.

Read once at start into typed models, next to :class:`~notifier.settings.Settings`;
``policy.Policy`` builds its snapshot from both, and nothing else reads the file.
YAML is read by ``yaml_file.py`` (PyYAML's safe loader; a key given twice in one mapping
is a problem, not a silent "last one wins"), validated by pydantic, then checked
across its parts. Every problem is one line naming the file and the place in it,
``levels[2].rules`` or ``tokens.ci.sha256``, so a bad file is mended in one go.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from . import patterns
from .config_places import key_name, message_of, place_of
from .destinations.spec import DestinationConfig, resolve_all
from .errors import ConfigError
from .rules import Rules, format_share, parse_rules, parse_share
from .settings import CATEGORY_PATTERN, CATEGORY_RE, ENV_PREFIX, Settings
from .yaml_file import read_yaml

LEVEL_NAME = r"^[a-z][a-z0-9_]{0,31}$"
PLAIN_KEYS = ("category", "channel", "source", "severity", "status", "destination")
FIELD_PREFIX = "field:"
SCOPES = ("send", "read", "ack", "admin")
CRITICAL = "critical"  # the reserve class of events of severity critical
TEMPLATE_NAME = r"^[A-Za-z0-9_.\-]{1,64}$"
RESERVED_SOURCES = ("anonymous", "global")  # no token may be named so: they mean something already
# Settings that state what a file's ``levels`` or ``routes`` state: one truth in one place.
TREE_SETTINGS = ("global_limit", "category_limit", "category_limits", "category_reserves", "critical_reserve")
ROUTE_SETTINGS = ("category_channels",)
SLACK_SETTINGS = ("slack_bot_token", "slack_webhook_url", "slack_app_token", "slack_signing_secret", "slack_channel")
# Parts of the schema whose feature is not there yet: refused, never accepted and ignored.
NOT_YET: dict[str, str] = {}


def valid_key(key: str) -> bool:
    """True for a key an event can be counted under or routed by: ``category`` ... ``field:NAME``."""
    if key in PLAIN_KEYS:
        return True
    name = key.removeprefix(FIELD_PREFIX)
    return key.startswith(FIELD_PREFIX) and 1 <= len(name) <= 100


def _rules(value: object) -> Rules:
    if not isinstance(value, (str, int)):
        raise ValueError("must be rules written COUNT/DURATION, e.g. 10/30m or 10/1s,100/30m")
    return parse_rules(str(value))


def _share(value: object) -> Fraction:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a share such as 10% or 2.5% (write it in quotes in YAML)")
    return parse_share(value)


def _value_limits(value: object) -> object:
    if value is None:  # `{a: 1/1s,2/1m}` in YAML's flow style is two keys, the second with no value
        raise ValueError('no rules; in a {...} mapping, quote rules that hold a comma: "10/1s,100/30m"')
    return {"rules": value} if isinstance(value, (str, int)) else value


def _text(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


RulesText = Annotated[Rules, BeforeValidator(_rules)]
Share = Annotated[Fraction, BeforeValidator(_share)]
Shares = dict[str, Share]


class _Part(BaseModel):
    # The docstring under a field is its description: the docs' reference of the file is generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, use_attribute_docstrings=True)


class ValueLimits(_Part):
    """The rules of one value of a level, and its own reserves (None: the level's apply)."""

    rules: RulesText
    """The value's rules, instead of the level's: `COUNT/DURATION`, several separated by commas."""
    reserves: Shares | None = None
    """The value's own reserves, instead of the level's: class -> share."""


class LevelConfig(_Part):
    """One level of the limit tree: ``key`` names what an event is counted under (none at the root)."""

    name: str = Field(pattern=LEVEL_NAME)
    """The level's name (1-32 of `a-z 0-9 _`, starting with a letter), as refusals, stats and overrides name it."""
    key: str | None = None
    """What an event is counted under at this level: `category`, `channel` (after routing), `destination`, `source`,
    `severity`, `status` or `field:NAME` (the event's `fields.NAME`, `-` when it has none). None at the root, required
    below."""
    rules: RulesText
    """The rules of each value of the key (at the root: of all events): `COUNT/DURATION`, several separated by
    commas, each of which must hold."""
    values: dict[str, Annotated[ValueLimits, BeforeValidator(_value_limits)]] = {}
    """Values with rules of their own: value -> rules (or `{rules, reserves}`). Quote rules holding a comma."""
    reserves: Shares = {}
    """Fair shares of each rule: class -> share (`N%`). A class is `critical` (events of severity critical) or
    `LEVEL=VALUE` of a level below; together at most 100%."""


class RouteConfig(_Part):
    """Where the events it matches go (the first route that matches decides)."""

    match: dict[str, Annotated[str, BeforeValidator(_text)]] = {}
    """Key -> regular expression, anchored at both ends; every one must match. Keys: `category`, `source`,
    `severity`, `status`, `channel`, `destination`, `field:NAME`. Empty: every event. Matched in linear time (Rust's
    regex syntax: no look-around, no backreferences), as senders choose the values."""
    channel: str | None = Field(None, min_length=1, max_length=200)
    """The channel the matching events go to; none: the destination's own channel."""
    destination: str | None = None
    """The destination (a name in `destinations`) the matching events go to; none: the first destination."""
    template: str | None = None
    """The template (a name in `templates`) that shapes the matching events' messages; none: `default` if there
    is one, else the built-in shape."""
    category: str | None = Field(None, pattern=CATEGORY_PATTERN)
    """The category of front-door messages it matches (they come without one); else the token's name."""


class TokenConfig(_Part):
    """A bearer token by its SHA-256, and what it may do."""

    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    """The SHA-256 of the token, 64 hex digits (`notifier token new` prints it): the file never holds a token."""
    scopes: tuple[Literal["send", "read", "ack", "admin"], ...] = Field(min_length=1)
    """What it may do: `send` events and front-door messages, `read` event content, `ack` alerts, `admin`."""
    channels: tuple[str, ...] = ("*",)
    """Where its messages may go: globs, `*` any run of characters, e.g. `["#payments-*"]`."""
    mentions: bool = False
    """Front doors: broadcast mentions (`<!here>` ...) in its messages stay mentions, else they show as text."""
    destination: str | None = None
    """Front doors: the destination (a name in `destinations`) its messages go to, unless a route says otherwise."""
    refusal: Annotated[Literal["ok", "429"], BeforeValidator(_text)] = "ok"
    """Front doors: a refused message is answered as a success (`ok`), or with Slack's own `429`."""


class TemplateConfig(_Part):
    """A message shape: ``text`` (required) and Block Kit ``blocks``; every string is a Jinja2 template."""

    text: str = Field(min_length=1)
    """The message's text: the notification and what screen readers say. A Jinja2 template that sees the event:
    `category`, `text`, `title`, `severity`, `status`, `fields`, `dedup_key`, `links`, `source`, `channel`, `id`."""
    blocks: list[dict[str, Any]] | None = None
    """Block Kit blocks, every string in them a Jinja2 template like `text`; values are escaped for Slack where
    they are put, `link(url, text)` makes a link of values. None: the text alone."""


class Config(_Part):
    """The whole file; every part is optional and the smallest file is empty."""

    levels: list[LevelConfig] | None = Field(None, min_length=1)
    """The limit tree, from the root down; every event passes every level. Without it: `global` and `category`
    from the environment settings."""
    routes: list[RouteConfig] = []
    """Where events go: the first route that matches decides the channel; none: NOTIFIER_SLACK_CHANNEL."""
    tokens: dict[str, TokenConfig] = {}
    """Token name -> its hash and what it may do; the name is the source of what it sends."""
    templates: dict[str, TemplateConfig] = {}
    """Template name -> a message shape, picked by a route's `template`; one named `default` shapes every event no
    route gives a template. Checked at start-up: one that does not compile stops it."""
    destinations: dict[str, DestinationConfig] = {}
    """Destination name -> where messages go (a Slack workspace, a webhook of a chat); the first is the default.
    None: one destination, `slack`, from the NOTIFIER_SLACK_* settings."""


EMPTY = Config.model_validate({})

# The mappings of the file whose keys are fields, by place ("[]" any index, "*" any key).
_SHAPES: dict[tuple[str, ...], type[BaseModel]] = {
    (): Config,
    ("levels", "[]"): LevelConfig,
    ("levels", "[]", "values", "*"): ValueLimits,
    ("routes", "[]"): RouteConfig,
    ("tokens", "*"): TokenConfig,
    ("templates", "*"): TemplateConfig,
    ("destinations", "*"): DestinationConfig,
}


def load_config(path: str | Path, settings: Settings | None = None) -> Config:
    """Read and check the file at ``path``; :class:`ConfigError` lists every problem, one per line."""
    return parse_config(read_yaml(path), str(path), settings)


def parse_config(raw: object, where: str = "configuration", settings: Settings | None = None) -> Config:
    """Validate decoded YAML ``raw`` as a :class:`Config` and check its parts against each other."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError([f"{where}: the file must hold a mapping of levels, routes, tokens and templates"])
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([f"{where}: {place_of(e['loc'])}: {message_of(e, _SHAPES)}" for e in exc.errors()]) from exc
    problems = [f"{where}: {place}: {message}" for place, message in _problems(config, settings)]
    if problems:
        raise ConfigError(problems)
    return config


def _problems(config: Config, settings: Settings | None) -> Iterator[tuple[str, str]]:
    for part, why in NOT_YET.items():
        if getattr(config, part):
            yield part, why
    if config.levels is not None:
        yield from _level_problems(config.levels)
    yield from _route_problems(config)
    yield from _token_problems(config)
    yield from _destination_problems(config)
    if settings is not None:
        yield from _setting_problems(config, settings)
        yield from resolve_all(config.destinations, settings, os.environ)[1]


def _level_problems(levels: list[LevelConfig]) -> Iterator[tuple[str, str]]:
    seen: dict[str, int] = {}
    for index, level in enumerate(levels):
        place = f"levels[{index}]"
        if level.name in seen:
            yield f"{place}.name", f"{level.name!r} is the name of levels[{seen[level.name]}] too"
        seen.setdefault(level.name, index)
        if index == 0 and level.key is not None:
            yield f"{place}.key", "the first level is the root: it has no key (every event is counted there)"
        elif index == 0 and level.values:
            yield f"{place}.values", "the root has no key, so no values; give its rules in rules"
        elif index > 0 and level.key is None:
            yield f"{place}.key", f"missing: one of {', '.join(PLAIN_KEYS)} or field:NAME"
        elif level.key is not None and not valid_key(level.key):
            yield f"{place}.key", f"{level.key!r} is not one of {', '.join(PLAIN_KEYS)} or field:NAME"
        below = {other.name: other for other in levels[index + 1 :]}
        yield from _reserve_problems(f"{place}.reserves", level.reserves, below)
        for value, limits in level.values.items():
            if limits.reserves is not None:
                yield from _reserve_problems(f"{place}.values.{key_name(value)}.reserves", limits.reserves, below)


def _reserve_problems(place: str, reserves: Shares, below: dict[str, LevelConfig]) -> Iterator[tuple[str, str]]:
    for name in reserves:
        level, sep, _ = name.partition("=")
        if name == CRITICAL:
            continue
        if not sep:
            yield f"{place}.{key_name(name)}", "a reserve class is critical or LEVEL=VALUE, e.g. channel=#incidents"
        elif level not in below:
            yield f"{place}.{key_name(name)}", f"{level!r} is not a level below this one"
    total = sum(reserves.values(), Fraction(0))
    if total > 100:
        yield place, f"reserves add up to {format_share(total)}, more than 100%"


def _route_problems(config: Config) -> Iterator[tuple[str, str]]:
    for index, route in enumerate(config.routes):
        for key, pattern in route.match.items():
            place = f"routes[{index}].match.{key_name(key)}"
            if not valid_key(key):
                yield place, f"{key!r} is not one of {', '.join(PLAIN_KEYS)} or field:NAME"
            if (problem := patterns.problem(pattern)) is not None:
                yield place, problem
        if route.template is not None and route.template not in config.templates:
            yield f"routes[{index}].template", f"no template {route.template!r} in templates"


def _token_problems(config: Config) -> Iterator[tuple[str, str]]:
    owners: dict[str, str] = {}
    for name, token in config.tokens.items():
        if not CATEGORY_RE.fullmatch(name) or name in RESERVED_SOURCES or re.fullmatch(r"env-\d+", name):
            yield (
                f"tokens.{key_name(name)}",
                "a token's name is 1-64 of A-Z a-z 0-9 _ . : -, not anonymous, global or env-N",
            )
        digest = token.sha256.lower()
        if digest in owners:
            yield f"tokens.{key_name(name)}.sha256", f"the same hash as tokens.{key_name(owners[digest])}"
        owners.setdefault(digest, name)
    for name in config.templates:
        if not re.fullmatch(TEMPLATE_NAME, name):
            yield f"templates.{key_name(name)}", "a template's name is 1-64 of A-Z a-z 0-9 _ . -"


def _destination_problems(config: Config) -> Iterator[tuple[str, str]]:
    """Routes and tokens naming a destination there is not; a route with neither channel nor destination."""
    names = list(config.destinations) or ["slack", "console"]
    named = [(f"routes[{i}]", r.destination) for i, r in enumerate(config.routes)]
    named += [(f"tokens.{key_name(name)}", token.destination) for name, token in config.tokens.items()]
    for place, name in named:
        if name is not None and name not in names:
            yield f"{place}.destination", f"no destination {name!r} (known: {', '.join(names)})"
    for index, route in enumerate(config.routes):
        if route.channel is None and route.destination is None:
            yield f"routes[{index}]", "give a channel, a destination or both"


def _setting_problems(config: Config, settings: Settings) -> Iterator[tuple[str, str]]:
    given = settings.model_fields_set
    if config.levels is not None:
        for name in TREE_SETTINGS:
            if name in given:
                yield (
                    "levels",
                    f"{ENV_PREFIX}{name.upper()} is set too: give the tree in one place, the file or the environment",
                )
    for name in SLACK_SETTINGS if config.destinations else ():
        if name in given:
            yield "destinations", f"{ENV_PREFIX}{name.upper()} is set too: give the destinations in one place, the file"
    if config.routes and ROUTE_SETTINGS[0] in given:
        yield (
            "routes",
            f"{ENV_PREFIX}CATEGORY_CHANNELS is set too: give the routes in one place, the file or the environment",
        )
    if settings.categories is not None:
        named = [place for place, category in _categories_named(config) if category not in settings.categories]
        yield from ((place, f"{ENV_PREFIX}CATEGORIES does not name it: no event can have it") for place in named)


def _categories_named(config: Config) -> Iterator[tuple[str, str]]:
    """Every place that names a category, and the category: ``category=X`` reserves, the values of a
    level keyed by ``category``, a route's ``category``."""
    levels = config.levels or []
    keyed = {level.name for level in levels if level.key == "category"}
    for index, level in enumerate(levels):
        own = {f"values.{key_name(v)}.reserves": limits.reserves or {} for v, limits in level.values.items()}
        for part, reserves in {"reserves": level.reserves, **own}.items():
            for name in reserves:
                by, sep, value = name.partition("=")
                if sep and by in keyed:
                    yield f"levels[{index}].{part}.{key_name(name)}", value
        if level.key == "category":
            yield from ((f"levels[{index}].values.{key_name(value)}", value) for value in level.values)
    for index, route in enumerate(config.routes):
        if route.category is not None:
            yield f"routes[{index}].category", route.category


# Settings that do not shape what the gateway decides or sends: where it listens and how it
# reaches the store, its name, its logs, and secrets (a fingerprint is shown to anyone).
NOT_DECISIONS = frozenset(
    {
        "host",
        "port",
        "redis_url",
        "redis_sentinels",
        "redis_sentinel_master",
        "redis_timeout",
        "replica_id",
        "log_level",
        "config",
        "api_tokens",
        "slack_bot_token",
        "slack_webhook_url",
        "slack_signing_secret",
    }
)


def fingerprint(config: Config, settings: Settings) -> str:
    """The SHA-256 of what shapes decisions: the file's contents as read and the settings that matter."""
    shaping = {k: v for k, v in settings.model_dump(mode="json").items() if k not in NOT_DECISIONS}
    document = {"config": config.model_dump(mode="json"), "settings": shaping}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()
