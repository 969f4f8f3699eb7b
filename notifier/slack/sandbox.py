"""The Jinja2 sandbox message templates run in: values escaped for Slack where they are put.

Templates are compiled in Jinja2's ``ImmutableSandboxedEnvironment`` (no attribute
of Python objects, no mutation of what they are given) with ``StrictUndefined`` (a
missing value is a failure, never ``<no value>``). On top of the sandbox:

* Every value a template puts (``{{ ... }}``) is escaped for Slack (``&``, ``<``,
  ``>``) by the environment's ``finalize``, so no event can mention anyone or
  inject a link; what the template's author wrote around it is the author's, a
  ``<https://...|text>`` link or ``<!here>`` included. ``link(url, text)`` builds a
  link from values (a :class:`SlackText`, put as it is). Strings under ``url`` and
  ``image_url`` keys are URLs, not text: put as they are, checked once rendered.
* What the published sandbox escapes reach for is refused when a template is
  compiled: attributes starting with ``_``, ``str.format`` and ``format_map``
  (also refused at run time, however they are reached), the ``attr`` filter, and
  ``include``/``import``/``extends``. Filters that make HTML or printf formatting,
  and ``lipsum``, are not there.

Time and memory are bounded by the process templates compile and render in
(:mod:`notifier.slack.renderer`), not here: no check inside a template stops a
loop that runs away, and Jinja2 evaluates constant expressions while compiling.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..models import MAX_URL, URL_PATTERN
from .messages import escape

URL_KEYS = frozenset({"url", "image_url"})  # strings there are URLs: put as they are, checked once rendered
UNSAFE = frozenset({"format", "format_map"})  # str methods the published escapes go through
NOT_HERE = (
    "attr",
    "e",
    "escape",
    "forceescape",
    "format",
    "pprint",
    "random",
    "safe",
    "striptags",
    "urlize",
    "xmlattr",
)
RENDERED = 1_000_000  # characters a template may render in all (Slack takes ~190,000 in one message)
_URL = re.compile(URL_PATTERN)
_SOURCES = ("{{", "{%", "{#")  # a string with none of these renders as itself


class SlackText(str):
    """Text the gateway made for Slack from values (``link()``): put as it is, not escaped again."""


def is_url(value: object) -> bool:
    """True for an absolute http(s) URL Slack takes as a link or a button's ``url``."""
    return isinstance(value, str) and len(value) <= MAX_URL and bool(_URL.fullmatch(value))


def link(url: object, text: object = None) -> SlackText:
    """``<url|text>`` from values: the text escaped, the URL kept to one link; only the text if it is no http(s) URL."""
    target, label = str(url), escape(str(url if text is None or text == "" else text))
    if not is_url(target):
        return SlackText(label)
    target = target.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    return SlackText(f"<{target}|{label}>")


def _escaped(value: object) -> str:
    if type(value) is SlackText:
        return value
    return "" if value is None else escape(str(value))


def _as_is(value: object) -> str:
    return "" if value is None else str(value)


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox, without ``str.format`` and ``format_map`` however they are reached."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return attr not in UNSAFE and super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> None:
        """No sandboxed ``str.format`` either (Jinja2 offers one when ``format`` is looked up): none at all."""
        return None


def _environment(finalize: Callable[[object], str]) -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, finalize=finalize, autoescape=False, keep_trailing_newline=True)
    for name in NOT_HERE:
        env.filters.pop(name, None)
    env.globals.pop("lipsum", None)
    env.globals["link"] = link
    return env


TEXT, URLS = _environment(_escaped), _environment(_as_is)


@dataclass(frozen=True)
class Problem:
    """A string of a template that does not compile: where (``blocks[1].text.text``) and why, with its line."""

    place: str
    message: str


@dataclass
class Compiled:
    """A template compiled: its text, its blocks (the same shape, strings compiled), the fields it names."""

    text: object
    blocks: object
    fields: set[str] = field(default_factory=set)  # fields.NAME it reads: a sample event has them


def compile_template(text: str, blocks: list[dict[str, Any]] | None) -> tuple[Compiled, list[Problem]]:
    """Compile every string of a template; the problems of those that do not compile (then unusable)."""
    compiled = Compiled(None, None)
    problems: list[Problem] = []
    compiled.text = _compile(text, "text", TEXT, compiled, problems)
    compiled.blocks = _compile(blocks or [], "blocks", TEXT, compiled, problems)
    return compiled, problems


def _compile(value: object, place: str, env: _Sandbox, into: Compiled, problems: list[Problem]) -> object:
    if isinstance(value, dict):
        return {
            k: _compile(v, f"{place}.{k}", URLS if k in URL_KEYS else env, into, problems) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_compile(v, f"{place}[{i}]", env, into, problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or not any(mark in value for mark in _SOURCES):
        return value
    try:
        tree = env.parse(value)
        _refuse(tree)
        into.fields.update(_fields(tree))
        return env.from_string(tree)
    except TemplateSyntaxError as exc:
        problems.append(Problem(place, f"line {exc.lineno}: {exc.message}"))
        return value


def _refuse(tree: nodes.Template) -> None:
    """Raise for what the published sandbox escapes reach for, so such a template never starts."""
    for other in tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
        raise TemplateSyntaxError("a template cannot extend, include or import another", other.lineno)
    for _, name, line in _lookups(tree):
        if isinstance(name, str) and (name.startswith("_") or name in UNSAFE):
            raise TemplateSyntaxError(f"{name!r} is not allowed in a template (the sandbox refuses it)", line)


def _fields(tree: nodes.Template) -> Iterator[str]:
    """The names of ``fields.NAME`` and ``fields["NAME"]`` in ``tree``."""
    for inside, name, _ in _lookups(tree):
        if isinstance(inside, nodes.Name) and inside.name == "fields" and isinstance(name, str):
            yield name


def _lookups(tree: nodes.Template) -> Iterator[tuple[nodes.Expr, object, int]]:
    """Every ``x.name`` and ``x["name"]`` in ``tree``: what is looked into, the name (None: computed), the line."""
    for attribute in tree.find_all(nodes.Getattr):
        yield attribute.node, attribute.attr, attribute.lineno
    for item in tree.find_all(nodes.Getitem):
        yield item.node, getattr(item.arg, "value", None), item.lineno


def render(compiled: Compiled, context: dict[str, Any]) -> tuple[str, list[Any]]:
    """The text and blocks ``compiled`` makes for ``context``; raises whatever the template raises.

    Beyond :data:`RENDERED` characters in all, a ``ValueError``: the rest is left to the process's bounds.
    """
    text = str(_render(compiled.text, context))
    blocks = _render(compiled.blocks, context)
    if _size(text) + _size(blocks) > RENDERED:
        raise ValueError(f"rendered more than {RENDERED:,} characters")
    return text, blocks if isinstance(blocks, list) else []


def _render(value: object, context: dict[str, Any]) -> object:
    if isinstance(value, Template):
        return value.render(context)
    if isinstance(value, dict):
        return {k: _render(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, context) for v in value]
    return value


def _size(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(_size(v) for v in value)
    return 1
