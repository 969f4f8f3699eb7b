"""Message templates: how an event entry becomes its Slack message, in its template's shape or the built-in one.

A route's ``template`` (else ``default``) is written into the outbox entry at
admission; it is rendered here, at delivery, never on the admission path. What a
template renders is held to Slack's limits like every message (cut with ``…``,
never refused), checked as Slack would check it, and given the gateway's own parts
(``Resolved``, link buttons, ``Seen N times``, the acknowledgement, the controls) after
its blocks, by :func:`~notifier.slack.messages.shaped_message`, on the post and on every
edit. A template that fails for one event (an undefined value, a block Slack would
refuse, a render that takes too long) leaves that event in the built-in shape: counted,
and logged once per template and reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block as SdkBlock

from ..config import TemplateConfig
from ..destinations.base import Block, Message
from ..errors import ConfigError, TemplateError
from ..models import ANONYMOUS
from ..outbox import Entry, EventEntry
from .controls import LINK_TEXT, gateway_part
from .messages import (
    FIELD_TEXT,
    FIELDS,
    SECTION_TEXT,
    MessageState,
    cut,
    event_message,
    shaped_message,
)
from .renderer import RENDER_SECONDS, Renderer, Report
from .sandbox import URL_KEYS, is_url

HEADER_TEXT, MARKDOWN_TEXT, CONTEXT_ELEMENTS, ACTIONS_ELEMENTS = 150, 12_000, 10, 25  # Block Kit
MAX_TOLD = 256  # (template, reason) pairs logged; past them, failures are only counted
MAX_REMEMBERED = 4096  # entries remembered as counted, or as refused by Slack in their template's shape
BLOCK_ERRORS = ("invalid_blocks", "invalid_blocks_format")  # Slack refusing a message for its blocks
_LIMITS = {"section": SECTION_TEXT, "header": HEADER_TEXT, "context": SECTION_TEXT}
_PLAIN_ONLY = ("header", "button")  # what takes plain_text only

log = logging.getLogger(__name__)


class Templates:
    """The configuration's message templates, and the one way an event entry becomes its message."""

    def __init__(self, templates: Mapping[str, TemplateConfig], failed: Callable[[str], None] | None = None) -> None:
        """``failed`` is called with a template's name for each event it failed for (a counter's ``inc``)."""
        self._names = tuple(templates)
        self._renderer = Renderer({n: (t.text, t.blocks) for n, t in templates.items()}) if templates else None
        self._failed = failed or (lambda name: None)
        self._told: set[tuple[str, str]] = set()
        self._counted = Recent(MAX_REMEMBERED)  # entries a failure was counted for (an edit renders one again)
        self._plain = Recent(MAX_REMEMBERED)  # entries whose template's blocks Slack refused

    async def message(self, entry: EventEntry, channel: str, state: MessageState) -> Message:
        """The message of ``entry`` in ``channel`` showing ``state``: its template's shape, else the built-in one."""
        event = {**entry.event, "category": entry.category}
        if entry.template and entry.id not in self._plain:
            try:
                own, text = await self.render(entry.template, context(entry))
            except TemplateError as exc:
                self._fail(entry.template, str(exc), entry.id)
            else:
                return replace(shaped_message(channel, own, text, event, state), shape=entry.template)
        return event_message(channel, event, state)

    def refused(self, entry: Entry, message: Message, error: str) -> bool:
        """Whether Slack's ``error`` refused the blocks of ``message``, in its template's shape.

        Then the entry takes the built-in shape from now on, on this replica (counted and logged
        like any failure): checked as they are, a template's blocks may still hold something
        only Slack refuses, and the event must not become a dead letter for it.
        """
        if not message.shape or error not in BLOCK_ERRORS or not isinstance(entry, EventEntry):
            return False
        self._plain.add(entry.id)
        self._fail(message.shape, f"Slack refused its blocks ({error})", entry.id)
        return True

    async def render(self, name: str, values: dict[str, Any]) -> tuple[list[Block], str]:
        """The blocks and text template ``name`` makes of ``values``, fitted; :class:`TemplateError` if none."""
        if name not in self._names or self._renderer is None:
            raise TemplateError(f"no template {name!r} in this configuration")
        text, blocks = await self._renderer.render(name, values)
        own = [fit_block(b) for b in blocks if not blank(b)]
        problem = refusal(own) or ("its text renders empty" if not text.strip() else "")
        if problem:
            raise TemplateError(problem)
        return own, text  # cut by shaped_message, leaving room for the state's lines

    async def check(self, where: str) -> list[str]:
        """What :func:`check_templates` says; the render process is stopped afterwards."""
        try:
            report = await self._renderer.report() if self._renderer else Report([], {})
            if report.problems:
                raise ConfigError([f"{where}: {_place(name, place)}: {why}" for name, place, why in report.problems])
            return [warning for name in self._names if (warning := await self._sample(name, report, where))]
        finally:
            self.close()

    async def _sample(self, name: str, report: Report, where: str) -> str:
        try:
            await self.render(name, sample(report.fields.get(name, [])))
        except TemplateError as exc:
            return (
                f"{where}: templates.{name}: fails for a sample event ({exc}); "
                "the events it fails for are posted in the built-in shape"
            )
        return ""

    def close(self) -> None:
        """Stop the render process."""
        if self._renderer is not None:
            self._renderer.close()

    def reload(self, templates: Mapping[str, TemplateConfig]) -> None:
        """Take a reloaded configuration's templates from the next render on.

        The old render process is stopped once a render in progress there has had its time.
        """
        old = self._renderer
        self._names = tuple(templates)
        self._renderer = Renderer({n: (t.text, t.blocks) for n, t in templates.items()}) if templates else None
        self._plain = Recent(MAX_REMEMBERED)  # the new blocks deserve a try
        if old is not None:
            asyncio.get_running_loop().call_later(RENDER_SECONDS * 2, old.close)

    def _fail(self, name: str, reason: str, entry_id: str) -> None:
        if self._counted.add(entry_id):  # once per event
            self._failed(name)
        if (name, reason) in self._told or len(self._told) >= MAX_TOLD:
            return
        self._told.add((name, reason))
        log.warning("template %s failed for an event, which is posted in the built-in shape: %s", name, reason)


