"""Where in the configuration file a problem is, and what it is, in one line a reader can act on.

pydantic reports ``('levels', 2, 'rules')`` and its own wording; the file's
problems read ``levels[2].rules: ...`` in the project's words, and never quote a
value that may be a secret.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def key_name(key: object) -> str:
    """A mapping key as a place name shows it: plain, or quoted when it holds more than a name."""
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_\-]+", text) else json.dumps(text, ensure_ascii=False)  # one line


def place_of(loc: tuple[int | str, ...]) -> str:
    """``('levels', 2, 'rules')`` -> ``levels[2].rules``; ``('tokens', 'ci', 'sha256')`` -> ``tokens.ci.sha256``."""
    place = ""
    for part in loc:
        place += f"[{part}]" if isinstance(part, int) else f".{key_name(part)}" if place else key_name(part)
    return place or "(top)"


_PATTERNS = {  # what a value of each field must look like, for the line about one that does not
    "name": "a level's name is 1-32 of a-z 0-9 _, starting with a letter",
    "sha256": "not 64 hex digits: give the SHA-256 of the token, e.g. from `notifier token new`",
    "category": "a category is 1-64 of A-Z a-z 0-9 _ . : -",
}


def message_of(error: Any, shapes: Mapping[tuple[str, ...], type[BaseModel]]) -> str:
    """pydantic's error as one line of the project's (``shapes``: the models by place, for unknown keys)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "string_pattern_mismatch" and error["loc"][-1] == "sha256":
        return _PATTERNS["sha256"]  # not the value: a token pasted here by mistake stays off the console
    if error["type"] == "string_pattern_mismatch" and error["loc"][-1] in _PATTERNS:
        return f"{error['input']!r}: {_PATTERNS[error['loc'][-1]]}"
    if error["type"] == "extra_forbidden":
        known = _known_keys(error["loc"][:-1], shapes)
        return "unknown key" + (f" (known: {', '.join(known)})" if known else "")
    if error["type"] == "missing":
        return "missing"
    return message


def _known_keys(loc: tuple[int | str, ...], shapes: Mapping[tuple[str, ...], type[BaseModel]]) -> list[str]:
    """The keys the mapping at ``loc`` may have, for the message about one it may not."""
    for shape, model in shapes.items():
        if len(shape) == len(loc) and all(
            s == "*" or ((s == "[]") == isinstance(p, int) and (s == "[]" or s == p))
            for s, p in zip(shape, loc, strict=True)
        ):
            return list(model.model_fields)
    return []
