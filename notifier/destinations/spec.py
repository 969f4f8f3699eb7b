"""The ``destinations`` section of the configuration file: its schema, its secrets, its checks.

A destination is a named place messages go: a Slack workspace (``slack``), or one
webhook of a chat (``slack-webhook``, ``teams``, ``discord``, ``mattermost``,
``google-chat``: one channel each). Without the section there is one, ``slack``,
from the ``NOTIFIER_SLACK_*`` settings (or ``console`` with none), as before.

Secrets are resolved here, once: ``${NAME}`` from the environment, or ``*_file``
(the file's content, a trailing newline dropped). A secret written in the file
itself is a problem: the file is read by ``check-config``, kept in ConfigMaps and
shown in reviews. Resolved secrets are pydantic ``SecretStr`` values, shown as
``**********`` by ``repr``, logs and errors; no message here quotes one.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from ..errors import SettingsError
from ..rules import Rules, parse_rules
from ..secret_files import read_secret
from ..settings import Settings

Kind = Literal["slack", "slack-webhook", "teams", "discord", "mattermost", "google-chat"]
NAME = r"^[a-z][a-z0-9_-]{0,31}$"  # no ':': a channel value is DESTINATION:CHANNEL
SECRETS = ("bot_token", "app_token", "signing_secret", "url")
SLACK_ONLY = ("bot_token", "app_token", "signing_secret", "api_url", "channel")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# The hosts a kind's webhooks live on (None: any host, e.g. a self-hosted Mattermost or Teams' Workflows).
HOSTS: dict[str, re.Pattern[str] | None] = {
    "slack-webhook": re.compile(r"hooks\.slack\.com"),
    "discord": re.compile(r"(?:ptb\.|canary\.)?discord(?:app)?\.com"),
    "google-chat": re.compile(r"chat\.googleapis\.com"),
    "teams": None,
    "mattermost": None,
}
LOOPBACK_NAMES = ("localhost",)


def _rules(value: object) -> Rules:
    if not isinstance(value, (str, int)):
        raise ValueError("must be rules written COUNT/DURATION, e.g. 1/1s or 5/2s,30/1m")
    return parse_rules(str(value))


class DestinationConfig(BaseModel):
    """One destination: its kind, its credentials (by ``${NAME}`` or ``*_file``), its channel and pace."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: Kind
    """`slack` (a workspace, by bot token), `slack-webhook`, `teams` (a Workflows webhook), `discord`, `mattermost`,
    `google-chat` (a space's webhook)."""
    bot_token: str | None = None
    """slack: the bot token, as `${VARIABLE}` (never the token itself)."""
    bot_token_file: str | None = None
    """slack: a file holding the bot token."""
    app_token: str | None = None
    """slack: an app-level token (`${VARIABLE}`) for Socket Mode in this workspace."""
    app_token_file: str | None = None
    """slack: a file holding the app-level token."""
    signing_secret: str | None = None
    """slack: the app's signing secret (`${VARIABLE}`), for clicks at /v1/slack/actions."""
    signing_secret_file: str | None = None
    """slack: a file holding the signing secret."""
    url: str | None = None
    """Webhook kinds: the webhook's URL, as `${VARIABLE}` (it holds the hook's key)."""
    url_file: str | None = None
    """Webhook kinds: a file holding the webhook's URL."""
    channel: str | None = Field(None, min_length=1, max_length=200)
    """slack: where an event no route names a channel for goes (a name such as `#alerts`, or an ID)."""
    rate: Annotated[Rules, BeforeValidator(_rules)] | None = None
    """The pace per channel, instead of the kind's documented one: `COUNT/DURATION`, several separated by commas."""
    api_url: str | None = None
    """slack: the Web API's base URL (a proxy, a test); NOTIFIER_SLACK_API_URL when not given."""


@dataclass(frozen=True)
class Destination:
    """A destination as the gateway runs it: secrets resolved (``SecretStr``: never shown)."""

    name: str
    kind: str  # a Kind, or "console" (no credentials at all)
    channel: str  # the default channel; a webhook kind's name stands for its one channel
    rate: Rules | None = None  # None: the kind's own
    bot_token: SecretStr | None = None
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    url: SecretStr | None = None
    api_url: str = "https://slack.com/api/"

    @property
    def one_channel(self) -> bool:
        """True for a webhook: the chat fixes the channel; the destination's name stands for it."""
        return self.kind not in ("slack", "console")


def from_settings(settings: Settings) -> Destination:
    """The one destination of a gateway with no ``destinations`` section: ``slack`` (or ``console``)."""
    kind = "slack" if settings.slack_bot_token else "slack-webhook" if settings.slack_webhook_url else "console"
    return Destination(
        name="console" if kind == "console" else "slack",
        kind=kind,
        channel=settings.slack_channel or "default",
        bot_token=_hidden(settings.slack_bot_token),
        app_token=_hidden(settings.slack_app_token),
        signing_secret=_hidden(settings.slack_signing_secret),
        url=_hidden(settings.slack_webhook_url),
        api_url=settings.slack_api_url,
    )


