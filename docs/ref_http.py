"""The HTTP reference, generated from the gateway's OpenAPI document (``notifier.http.openapi.spec()``).

Every path and method becomes an entry (summary, who may call it, parameters, body, answers), and
every schema of ``components`` a table of its fields. An operation without a summary, or an answer
without a description, is an error here.
"""

from __future__ import annotations

from typing import Any

from ref_settings import MissingDescription

from notifier.http.openapi import spec

Doc = dict[str, Any]
METHODS = ("get", "post", "put", "delete", "patch")
# Routes the gateway serves outside the API: the console's page and its files.
OUTSIDE_OPENAPI = {
    ("GET", "/"): "The operator console, in a browser (see [The console](../operations/console.md)).",
    (
        "GET",
        "/{asset}",
    ): "The console's files: `/favicon.ico`, `/console/*.js`, `/console/*.css`, shipped in the package.",
}
# Served for every other path and method: a JSON 404 or 405.
CATCH_ALL = ("*", "/{path}")


def anchor(method: str, path: str) -> str:
    """The anchor of an operation's entry: ``POST /v1/events`` -> ``post-v1events``."""
    return method.lower() + "-" + "".join(c for c in path.lower() if c.isalnum() or c == "-")


def operations(document: Doc | None = None) -> list[tuple[str, str, Doc]]:
    """(method, path, operation) of every operation in the document, in its order."""
    paths = (document or spec())["paths"]
    return [(m.upper(), path, item[m]) for path, item in paths.items() for m in METHODS if m in item]


def schema_type(schema: Doc) -> str:
    """A schema in a few words: ``string``, ``list of [Link](#link)``, ``Dropped or Problem``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            kinds = [schema_type(s) for s in schema[combined] if s.get("type") != "null"]
            nullable = len(kinds) < len(schema[combined])
            return " or ".join(kinds) + (" or null" if nullable else "")
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return "list of " + schema_type(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map of " + schema_type(schema["additionalProperties"])
    return f"{kind}{_limits(schema)}"


def _limits(schema: Doc) -> str:
    shown = [
        f"{word} {schema[key]}"
        for key, word in (
            ("minLength", "min length"),
            ("maxLength", "max length"),
            ("minimum", "min"),
            ("maximum", "max"),
            ("maxItems", "at most"),
            ("maxProperties", "at most"),
        )
        if key in schema
    ]
    if "pattern" in schema:
        shown.append(f"pattern `{schema['pattern']}`")
    return f" ({', '.join(shown)})" if shown else ""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _parameters(item: Doc, operation: Doc) -> list[str]:
    given = item.get("parameters", []) + operation.get("parameters", [])
    if not given:
        return []
    rows = ["| parameter | in | type | meaning |", "|---|---|---|---|"]
    for p in given:
        rows.append(
            f"| `{p['name']}` | {p['in']} | {schema_type(p.get('schema', {}))} | {_cell(p.get('description', ''))} |"
        )
    return [*rows, ""]


def _body(operation: Doc) -> list[str]:
    body = operation.get("requestBody")
    if not body:
        return []
    parts = [f"`{kind}`: {schema_type(c.get('schema', {}))}" for kind, c in body["content"].items()]
    return [("Body" if body.get("required") else "Body (optional)") + ": " + "; ".join(parts) + ".", ""]


def _answers(method: str, path: str, operation: Doc) -> list[str]:
    rows = ["| status | when | body | headers |", "|---|---|---|---|"]
    for status, answer in sorted(operation["responses"].items()):
        if not answer.get("description"):
            raise MissingDescription(f"{method} {path}: answer {status} has no description in the OpenAPI document")
        body = "; ".join(schema_type(c.get("schema", {})) for c in answer.get("content", {}).values())
        headers = ", ".join(f"`{h}`" for h in answer.get("headers", {}))
        rows.append(f"| `{status}` | {_cell(answer['description'])} | {body} | {headers} |")
    return [*rows, ""]


def _entry(method: str, path: str, item: Doc, operation: Doc) -> str:
    summary = operation.get("summary")
    if not summary:
        raise MissingDescription(f"{method} {path} has no summary in the OpenAPI document")
    token = any("bearer" in s for s in operation.get("security", []))
    lines = [f"### `{method} {path}` {{#{anchor(method, path)}}}", "", summary + ".", ""]
    if token:
        lines += ["With `NOTIFIER_API_TOKENS` set, it needs `Authorization: Bearer <token>`.", ""]
    lines += _parameters(item, operation) + _body(operation) + _answers(method, path, operation)
    return "\n".join(lines)


def _schema(name: str, schema: Doc) -> str:
    lines = [f"### {name} {{#{name.lower()}}}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].replace("``", "`").split()), ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, sub in properties.items():
            meaning = _cell(sub.get("description", ""))
            if "default" in sub and sub["default"] not in (None, [], {}):
                meaning = (meaning + f" (default `{sub['default']}`)").strip()
            lines.append(f"| `{field}` | {schema_type(sub)} | {'yes' if field in required else ''} | {meaning} |")
    else:
        lines.append(f"{schema_type(schema)}.")
    return "\n".join(lines) + "\n"


def http_markdown() -> str:
    """The routes table, an entry per operation, then the schemas of the bodies."""
    document = spec()
    table = ["| route | what it does |", "|---|---|"]
    entries = []
    for method, path, operation in operations(document):
        entries.append(_entry(method, path, document["paths"][path], operation))
        table.append(f"| [`{method} {path}`](#{anchor(method, path)}) | {_cell(operation.get('summary', ''))} |")
    for (method, path), what in OUTSIDE_OPENAPI.items():
        table.append(f"| `{method} {path}` | {what} |")
    schemas = [_schema(name, s) for name, s in sorted(document["components"]["schemas"].items())]
    return "\n".join([*table, "", "## Routes", "", *entries, "## Bodies", "", *schemas])
