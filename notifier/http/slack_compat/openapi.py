"""The front doors' part of ``/openapi.json``: Slack's incoming webhook and Web API, as served here.

The bodies are described by the models below (what the doors read; the doors' own
reading is ``payload.py``, which also takes booleans written as ``"true"``/``"1"`` and
JSON strings in forms). Errors come in Slack's shapes: the webhook's are ``text/plain``
codes with a status; the Web API's are HTTP 200 with ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .answers import OUTCOME, WEBHOOK_STATUS
from .shape import MAX_TEXT

Doc = dict[str, Any]
Flag = bool | Literal["true", "false", "1", "0", ""]


class SlackMessage(BaseModel):
    """A message as Slack's clients send it (fields Slack does not know are ignored)."""

    model_config = ConfigDict(extra="allow")

    text: str | None = Field(None, max_length=MAX_TEXT, description="mrkdwn; or blocks, or attachments")
    blocks: list[dict[str, Any]] | str | None = Field(None, description="Block Kit blocks (a JSON string in forms)")
    attachments: list[dict[str, Any]] | str | None = Field(None, description="legacy attachments, blocks inside too")
    channel: str | None = Field(None, description="else the route's, else the default channel")
    thread_ts: str | None = Field(None, description="a reply: a gateway ts or Slack's own")
    reply_broadcast: Flag | None = None
    mrkdwn: Flag | None = None
    unfurl_links: Flag | None = None
    unfurl_media: Flag | None = None
    link_names: Flag | None = None
    username: str | None = None
    icon_emoji: str | None = None
    icon_url: str | None = None
    parse: str | None = None
    metadata: dict[str, Any] | str | None = None


class SlackUpdate(SlackMessage):
    """``chat.update``: the message named by ``channel`` and ``ts`` takes the new content."""

    ts: str = Field(description="the ts chat.postMessage answered (or Slack's own)")


class WebApiAnswer(BaseModel):
    """Every Web API answer: ``ok``, and ``error`` when it is false."""

    model_config = ConfigDict(extra="allow")

    ok: bool
    error: str | None = None
    channel: str | None = None
    ts: str | None = None


def _text(description: str, codes: list[str] | None = None) -> Doc:
    schema: Doc = {"type": "string", "enum": codes} if codes else {"type": "string"}
    return {"description": description, "content": {"text/plain": {"schema": schema}}}


def _json(description: str, schema: Doc, retry: bool = False) -> Doc:
    answer: Doc = {"description": description, "content": {"application/json": {"schema": schema}}}
    if retry:
        answer["headers"] = {"Retry-After": {"required": True, "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
    return answer


def _codes(status: int) -> list[str]:
    return [code for code, answered in WEBHOOK_STATUS.items() if answered == status]


def _schema(model: type[BaseModel]) -> Doc:
    return model.model_json_schema(mode="validation")


FORM_FIELDS: Doc = {"type": "object", "additionalProperties": {"type": "string"}}
OUTCOME_HEADER = {OUTCOME: {"description": "accepted, or dropped: refused by the limits (counted, digested)"}}
API_ANSWER = _json("Slack's answer: ok, or ok false with error (not_authed, invalid_auth, ...)", _schema(WebApiAnswer))


def _body(json: Doc, form: Doc) -> Doc:
    """A body as JSON or as a form."""
    return {
        "required": True,
        "content": {"application/json": {"schema": json}, "application/x-www-form-urlencoded": {"schema": form}},
    }


def _webhook() -> Doc:
    form = {"type": "object", "properties": {"payload": {"type": "string", "description": "the message as JSON"}}}
    ok = {**_text("ok: posted, or refused by the limits (see the header)", ["ok"]), "headers": OUTCOME_HEADER}
    return {
        "summary": "Slack's incoming webhook; the secret is a token with scope send",
        "requestBody": _body(_schema(SlackMessage), form),
        "responses": {
            "200": ok,
            "400": _text("the message cannot be read or Slack would refuse it", _codes(400)),
            "403": _text("the token may not send, or not to that channel", _codes(403)),
            "404": {
                **_text("unknown secret", _codes(404)),
                "content": {
                    "text/plain": {"schema": {"type": "string"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            },
            "413": _text("body over 64 KiB", ["request_too_large"]),
            "429": _json("refused by the limits, for a token with refusal 429", _schema(WebApiAnswer), retry=True),
            "503": {**_text("store unreachable; nothing was counted", ["service_unavailable"]), "headers": {}},
        },
    }


def _web_api(model: type[BaseModel], summary: str) -> Doc:
    return {
        "summary": summary,
        "security": [{}, {"bearer": []}],
        "requestBody": _body(_schema(model), FORM_FIELDS),
        "responses": {
            "200": {**API_ANSWER, "headers": OUTCOME_HEADER},
            "413": _json("body over 64 KiB", _schema(WebApiAnswer)),
            "429": _json("refused by the limits, for a token with refusal 429", _schema(WebApiAnswer), retry=True),
            "503": _json("store unreachable; nothing was counted", _schema(WebApiAnswer), retry=True),
        },
    }


def front_door_paths() -> Doc:
    """The paths of the Slack-compatible front doors."""
    return {
        "/services/{a}/{b}/{secret}": {
            "parameters": [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in "ab"]
            + [{"name": "secret", "in": "path", "required": True, "schema": {"type": "string"}}],
            "post": _webhook(),
        },
        "/api/chat.postMessage": {"post": _web_api(SlackMessage, "Post a message; answered at once with a gateway ts")},
        "/api/chat.update": {"post": _web_api(SlackUpdate, "Edit a message (within NOTIFIER_UPDATE_RATE)")},
        "/api/auth.test": {"post": _web_api(WebApiAnswer, "Who the token is")},
        "/api/{method}": {
            "parameters": [{"name": "method", "in": "path", "required": True, "schema": {"type": "string"}}],
            "post": {
                "summary": "Any other Web API method: Slack's unknown_method",
                "responses": {"404": _json("not a method the gateway serves", _schema(WebApiAnswer))},
            },
        },
    }
