"""The configuration file's reference, generated from the pydantic models of ``notifier/config.py``.

Each model (the file, a level, a value's limits, a route, ...) becomes a section: its docstring,
then a table of its keys with their type, default and description (the docstring under each field).
Parts the file refuses because their feature is not served yet (``config.NOT_YET``) are left out, and
so are the fields of such features in other parts (``LATER``); the change that serves one removes
its entry and the reference shows it. A key shown without a description is an error here.
"""

from __future__ import annotations

import json
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from ref_settings import MissingDescription

from notifier.config import NOT_YET, Config
from notifier.rules import Rule, rules_text

# Fields of features not served yet (model, field) -> the feature; refused or without effect today.
LATER: dict[tuple[str, str], str] = {}
# Type names as the file's reader knows them, by the parser that reads them.
NAMED = {"_rules": "rules (`COUNT/DURATION`, several separated by commas)", "_share": "share (`N%` or `N.N%`)"}


def _parser(metadata: list[Any]) -> str | None:
    for item in metadata:
        name = getattr(getattr(item, "func", None), "__name__", "")
        if name in NAMED:
            return NAMED[name]
    return None


def type_text(kind: Any, models: list[type[BaseModel]]) -> str:
    """A field's type in words; models met on the way are added to ``models`` (for their own section)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin is Annotated:
        return _parser(list(args[1:])) or type_text(args[0], models)
    if origin in (Union, types.UnionType):
        return " or ".join(type_text(a, models) for a in args if a is not type(None))
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (list, tuple):
        return "list of " + type_text(args[0], models)
    if origin is dict:
        return "mapping of name to " + type_text(args[1], models)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if kind not in models:
            models.append(kind)
        return f"[{kind.__name__}](#{kind.__name__.lower()})"
    return {str: "string", bool: "true or false", int: "integer"}.get(kind, getattr(kind, "__name__", str(kind)))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, tuple) and value and all(isinstance(v, Rule) for v in value):
        return f"`{rules_text(value)}`"
    if value is None:
        return "none"
    return f"`{json.dumps(value) if isinstance(value, (dict, list, tuple)) else value}`"


def _shown(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {
        name: field
        for name, field in model.model_fields.items()
        if not (model is Config and name in NOT_YET) and (model.__name__, name) not in LATER
    }


def _section(model: type[BaseModel], models: list[type[BaseModel]]) -> str:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in _shown(model).items():
        text = " ".join((field.description or "").split())
        if not text:
            raise MissingDescription(
                f"{model.__name__}.{name} has no description: write one as a docstring under it in notifier/config.py"
            )
        type_shown = _parser(field.metadata) or type_text(field.annotation, models)
        rows.append(f"| `{name}` | {type_shown} | {_default(field)} | {text} |")
    doc = " ".join((model.__doc__ or "").split()).replace("``", "`")
    return "\n".join([f"### {model.__name__} {{#{model.__name__.lower()}}}", "", doc, "", *rows, ""])


def config_markdown() -> str:
    """A section per part of the file, from the whole file down."""
    models: list[type[BaseModel]] = [Config]
    sections = []
    index = 0
    while index < len(models):  # sections add the models they meet
        sections.append(_section(models[index], models))
        index += 1
    return "\n".join(sections)