class Recent:
    """The last ``size`` keys added: a bounded memory of entries."""

    def __init__(self, size: int) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def add(self, key: str) -> bool:
        """Remember ``key``; True if it was not remembered yet."""
        new = key not in self._keys
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return new

    def __contains__(self, key: object) -> bool:
        return key in self._keys


def _place(name: str, place: str) -> str:
    return f"templates.{name}.{place}" if name else "templates"


def context(entry: EventEntry) -> dict[str, Any]:
    """What a template sees of an event."""
    event = entry.event
    return {
        "category": entry.category,
        "text": event.get("text", ""),
        "title": event.get("title"),
        "severity": event.get("severity", "info"),
        "status": event.get("status", "firing"),
        "fields": event.get("fields") or {},
        "dedup_key": event.get("dedup_key"),
        "links": event.get("links") or [],
        "source": entry.source or ANONYMOUS,
        "channel": entry.channel,
        "id": entry.id,
    }


# -- held to Slack's limits, checked as Slack checks ---------------------------------


def blank(block: object) -> bool:
    """A block whose every text rendered empty (an optional line): left out, not refused."""
    texts = list(_texts(block))
    return isinstance(block, dict) and block.get("type") != "divider" and bool(texts) and not any(texts)


def _texts(value: object) -> Iterator[str]:
    """The ``text`` strings in ``value``, stripped."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from [inner.strip()] if key == "text" and isinstance(inner, str) else _texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _texts(inner)


def fit_block(block: Any) -> Any:
    """``block`` with its texts cut to Block Kit's limits (with ``…``) and its lists to their lengths."""
    if not isinstance(block, dict):
        return block
    kind, fitted = block.get("type"), dict(block)
    if kind == "markdown" and isinstance(block.get("text"), str):
        fitted["text"] = cut(block["text"], MARKDOWN_TEXT)
    elif isinstance(block.get("text"), dict):
        fitted["text"] = _fit_text(block["text"], _LIMITS.get(str(kind), SECTION_TEXT))
    if isinstance(block.get("fields"), list):
        fitted["fields"] = [_fit_text(f, FIELD_TEXT) for f in block["fields"][:FIELDS]]
    if isinstance(block.get("accessory"), dict):
        fitted["accessory"] = _fit_element(block["accessory"])
    if isinstance(block.get("elements"), list) and kind in ("context", "actions"):
        elements = block["elements"][: CONTEXT_ELEMENTS if kind == "context" else ACTIONS_ELEMENTS]
        fitted["elements"] = [_fit_element(e) for e in elements]
    return fitted


