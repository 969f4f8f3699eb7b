"""Reading what Slack's clients send: the body, its fields as real clients write them, the message.

Bodies come as JSON (any charset) or as forms: the webhook's ``payload=`` field holding
the JSON (Slack's documented ``curl`` form), the Web API's fields with ``blocks``,
``attachments`` and ``metadata`` as JSON strings (what ``@slack/web-api`` sends). As
real clients write them, an empty string is an absent field and ``"true"``, ``"1"``,
``"false"``, ``"0"`` are booleans; fields Slack does not know are ignored, as Slack
ignores them. What is wrong is a :class:`SlackError` with Slack's own code; which
HTTP answer a code gets is each door's (``answers.py``).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import orjson

from .shape import MAX_TEXT, attachment_problems, block_problems

JSON, FORM = "application/json", "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 100
TEXT_LIMIT = 3000  # characters of an event's text: the plain rendering is cut there
STRINGS = frozenset(("text", "thread_ts", "username", "icon_emoji", "icon_url", "parse", "channel", "ts"))
BOOLEANS = ("mrkdwn", "unfurl_links", "unfurl_media", "reply_broadcast", "link_names")
STRUCTURED = ("blocks", "attachments", "metadata")  # JSON strings in forms
TIMES = ("thread_ts", "ts")  # a number there is a ts written as a number
KNOWN = frozenset((*STRINGS, *BOOLEANS, *STRUCTURED))  # the rest is ignored, as Slack ignores it
_BOOLEAN_TEXT = {"true": True, "1": True, "false": False, "0": False}
# Broadcast mentions in any form: <!here>, <!here|here>, <!channel|@channel>, <!everyone>.
BROADCAST = re.compile(r"<!(?:channel|here|everyone)(?:\|[^>]*)?>", re.IGNORECASE)
# A channel as clients name one: #name, name, an id or @user; no space, control or brace, at most 80.
CHANNEL = re.compile(r"^[#@]?[^\s{}<>\x00-\x1f\x7f]{1,80}\Z")
BROADCAST_ELEMENT = b'"broadcast"'  # a rich text broadcast element's type, as orjson writes it
# Plain words Slack turns into broadcasts with link_names or parse=full.
BROADCAST_WORD = re.compile(r"(?<![\w@])@(?:channel|here|everyone)\b", re.IGNORECASE)


class SlackError(Exception):
    """A request Slack would refuse, with Slack's error code; nothing was counted."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code, self.detail = code, detail


class Post(NamedTuple):
    """A client's message, read and checked: its fields as sent, and what the door reads of it.

    (A tuple: the webhook door makes one per request of a storm.)
    """

    message: dict[str, Any]  # text, blocks, attachments and presentation fields, as the client gave them
    channel: str | None  # the channel the client named
    ts: str | None  # chat.update: the message it edits

    @property
    def text(self) -> str:
        """Its text, else a plain rendering of its blocks and attachments (1-3000 characters); made
        only for a message that goes to the store (a storm's refusals never need it)."""
        return plain_text(self.message)


def media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


def webhook_body(raw: bytes, content_type: str) -> dict[str, Any]:
    """An incoming webhook's body: a form's ``payload`` field, else JSON (whatever its type says:
    ``curl -d '{...}'`` sends JSON as a form, and Slack takes it)."""
    if webhook_form(content_type):
        form = _form(raw, "invalid_payload")
        if "payload" in form:
            return _object(form["payload"].encode(), "invalid_payload")
    return _object(raw, "invalid_payload")


def webhook_form(content_type: str) -> bool:
    """True when an incoming webhook's body is a form (its ``payload`` field holds the JSON); else
    the body is JSON. Both readers of webhook bodies ask this (``usual.py`` too)."""
    return content_type != JSON and media_type(content_type) == FORM


def api_body(raw: bytes, content_type: str) -> dict[str, Any]:
    """A Web API call's arguments: a JSON object, or a form (the default of Slack's clients)."""
    media = media_type(content_type)
    if media == JSON:
        return _object(raw, "invalid_json")
    if media in (FORM, ""):
        return dict(_form(raw, "invalid_form_data"))
    raise SlackError("invalid_form_data", f"unsupported content type {media[:50]!r}")


