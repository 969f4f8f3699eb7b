"""The Slack stand-in's content checks: message size and Block Kit limits (blocks, elements, fields).

``check_message`` raises the ``Rejection`` Slack would answer for a message's content: our own
checks of the documented limits (``block_problems``), then slack-sdk's Block Kit models
(``sdk_problems``). ``slack_standin.py``'s docstring lists the limits and where they come from.
"""

from __future__ import annotations

import hashlib
import json

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

MAX_TEXT = 40_000
MAX_BLOCKS = 50
SECTION_TEXT, SECTION_FIELDS, FIELD_TEXT = 3000, 10, 2000
HEADER_TEXT, CONTEXT_ELEMENTS, ACTIONS_ELEMENTS = 150, 10, 25
TEXT_OBJECT, MARKDOWN_TEXT, BLOCK_ID = 3000, 12_000, 255
BUTTON_TEXT, ACTION_ID, BUTTON_VALUE, URL = 75, 255, 2000, 3000
# static_select: placeholder, options (count, text, value); overflow: 2 to 5 options.
PLACEHOLDER, SELECT_OPTIONS, OPTION_TEXT, OPTION_VALUE, OVERFLOW_OPTIONS = 150, 100, 75, 150, 5

# Message block types Slack knows but the stand-in does not inspect beyond block_id.
UNCHECKED_BLOCK_TYPES = {"image", "rich_text", "file", "video", "input", "table", "context_actions", "call"}


class Rejection(Exception):
    """Slack would answer ``{"ok": false, "error": error}``."""

    def __init__(self, error: str, reason: str, problems: list[str] | None = None) -> None:
        super().__init__(f"{error}: {reason}")
        self.error, self.reason, self.problems = error, reason, problems or []


# ---------------------------------------------------------------- Block Kit limits

Problem = tuple[str, str]  # (json pointer, message)


def _too_long(value: object, limit: int, pointer: str) -> list[Problem]:
    if value is None:
        return []
    if not isinstance(value, str):
        return [(pointer, "must be a string")]
    return [(pointer, f"must be less than {limit + 1} characters")] if len(value) > limit else []


def _text_object(obj: object, pointer: str, limit: int, plain_only: bool = False) -> list[Problem]:
    types = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    if not isinstance(obj, dict) or obj.get("type") not in types:
        return [(pointer, f"must be a text object of type {' or '.join(types)}")]
    if not isinstance(obj.get("text"), str) or not obj["text"]:
        return [(pointer + "/text", "must be more than 0 characters")]
    return _too_long(obj["text"], limit, pointer + "/text")


def _items(items: object, pointer: str, limit: int) -> list[Problem]:
    if not isinstance(items, list) or not items:
        return [(pointer, "must be a non-empty array")]
    return [(pointer, f"no more than {limit} items allowed")] if len(items) > limit else []


def _button(element: dict, p: str) -> list[Problem]:
    problems = _text_object(element.get("text"), p + "/text", BUTTON_TEXT, plain_only=True)
    problems += _too_long(element.get("value"), BUTTON_VALUE, p + "/value")
    problems += _too_long(element.get("url"), URL, p + "/url")
    if element.get("style") not in (None, "primary", "danger"):
        problems.append((p + "/style", "must be primary or danger"))
    return problems


def _options(element: dict, p: str, limit: int) -> list[Problem]:
    options = element.get("options")
    problems = _items(options, p + "/options", limit)
    for i, option in enumerate(options if isinstance(options, list) else []):
        if not isinstance(option, dict):
            problems.append((f"{p}/options/{i}", "must be an option object"))
            continue
        problems += _text_object(option.get("text"), f"{p}/options/{i}/text", OPTION_TEXT, plain_only=True)
        if not isinstance(option.get("value"), str) or not option["value"]:
            problems.append((f"{p}/options/{i}/value", "must be more than 0 characters"))
        problems += _too_long(option.get("value"), OPTION_VALUE, f"{p}/options/{i}/value")
    return problems


def _static_select(element: dict, p: str) -> list[Problem]:
    problems = _options(element, p, SELECT_OPTIONS)
    if "placeholder" in element:
        problems += _text_object(element["placeholder"], p + "/placeholder", PLACEHOLDER, plain_only=True)
    return problems


def _overflow(element: dict, p: str) -> list[Problem]:
    problems = _options(element, p, OVERFLOW_OPTIONS)
    options = element.get("options")
    if isinstance(options, list) and len(options) < 2:
        problems.append((p + "/options", "must provide at least 2 items"))
    return problems


ELEMENT_CHECKS = {"button": _button, "static_select": _static_select, "overflow": _overflow}


def _element(element: object, p: str) -> list[Problem]:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        return [(p, "must be an element object with a type")]
    problems = _too_long(element.get("action_id"), ACTION_ID, p + "/action_id")
    check = ELEMENT_CHECKS.get(element["type"])
    return problems + (check(element, p) if check else [])