def _fit_element(element: Any) -> Any:
    if isinstance(element, dict) and isinstance(element.get("text"), dict):
        limit = LINK_TEXT if element.get("type") == "button" else SECTION_TEXT
        return {**element, "text": _fit_text(element["text"], limit)}
    return _fit_text(element, SECTION_TEXT)


def _fit_text(obj: Any, limit: int) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return {**obj, "text": cut(obj["text"], limit)}
    return obj


def refusal(blocks: list[Any]) -> str:
    """Why Slack would refuse ``blocks`` ("" if it would not): slack-sdk's Block Kit models, and what they let by."""
    ids: set[str] = set()
    for index, block in enumerate(blocks):
        problem = _block_refusal(block, ids)
        if problem:
            return f"blocks[{index}]: {problem}"
    return ""


def _block_refusal(block: Any, ids: set[str]) -> str:
    # Reasons name no value of the event: they are logged once per template and reason.
    if not isinstance(block, dict):
        return "not a block"
    try:
        parsed = SdkBlock.parse(block)
        if parsed is None:
            return f"not a block Slack knows (type {str(block.get('type'))[:50]!r})"
        parsed.validate_json()
        if parsed.to_dict() != block:
            return "Slack would not read it as written (an unknown key, or a value of the wrong type)"
    except SlackObjectFormationError as exc:
        return str(exc)
    except Exception as exc:  # slack-sdk's models raise TypeError, KeyError... on a malformed block
        return f"Slack would not read it ({type(exc).__name__}: a part missing or of the wrong type)"
    block_id, own = str(block.get("block_id", "")), gateway_part(block)
    if own or block_id in ids:
        return own or f"block_id {block_id!r} is given twice"
    if block_id:
        ids.add(block_id)
    return next(_text_refusals(block, str(block.get("type"))), "")


def _text_refusals(value: Any, within: str) -> Iterator[str]:
    """Empty texts, plain-only places with mrkdwn, and URLs that are not http(s), anywhere in ``value``."""
    if isinstance(value, list):
        for inner in value:
            yield from _text_refusals(inner, within)
        return
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if kind in ("plain_text", "mrkdwn"):
        if not isinstance(value.get("text"), str) or not value["text"].strip():
            yield "a text renders empty or not text"
        if kind == "mrkdwn" and within in _PLAIN_ONLY:
            yield f"a {within} takes plain_text, not mrkdwn"
    for key, inner in value.items():
        if key in URL_KEYS and not is_url(inner):
            yield f"a {key} is not an http(s) URL"
        yield from _text_refusals(inner, str(kind) if kind in _PLAIN_ONLY else within)


# -- at start-up -----------------------------------------------------------------------


def check_templates(templates: Mapping[str, TemplateConfig], where: str) -> list[str]:
    """Compile every template of the file ``where``: :class:`ConfigError` names each string that does
    not, and its line. Then render each for a sample event: the warnings of those that fail (they
    run: the events they fail for take the built-in shape)."""
    return asyncio.run(Templates(templates).check(where)) if templates else []


def sample(fields: list[str]) -> dict[str, Any]:
    """A sample event's values, with every field a template reads."""
    return {
        "category": "sample",
        "text": "Sample event",
        "title": "Sample title",
        "severity": "warning",
        "status": "firing",
        "fields": {name: f"sample {name}" for name in fields},
        "dedup_key": "sample-key",
        "links": [{"text": "Sample link", "url": "https://example.com/sample"}],
        "source": ANONYMOUS,
        "channel": "#sample",
        "id": "0-0",
    }