def _form(raw: bytes, code: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SlackError(code, f"not a form: {exc}") from exc
    return dict(pairs)


def _object(raw: bytes, code: str) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SlackError(code, f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise SlackError(code, "not a JSON object")
    return value


def read_post(body: dict[str, Any], wrong_type: str, too_long: str, mentions: bool) -> Post:
    """The message in ``body``, checked as Slack checks it.

    ``wrong_type`` and ``too_long`` are the codes of a field of the wrong type and of a text over
    40,000 characters at this door; broadcast mentions become text unless ``mentions``.
    """
    message = {
        # A string where a string belongs is kept as it is: the common case, without a call.
        name: value if type(value) is str and name in STRINGS else _field(name, value, wrong_type)
        for name, value in body.items()
        if name in KNOWN and value != "" and value is not None  # an empty string is an absent field
    }
    written = _written(message, wrong_type)
    check_shape(message, too_long)
    if not mentions and (b"<" in written or b"@" in written or BROADCAST_ELEMENT in written):
        message = quieted(message)
    channel, ts = message.pop("channel", None), message.pop("ts", None)
    if channel is not None and not CHANNEL.match(channel):  # no channel Slack has: counted nowhere
        raise SlackError("channel_not_found", "not a channel's name or id")
    return Post(message, channel, ts)


def _field(name: str, value: object, wrong_type: str) -> Any:
    if name in TIMES and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.6f}"
    if name in STRINGS:
        if not isinstance(value, str):
            raise SlackError(wrong_type, f"{name} must be a string")
        return value
    if name in BOOLEANS:
        flag = _BOOLEAN_TEXT.get(value.lower()) if isinstance(value, str) else value
        if not isinstance(flag, bool) and flag not in (0, 1):
            raise SlackError(wrong_type, f"{name} must be a boolean")
        return bool(flag)
    if isinstance(value, str):  # a JSON string, as forms carry blocks, attachments, metadata
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise SlackError("invalid_blocks" if name != "metadata" else wrong_type, f"{name}: not JSON") from exc
    if name == "metadata" and not isinstance(value, dict):
        raise SlackError(wrong_type, "metadata must be an object")
    return value


def check_shape(message: dict[str, Any], too_long: str) -> None:
    """Refuse a message Slack would refuse for its shape or size (``no_text``, ``invalid_blocks``)."""
    if not (message.get("text") or message.get("blocks") or message.get("attachments")):
        raise SlackError("no_text", "a message needs text, blocks or attachments")
    if len(message.get("text", "")) > MAX_TEXT:
        raise SlackError(too_long, f"text over {MAX_TEXT} characters")
    problems = block_problems(message["blocks"]) if "blocks" in message else []
    problems += attachment_problems(message["attachments"]) if "attachments" in message else []
    if problems:
        raise SlackError("invalid_blocks", "; ".join(problems[:10]))


def _written(message: dict[str, Any], wrong_type: str) -> bytes:
    """``message`` as JSON: one pass in C that tells whether any string of it holds a ``<`` or an ``@``
    (orjson writes ``<`` as is; a single byte is found with memchr): 0.8 us for Alertmanager's 1.5 KB,
    where the walk of :func:`quieted` costs 5, and most messages (a storm's) mention no one.

    It is the depth guard too: orjson refuses to write past 254 levels, so every walk of the
    message (checks, mentions, its plain rendering) stays far within Python's recursion limit.
    """
    try:
        return orjson.dumps(message)
    except orjson.JSONEncodeError as exc:
        raise SlackError(wrong_type, "nested too deeply") from exc


def quieted(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its broadcast mentions shown as text (``&lt;!here&gt;``) in every string of it,
    whatever holds it: a ``plain_text`` object in a block is never read for mentions, but an
    attachment whose ``type`` says plain_text is (its text is mrkdwn), so nothing is trusted for its
    type. Where ``link_names`` or ``parse=full`` would turn a plain ``@here`` into one, they are left out."""
    quiet: dict[str, Any] = _quiet(message)
    if (quiet.get("link_names") or quiet.get("parse") == "full") and _has_word(quiet):
        quiet = dict(quiet)
        quiet.pop("link_names", None)
        quiet.pop("parse", None)
    return quiet


def _quiet(value: Any) -> Any:
    if isinstance(value, str):
        return BROADCAST.sub(lambda m: "&lt;" + m.group(0)[1:-1] + "&gt;", value) if "<!" in value else value
    if isinstance(value, list):
        return [_quiet(item) for item in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "broadcast":  # a rich text element: @channel, @here, @everyone as words
        return {"type": "text", "text": f"@{value.get('range', 'channel')}"}
    return {k: _quiet(v) for k, v in value.items()}


def _has_word(value: Any) -> bool:
    if isinstance(value, str):
        return bool(BROADCAST_WORD.search(value))
    if isinstance(value, list):
        return any(_has_word(item) for item in value)
    return isinstance(value, dict) and any(_has_word(v) for v in value.values())


def plain_text(message: dict[str, Any]) -> str:
    """The message's text, else a plain rendering of its blocks and attachments (every text in them),
    cut to an event's 3000 characters: what digests, the console and hand-overs show."""
    parts = [message["text"]] if message.get("text") else []
    if not parts:
        for part in (message.get("blocks"), *(message.get("attachments") or [])):
            parts += _texts(part)
    text = "\n".join(p.strip() for p in parts if p.strip())
    return text[:TEXT_LIMIT] or "(a message without text)"


def _texts(value: Any) -> list[str]:
    """Every text in a block or attachment: ``text`` values, an attachment's pretext, title and fields."""
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    if not isinstance(value, dict):
        return []
    own = [value[k] for k in ("pretext", "title", "text", "value") if isinstance(value.get(k), str)]
    return own + [text for k, v in value.items() if isinstance(v, (dict, list)) for text in _texts(v)]
