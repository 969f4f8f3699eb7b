"""Secrets read from files: ``NOTIFIER_<NAME>_FILE`` for every secret setting.

Kubernetes and Docker mount secrets as files; an environment variable is visible to
every process that can read ``/proc/<pid>/environ`` and to anything that dumps the
environment. So each setting that holds a secret may instead name a file whose
content is the value (one trailing newline, as ``echo`` and ``kubectl create
secret --from-file`` leave it, is dropped). Giving both forms of one setting is an
error, as is a file that cannot be read or is empty; the error names the variable
and the file, never the content.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .errors import SettingsError

# The settings whose value is a secret (a token, a password in a URL, a signing key).
SECRETS = (
    "redis_url",
    "slack_bot_token",
    "slack_webhook_url",
    "slack_signing_secret",
    "slack_app_token",
    "control_secret",
    "api_tokens",
)
SUFFIX = "_FILE"
MAX_SECRET = 64 * 1024  # bytes: a secret file larger than this is a mistake (a wrong path)


def file_variables(prefix: str) -> frozenset[str]:
    """Every ``NOTIFIER_<NAME>_FILE`` name there is."""
    return frozenset(f"{prefix}{name.upper()}{SUFFIX}" for name in SECRETS)


def read_secret_files(prefix: str, given: Mapping[str, str]) -> dict[str, str]:
    """Setting name -> the content of its file, for each ``<PREFIX><NAME>_FILE`` in ``given``."""
    values = {}
    for name in SECRETS:
        variable = f"{prefix}{name.upper()}"
        path = given.get(variable + SUFFIX)
        if not path:
            continue
        if given.get(variable):
            raise SettingsError(f"invalid setting {variable}: give {variable} or {variable}{SUFFIX}, not both")
        values[name] = read_secret(variable + SUFFIX, path)
    return values


def read_secret(variable: str, path: str) -> str:
    """The content of the secret file at ``path`` (one trailing newline dropped); ``variable`` names it in errors."""
    try:
        raw = Path(path).read_bytes()[: MAX_SECRET + 1]
    except OSError as exc:
        raise SettingsError(f"invalid setting {variable}: cannot read {path} ({exc.strerror})") from None
    if len(raw) > MAX_SECRET:
        raise SettingsError(f"invalid setting {variable}: {path} is over {MAX_SECRET} bytes")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise SettingsError(f"invalid setting {variable}: {path} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SettingsError(f"invalid setting {variable}: {path} is empty")
    return text
