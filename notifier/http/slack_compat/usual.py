"""The usual webhook message, read straight from its bytes: the storm path of the webhook door.

Alertmanager, Grafana and most tools post one shape: a few strings and booleans, and
attachments of strings, fields and buttons. :func:`read_usual` reads a body of exactly
that shape into typed records in one call in C (msgspec), which checks every type Slack
checks, in a third of the time of ``orjson.loads`` and ``payload.read_post`` (1.5 us
against 5.2 for Alertmanager's 1.5 KB). What the door needs of a message its limits
refuse is only this: that Slack would take it, and the channel it names. Its dict, its
text and its mentions are needed only to post it, so they are read only for a message
that goes on (by ``payload.py``, the reader of every shape).

Anything else is not "usual" and gets ``None``: a form, blocks, a thread, a value of
another type (``null``, ``"true"``), a key the records do not name. So the records
accept a subset of what ``payload.py`` accepts (``tests/unit/test_usual.py`` holds them
to that); naming every key is also what bounds the depth of what they take.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from .payload import CHANNEL, webhook_form
from .shape import MAX_ATTACHMENTS, MAX_TEXT

# An integer orjson reads as one: msgspec reads any size, orjson refuses one past a double's range.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _Record(msgspec.Struct, forbid_unknown_fields=True):
    """A record of the usual shape: a key it does not name makes the message unusual."""


class Confirm(_Record):
    text: str = ""
    title: str = ""
    ok_text: str = ""
    dismiss_text: str = ""


class Action(_Record):
    """A legacy attachment button, as Alertmanager sends its ``actions``."""

    type: str = ""
    text: str = ""
    url: str = ""
    style: str = ""
    name: str = ""
    value: str = ""
    confirm: Confirm | None = None


class Field(_Record):
    title: str = ""
    value: str = ""
    short: bool = False


class Attachment(_Record):
    """A legacy attachment: the strings Slack reads as strings (``shape.ATTACHMENT_STRINGS``), its
    fields and buttons, the keys Alertmanager and Grafana add (``mrkdwn_in``, ``ts``); no blocks."""

    fallback: str = ""
    color: str = ""
    pretext: str = ""
    author_name: str = ""
    author_link: str = ""
    author_icon: str = ""
    title: str = ""
    title_link: str = ""
    text: str = ""
    image_url: str = ""
    thumb_url: str = ""
    footer: str = ""
    footer_icon: str = ""
    callback_id: str = ""
    fields: list[Field] = []
    actions: list[Action] = []
    mrkdwn_in: list[str] = []
    ts: Int64 | str = 0


class Usual(_Record):
    """A webhook message of the usual shape: no blocks, no thread, no metadata."""

    text: str = ""
    channel: str = ""
    username: str = ""
    icon_emoji: str = ""
    icon_url: str = ""
    parse: str = ""
    link_names: bool = False
    mrkdwn: bool = True
    unfurl_links: bool = False
    unfurl_media: bool = False
    attachments: list[Attachment] = []


_decode = msgspec.json.Decoder(Usual).decode


def read_usual(raw: bytes, content_type: str) -> Usual | None:
    """``raw`` read as a usual message that Slack would take, else None (read it with ``payload.py``)."""
    if webhook_form(content_type):
        return None
    try:
        usual = _decode(raw)
    except (msgspec.MsgspecError, ValueError):  # ValueError: bytes that are not UTF-8
        return None
    if not (usual.text or usual.attachments) or len(usual.text) > MAX_TEXT:
        return None  # no_text, msg_too_long: payload.py says which
    if len(usual.attachments) > MAX_ATTACHMENTS or (usual.channel and not CHANNEL.match(usual.channel)):
        return None
    return usual
