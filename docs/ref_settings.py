"""The settings reference and ``settings.example.env``, both generated from the ``Settings`` model.

The docstring under each field of ``notifier.settings.Settings`` is its description (pydantic's
``use_attribute_docstrings``); a description may end with ``E.g. `VALUE```, the example shown for a
setting that is unset by default. A setting without a description is an error here, so neither the
docs nor the example file can be built without one.
"""

from __future__ import annotations

import json
import re
import textwrap
from fractions import Fraction
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from notifier.rules import Rule, format_duration, format_share, rules_text
from notifier.settings import ENV_PREFIX, Settings

EXAMPLE = re.compile(r"\s*E\.g\.\s*`([^`]+)`\.?\s*$")
ENV_HEADER = """\
# notifier settings. Every variable is optional; the value shown is the default.
# Use them as environment variables, or put them in a file: notifier serve --env-file FILE
# Generated from the descriptions in notifier/settings.py: PYTHONPATH=. python docs/reference.py settings.example.env
"""
# What a setting's value looks like, by the function that parses it.
FORMATS = {
    "_duration": "a duration: a number with unit `ms`, `s`, `m`, `h` or `d` (a bare number is seconds)",
    "parse_rules": "rules: `COUNT/DURATION`, several separated by commas",
    "_comma_list": "a comma list",
    "_json_object": "a JSON object",
    "_shares": "a JSON object of shares (`N%` or `N.N%`)",
    "parse_share": "a share: `N%` or `N.N%`",
    "_mute_choices": "a comma list of 1 to 5 durations",
    "_quiet_hours": "a JSON object",
    "parse_escalation": "a JSON object",
    "_severities": "a comma list of severities: `info`, `warning`, `error`, `critical`",
}


class MissingDescription(Exception):
    """A setting, route, field or command has nothing to say about itself."""


def env_name(name: str) -> str:
    """``redis_url`` -> ``NOTIFIER_REDIS_URL``."""
    return ENV_PREFIX + name.upper()


def description(name: str, field: FieldInfo) -> str:
    """The field's description on one line; :class:`MissingDescription` when it has none."""
    text = " ".join((field.description or "").split())
    if not text:
        raise MissingDescription(
            f"{env_name(name)} has no description: write one as a docstring under `{name}` in notifier/settings.py"
        )
    return text


def example(text: str) -> str | None:
    """The value of a trailing ``E.g. `VALUE``` in a description."""
    match = EXAMPLE.search(text)
    return match.group(1) if match else None


def _parser_names(field: FieldInfo) -> list[str]:
    return [getattr(getattr(m, "func", None), "__name__", "") for m in field.metadata]


def env_value(field: FieldInfo, value: Any) -> str:
    """``value`` as the variable is written: 1000 ms -> ``1s``, rules -> ``100/30m``, {} -> ``{}``."""
    if "_duration" in _parser_names(field) and isinstance(value, int):
        return format_duration(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Fraction):
        return format_share(value)
    if isinstance(value, tuple) and value and all(isinstance(v, Rule) for v in value):
        return rules_text(value)
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def value_format(field: FieldInfo) -> str:
    """What a value of the setting looks like, in words."""
    for parser in _parser_names(field):
        if parser in FORMATS:
            return FORMATS[parser]
    kind = field.annotation
    if get_origin(kind) is Literal:
        return "one of " + ", ".join(f"`{choice}`" for choice in get_args(kind))
    inner = [a for a in get_args(kind) if a is not type(None)] or [kind]
    if inner[0] is bool:
        return "`true` or `false`"
    if inner[0] is int:
        bounds = {type(m).__name__: m for m in field.metadata}
        ge, gt = bounds.get("Ge"), bounds.get("Gt")
        low = getattr(ge, "ge", None) if ge else getattr(gt, "gt", 0) + 1 if gt else None
        high = getattr(bounds.get("Le"), "le", None)
        return "an integer" + (f" from {low}" if low is not None else "") + (f" to {high}" if high is not None else "")
    return "text"


def _default(name: str, field: FieldInfo) -> str | None:
    value = field.get_default(call_default_factory=True)
    return None if value is None else env_value(field, value)


def env_file() -> str:
    """The text of ``settings.example.env``: every setting, its description and its default."""
    parts = [ENV_HEADER]
    for name, field in Settings.model_fields.items():
        text, default = description(name, field), _default(name, field)
        said = EXAMPLE.sub("", text) if default is None and example(text) else text  # the line shows it
        comment = "\n".join("# " + line for line in textwrap.wrap(said, 98, break_on_hyphens=False))
        line = f"# {env_name(name)}={example(text) or ''}" if default is None else f"{env_name(name)}={default}"
        parts.append(f"{comment}\n{line}\n")
    return "\n".join(parts)


def _linked(text: str) -> str:
    """Plain ``NOTIFIER_*`` names in a description become links to their entries (code spans stay)."""
    pieces = text.split("`")
    for index in range(0, len(pieces), 2):
        pieces[index] = re.sub(r"\bNOTIFIER_[A-Z_]+\b", lambda m: f"[`{m[0]}`](#{m[0].lower()})", pieces[index])
    return "`".join(pieces)


def settings_markdown() -> str:
    """The settings reference: a table of every setting, then an entry for each."""
    rows = ["| variable | default |", "|---|---|"]
    entries = []
    for name, field in Settings.model_fields.items():
        variable, text, default = env_name(name), description(name, field), _default(name, field)
        shown = "unset" if default is None else f"`{default}`" if default else "empty"
        rows.append(f"| [`{variable}`](#{variable.lower()}) | {shown} |")
        entries.append(
            f"### `{variable}` {{#{variable.lower()}}}\n\n{_linked(text)}\n\n"
            f"Default: {shown}. Value: {value_format(field)}.\n"
        )
    return "\n".join(rows) + "\n\n" + "\n".join(entries)
