"""What Slack refuses for a message's shape or size, checked before anything is counted.

Blocks go through slack-sdk's own Block Kit models (``Block.parse`` and
``validate_json``: lengths, counts, required parts of every block type it knows),
plus what those models let through but Slack refuses: a text object that is not an
object of type ``plain_text`` or ``mrkdwn`` with some text, and block types Slack
does not know, and the ids of the gateway's own parts (``slack.controls.gateway_part``).
Attachments are checked for their types, and their blocks as blocks.
Each problem is written as Slack writes it: ``message [json-pointer:/blocks/0/text]``.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from ...slack.controls import gateway_part

MAX_BLOCKS = 50  # blocks in a message, and in each attachment
MAX_ATTACHMENTS = 100
MAX_TEXT = 40_000  # characters of a message's top-level text
# Block types slack-sdk knows (its subclasses of Block name them): anything else Slack refuses too.
KNOWN_BLOCKS = frozenset(t for c in Block.__subclasses__() if isinstance(t := getattr(c, "type", None), str))
TEXT_TYPES = ("plain_text", "mrkdwn")
# Attachment fields that Slack reads as strings (a number or an object there is refused).
ATTACHMENT_STRINGS = frozenset(
    (
        "fallback",
        "color",
        "pretext",
        "author_name",
        "author_link",
        "author_icon",
        "title",
        "title_link",
        "text",
        "image_url",
        "thumb_url",
        "footer",
        "footer_icon",
        "callback_id",
    )
)


def block_problems(blocks: object, pointer: str = "/blocks") -> list[str]:
    """Slack's complaints about a list of blocks (none when Slack takes them)."""
    if not isinstance(blocks, list):
        return [f"must be an array [json-pointer:{pointer}]"]
    if len(blocks) > MAX_BLOCKS:  # before looking into any: 10,000 blocks cost no more than 51
        return [f"no more than {MAX_BLOCKS} items allowed [json-pointer:{pointer}]"]
    problems: list[str] = []
    for index, block in enumerate(blocks):
        problems += [f"{why} [json-pointer:{pointer}/{index}{where}]" for where, why in _block(block)]
    return problems


def _block(block: object) -> list[tuple[str, str]]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return [("", "must be a block object with a type")]
    if block["type"] not in KNOWN_BLOCKS:
        return [("/type", f"unknown block type {block['type'][:50]!r}")]
    own = gateway_part(block)  # a click on it must not pass for one on the gateway's controls
    if own:
        return [("", own)]
    problems = _text_objects(block)
    try:
        parsed = Block.parse(block)
        if parsed is not None:
            parsed.validate_json()
    except SlackObjectFormationError as exc:
        problems.append(("", str(exc)))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a part of the wrong type
        problems.append(("", f"invalid block: {type(exc).__name__}"))
    return problems


def _text_objects(block: dict[str, Any]) -> list[tuple[str, str]]:
    """Text objects the models take as they come: a section's text and fields, a header's text,
    a context's elements (images aside)."""
    places: list[tuple[str, object]] = []
    if block["type"] in ("section", "header") and "text" in block:
        places.append(("/text", block["text"]))
    if block["type"] == "section":
        fields = block.get("fields")
        places += [(f"/fields/{i}", f) for i, f in enumerate(fields)] if isinstance(fields, list) else []
    if block["type"] == "context":
        elements = block.get("elements")
        if not isinstance(elements, list):
            return [("/elements", "must be an array")]
        places += [(f"/elements/{i}", e) for i, e in enumerate(elements) if not _image(e)]
    return [(where, why) for where, part in places if (why := _text_object(part))]


def _image(element: object) -> bool:
    return isinstance(element, dict) and element.get("type") == "image"


def _text_object(part: object) -> str:
    if not isinstance(part, dict) or part.get("type") not in TEXT_TYPES:
        return "must be a text object of type plain_text or mrkdwn"
    if not isinstance(part.get("text"), str) or not part["text"]:
        return "must be more than 0 characters"
    return ""


def attachment_problems(attachments: object) -> list[str]:
    """Slack's complaints about a message's attachments: types, and their blocks as blocks."""
    if not isinstance(attachments, list):
        return ["must be an array [json-pointer:/attachments]"]
    if len(attachments) > MAX_ATTACHMENTS:
        return [f"no more than {MAX_ATTACHMENTS} items allowed [json-pointer:/attachments]"]
    problems: list[str] = []
    for index, attachment in enumerate(attachments):
        if type(attachment) is not dict:
            problems.append(f"must be an object [json-pointer:/attachments/{index}]")
            continue
        for name, value in attachment.items():  # plain loops: every storm message has attachments
            if type(value) is not str and name in ATTACHMENT_STRINGS:
                problems.append(f"must be a string [json-pointer:/attachments/{index}/{name}]")
        if "fields" in attachment:
            problems += _attachment_fields(attachment["fields"], f"/attachments/{index}/fields")
        if "blocks" in attachment:
            problems += block_problems(attachment["blocks"], f"/attachments/{index}/blocks")
    return problems


def _attachment_fields(fields: object, pointer: str) -> list[str]:
    if type(fields) is not list:
        return [f"must be an array [json-pointer:{pointer}]"]
    return [
        f"must be an object with string title and value [json-pointer:{pointer}/{i}]"
        for i, field in enumerate(fields)
        if type(field) is not dict or type(field.get("title", "")) is not str or type(field.get("value", "")) is not str
    ]