def _section(block: dict, p: str) -> list[Problem]:
    if "text" not in block and "fields" not in block:
        return [(p, "must provide either text or fields")]
    problems = _text_object(block["text"], p + "/text", SECTION_TEXT) if "text" in block else []
    if "fields" in block:
        fields = block["fields"]
        problems += _items(fields, p + "/fields", SECTION_FIELDS)
        for i, item in enumerate(fields if isinstance(fields, list) else []):
            problems += _text_object(item, f"{p}/fields/{i}", FIELD_TEXT)
    return problems + (_element(block["accessory"], p + "/accessory") if "accessory" in block else [])


def _header(block: dict, p: str) -> list[Problem]:
    return _text_object(block.get("text"), p + "/text", HEADER_TEXT, plain_only=True)


def _context(block: dict, p: str) -> list[Problem]:
    elements = block.get("elements")
    problems = _items(elements, p + "/elements", CONTEXT_ELEMENTS)
    for i, element in enumerate(elements if isinstance(elements, list) else []):
        if isinstance(element, dict) and element.get("type") == "image":
            if not element.get("alt_text") or not (element.get("image_url") or element.get("slack_file")):
                problems.append((f"{p}/elements/{i}", "an image needs image_url and alt_text"))
        else:
            problems += _text_object(element, f"{p}/elements/{i}", TEXT_OBJECT)
    return problems


def _actions(block: dict, p: str) -> list[Problem]:
    elements = block.get("elements")
    problems = _items(elements, p + "/elements", ACTIONS_ELEMENTS)
    seen: set[str] = set()
    for i, element in enumerate(elements if isinstance(elements, list) else []):
        problems += _element(element, f"{p}/elements/{i}")
        action_id = element.get("action_id") if isinstance(element, dict) else None
        if action_id is not None and action_id in seen:
            problems.append((f"{p}/elements/{i}/action_id", f"duplicate action_id {action_id!r} in the block"))
        seen.add(action_id)
    return problems


def _markdown(block: dict, p: str) -> list[Problem]:
    text = block.get("text")
    if not isinstance(text, str) or not text:
        return [(p + "/text", "must be more than 0 characters")]
    return _too_long(text, MARKDOWN_TEXT, p + "/text")


BLOCK_CHECKS = {
    "section": _section,
    "header": _header,
    "context": _context,
    "actions": _actions,
    "markdown": _markdown,
    "divider": lambda block, p: [],
}


def _block(block: object, p: str, block_ids: set[str]) -> list[Problem]:
    if not isinstance(block, dict):
        return [(p, "must be a block object")]
    problems = _too_long(block.get("block_id"), BLOCK_ID, p + "/block_id")
    if block.get("block_id") in block_ids:
        problems.append((p + "/block_id", f"duplicate block_id {block['block_id']!r}"))
    if isinstance(block.get("block_id"), str):
        block_ids.add(block["block_id"])
    check = BLOCK_CHECKS.get(block.get("type"))
    if check is not None:
        return problems + check(block, p)
    if block.get("type") in UNCHECKED_BLOCK_TYPES:
        return problems
    return [*problems, (p + "/type", f"unknown block type {block.get('type')!r}")]


def block_problems(blocks: list) -> list[str]:
    """Slack's complaints about ``blocks``, as ``"message [json-pointer:/blocks/...]"``; [] if none."""
    problems = [("/blocks", f"no more than {MAX_BLOCKS} items allowed")] if len(blocks) > MAX_BLOCKS else []
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        problems += _block(block, f"/blocks/{i}", block_ids)
    return [f"{message} [json-pointer:{pointer}]" for pointer, message in problems]


def sdk_problems(blocks: list) -> list[str]:
    """What slack-sdk's Block Kit models refuse in ``blocks`` (types they do not know are left to the checks above)."""
    problems = []
    for i, block in enumerate(blocks):
        try:
            parsed = Block.parse(block)
            if parsed is not None:
                parsed.validate_json()
        except SlackObjectFormationError as exc:
            problems.append(f"{exc} (slack-sdk) [json-pointer:/blocks/{i}]")
    return problems


def check_message(body: dict) -> None:
    """Raise the ``Rejection`` Slack would answer for this message's content, if any."""
    text, blocks = body.get("text"), body.get("blocks")
    if not text and not blocks and not body.get("attachments"):
        raise Rejection("no_text", "a message needs text or blocks")
    if isinstance(text, str) and len(text) > MAX_TEXT:
        raise Rejection("msg_too_long", f"text has {len(text)} characters, more than {MAX_TEXT}")
    if blocks is None:
        return
    if not isinstance(blocks, list):
        raise Rejection("invalid_blocks_format", "blocks must be a JSON array")
    problems = block_problems(blocks) or sdk_problems(blocks)
    if problems:
        raise Rejection("invalid_blocks", "; ".join(problems), problems)


def _with_block_ids(blocks: list) -> list:
    """Blocks as Slack returns them: every block has a ``block_id`` (Slack makes one up if missing)."""
    out = []
    for block in blocks:
        if isinstance(block, dict) and "block_id" not in block:
            made_up = hashlib.sha1(json.dumps(block, sort_keys=True).encode()).hexdigest()[:5]
            out.append({**block, "block_id": made_up})
        else:
            out.append(block)
    return out
