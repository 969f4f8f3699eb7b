"""``notifier token new``: a new random bearer token, and its line for ``tokens:`` in the configuration file.

The token itself is printed once and kept nowhere: the file holds only its
SHA-256, so whoever reads the file (or a fingerprint of it) cannot send with it.
The line is checked as the gateway checks the file, so what is printed starts.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any, NamedTuple

import yaml

from .config import parse_config

TOKEN_BYTES = 32  # of randomness: 43 URL-safe characters
PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class NewToken(NamedTuple):
    """A token as given to its client, and the line that names it under ``tokens:``."""

    token: str
    line: str


def new_token(
    name: str, scopes: list[str], channels: list[str], mentions: bool = False, refusal: str = "ok"
) -> NewToken:
    """A random token for ``name``; :class:`~notifier.errors.ConfigError` when the entry would be refused."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    entry: dict[str, Any] = {"sha256": hashlib.sha256(token.encode()).hexdigest(), "scopes": scopes}
    if channels:
        entry["channels"] = channels
    if mentions:
        entry["mentions"] = True
    if refusal != "ok":
        entry["refusal"] = refusal
    parse_config({"tokens": {name: entry}}, "the new token")
    return NewToken(token, f"  {_yaml_key(name)}: {json.dumps(entry)}")  # JSON is YAML: one line, quoted


def _yaml_key(name: str) -> str:
    """``name`` as a YAML key: plain where YAML reads it back as the same text, else quoted."""
    return name if PLAIN_NAME.fullmatch(name) and yaml.safe_load(name) == name else json.dumps(name)


def comma_list(text: str) -> list[str]:
    """``send, read`` -> ``["send", "read"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]
