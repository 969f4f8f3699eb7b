"""Reading a YAML file strictly: PyYAML's safe loader, and a key given twice in one mapping is a
problem, not a silent "last one wins". Every problem is a :class:`ConfigError` line naming the
file and the line and column."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


def read_yaml(path: str | Path) -> object:
    """The document in the file at ``path``, as the safe loader builds it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read the configuration file: {exc}"]) from exc
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: {_yaml_problem(exc)}"]) from exc


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`, merged by the safe loader
                continue
            key = self.construct_object(key_node, deep=deep)
            problem = "" if isinstance(key, Hashable) else "a key must be a plain value, not a list or a mapping"
            problem = problem or (f"key {key!r} is given twice in one mapping" if key in seen else "")
            if problem:
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else f"not YAML: {problem}"