def destinations_of(specs: Mapping[str, DestinationConfig], settings: Settings) -> list[Destination]:
    """The destinations the gateway runs: the file's (checked when it was read), else the settings' one."""
    if not specs:
        return [from_settings(settings)]
    found, problems = resolve_all(specs, settings, os.environ)
    if problems:  # a secret's file changed since the file was checked
        raise SettingsError("; ".join(f"{place}: {why}" for place, why in problems))
    return found


def _hidden(value: str | None) -> SecretStr | None:
    return SecretStr(value) if value else None


def resolve_all(
    specs: Mapping[str, DestinationConfig], settings: Settings, environ: Mapping[str, str]
) -> tuple[list[Destination], list[tuple[str, str]]]:
    """Every destination with its secrets read, and the problems found (place, why), in the file's order."""
    found, problems = [], []
    for name, spec in specs.items():
        place = f"destinations.{name}"
        if not re.fullmatch(NAME, name):
            problems.append((place, "a destination's name is 1-32 of a-z 0-9 _ -, starting with a letter"))
            continue
        own = list(_spec_problems(place, spec))
        secrets = {field: _secret(place, field, spec, environ, own) for field in SECRETS}
        problems += own
        if not own:
            found.append(_destination(name, spec, secrets, settings))
    return found, problems


def _destination(
    name: str, spec: DestinationConfig, secrets: dict[str, SecretStr | None], settings: Settings
) -> Destination:
    channel = spec.channel if spec.kind == "slack" and spec.channel else name
    return Destination(name, spec.kind, channel, spec.rate, api_url=spec.api_url or settings.slack_api_url, **secrets)


def _spec_problems(place: str, spec: DestinationConfig) -> Iterator[tuple[str, str]]:
    if spec.kind != "slack":
        for field in SLACK_ONLY:
            if getattr(spec, field) is not None or getattr(spec, f"{field}_file", None) is not None:
                yield f"{place}.{field}", f"only a destination of kind slack has one (this one is {spec.kind})"
    if spec.rate is not None and any(rule.count < 1 for rule in spec.rate):
        yield f"{place}.rate", "a pace's every rule lets at least 1 message through (e.g. 1/1s): 0 would never send"
    needed = "bot_token" if spec.kind == "slack" else "url"
    if getattr(spec, needed) is None and getattr(spec, f"{needed}_file") is None:
        yield f"{place}.{needed}", f"missing: give {needed}: ${{VARIABLE}} or {needed}_file: PATH"
    if spec.kind == "slack" and spec.channel is None:
        yield f"{place}.channel", "missing: the channel events go to when no route names one"
    if spec.kind != "slack" and spec.url is not None and spec.url_file is not None:
        yield f"{place}.url", "give url or url_file, not both"
    for field in ("bot_token", "app_token", "signing_secret"):
        if getattr(spec, field) is not None and getattr(spec, f"{field}_file") is not None:
            yield f"{place}.{field}", f"give {field} or {field}_file, not both"


def _secret(
    place: str, field: str, spec: DestinationConfig, environ: Mapping[str, str], problems: list[tuple[str, str]]
) -> SecretStr | None:
    """The secret ``field`` of ``spec``, from ``${NAME}`` or its file; a problem appended when it cannot be read."""
    given, path = getattr(spec, field), getattr(spec, f"{field}_file")
    if given is None and path is None:
        return None
    try:
        value = read_secret(f"{place}.{field}_file", path) if path is not None else _expand(given, environ)
    except (SettingsError, KeyError, ValueError) as exc:
        problems.append((f"{place}.{field}" + ("_file" if path is not None else ""), _why(exc)))
        return None
    if field == "url" and (problem := url_problem(spec.kind, value)) is not None:
        problems.append((f"{place}.{field}" + ("_file" if path is not None else ""), problem))
    return SecretStr(value)


def _expand(text: str, environ: Mapping[str, str]) -> str:
    """``text`` with each ``${NAME}`` replaced by the variable's value (KeyError: unset or empty)."""
    if not _VARIABLE.search(text):
        raise ValueError("a secret is never written in the file: give ${VARIABLE}, or the _file form")

    def value(match: re.Match[str]) -> str:
        if not environ.get(match[1]):
            raise KeyError(match[1])
        return environ[match[1]]

    return _VARIABLE.sub(value, text)


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"${{{exc.args[0]}}}: the variable {exc.args[0]} is not set (or empty)"
    if isinstance(exc, SettingsError):  # "invalid setting <place>_file: <why>": the place is said already
        return str(exc).removeprefix("invalid setting ").split(": ", 1)[-1]
    return str(exc)


def url_problem(kind: str, url: str) -> str | None:
    """Why ``url`` is not a webhook of ``kind`` (never quoting it: it holds the hook's key), or None."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        return "not a URL"
    if parts.scheme in ("http", "https") and _loopback(host):
        return None  # a local proxy or a test's stand-in
    if parts.scheme != "https" or not host:
        return "not an https:// URL (or http:// to a loopback address)"
    expected = HOSTS.get(kind)
    if expected is not None and not expected.fullmatch(host):
        return f"not a {kind} webhook URL (its host should match {expected.pattern.replace(chr(92), '')})"
    return None


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
