"""A message's controls (acknowledge, mute, unmute) and the seal that makes them the gateway's own.

Slack sends a click back with the ``block_id`` of the actions block clicked, signed by
Slack, not by the gateway: anyone who can make the gateway post blocks (a front-door
token) could plant a button of the same shape. So the controls block's id carries a
seal, an HMAC-SHA256 under the fleet's control key (``store.secret``) over what the
controls name (the category and the alert's record), and a click acts only when the
seal it brings back is right; a mute's duration carries a seal of its own (over
what the block names and the duration). What a click says is still checked
against what the gateway offers now (``http.actions``).

    block_id = notifier-state-actions:<category>:<record digest>:<seal>
    a mute's duration (a button's "for", a select option's value) = <duration>~<seal>
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Block = dict[str, Any]

MUTE, UNMUTE, LINK = "mute", "unmute", "link"
ACK, UNACK = "ack", "unack"
ACTIONS = frozenset((MUTE, UNMUTE, ACK, UNACK))  # the action ids of the gateway's controls
GATEWAY_IDS = "notifier-"  # block_ids of the gateway's own parts: no client or template may use them
MUTE_FOR = "1h"  # the mute of a message posted before the choices existed (its button names none)
STATE = "notifier-state-"  # the block_id prefix of the blocks a message's state adds
CONTROLS = STATE + "actions:"  # block_id of the controls: this prefix, then "<category>:<digest>:<seal>"
LINK_TEXT = 75  # characters of a button's label (Block Kit)
OPTION_VALUE = 150  # characters of a select option's value (Block Kit)
PLACEHOLDER = 150  # characters of a select's placeholder (Block Kit)
NEWLINE = "\n"  # between the parts a seal covers: no category, digest or duration holds one
DIGEST = re.compile(r"(?:[0-9a-f]{32})?")  # an alert's record digest (Keys.record), or none
SEAL_BYTES = 16  # 128 bits of the MAC: 22 characters in base64url


@dataclass(frozen=True)
class Offered:
    """The controls messages carry: the mute durations offered and the key that seals them (none: no controls)."""

    choices: tuple[str, ...] = ()
    key: bytes = field(default=b"", repr=False)


NO_CONTROLS = Offered()


class Named(NamedTuple):
    """What a sealed controls block names: a category and an alert's record digest ("" for none)."""

    category: str
    digest: str


def seal(key: bytes, *parts: str) -> str:
    """The seal of ``parts`` (the first says what is sealed, so one seal never passes for another's)."""
    mac = hmac.new(key, NEWLINE.join(parts).encode(), hashlib.sha256).digest()[:SEAL_BYTES]
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def controls_id(key: bytes, category: str, digest: str) -> str:
    """The ``block_id`` of a controls block, sealed with ``key``."""
    return f"{CONTROLS}{category}:{digest}:{seal(key, CONTROLS, category, digest)}"


def unseal(key: bytes, block_id: str) -> Named | None:
    """What a controls block's id names, or None unless ``key`` sealed it (compared in constant time)."""
    if not block_id.startswith(CONTROLS):
        return None
    category, digest, given = _split(block_id.removeprefix(CONTROLS))
    if not DIGEST.fullmatch(digest) or not _same(given, seal(key, CONTROLS, category, digest)):
        return None
    return Named(category, digest)


def _split(named: str) -> tuple[str, str, str]:
    """``<category>:<digest>:<seal>``; a category may hold colons, a digest and a seal never do."""
    rest, _, given = named.rpartition(":")
    category, _, digest = rest.rpartition(":")
    return category, digest, given


def gateway_part(block: Block) -> str:
    """Why ``block`` (of a front-door client or a template) passes for one of the gateway's own parts, or "":
    a ``notifier-`` block id, or an element with a control's action id (``mute``, ``ack``, ...)."""
    block_id = str(block.get("block_id", ""))
    if block_id.startswith(GATEWAY_IDS):
        return f"block_id {block_id[:50]!r} is the gateway's own"
    elements = block.get("elements")
    parts = [*(elements if isinstance(elements, list) else []), block.get("accessory")]
    taken = [p["action_id"] for p in parts if isinstance(p, dict) and p.get("action_id") in ACTIONS]
    return f"action_id {taken[0]!r} is the gateway's own" if taken else ""


def controls_block(key: bytes, category: str, record: str, ack: str, elements: list[Block]) -> Block:
    """An actions block: an alert's acknowledgement button (``ack``: "ack", "unack" or "") first, then
    ``elements`` (the mute control, or unmute), sealed for ``category`` and the alert's ``record``."""
    digest = record.rpartition(":")[2] if record else ""
    first = [ack_button(ack, category, record)] if ack and record else []
    return {"type": "actions", "block_id": controls_id(key, category, digest), "elements": first + elements}


def sealed_choice(key: bytes, category: str, digest: str, duration: str) -> str:
    """A mute duration as a control carries it: ``<duration>~<seal>`` (at most 20 + 23 characters)."""
    return f"{duration}~{seal(key, MUTE, category, digest, duration)}"


def unsealed_choice(key: bytes, named: Named, value: str) -> str | None:
    """The duration in a control's ``value`` when ``key`` sealed it for what ``named`` names, else None."""
    duration, _, given = value.rpartition("~")
    return duration if _same(given, seal(key, MUTE, named.category, named.digest, duration)) else None


def _same(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def mute_control(key: bytes, category: str, record: str, choices: tuple[str, ...]) -> Block:
    """One button for one choice, else a static select of the choices (at most 5), each duration sealed."""
    digest = record.rpartition(":")[2] if record else ""
    values = [sealed_choice(key, category, digest, choice) for choice in choices or (MUTE_FOR,)]
    choices = choices or (MUTE_FOR,)
    if len(choices) == 1:
        return button(MUTE, f"Mute {category} for {choices[0]}", _value(category, record, values[0]), "danger")
    return {
        "type": "static_select",
        "action_id": MUTE,
        "placeholder": {"type": "plain_text", "text": fit_plain(f"Mute {category} for…", PLACEHOLDER)},
        "options": [
            {"text": {"type": "plain_text", "text": f"Mute for {choice}"}, "value": value[:OPTION_VALUE]}
            for choice, value in zip(choices, values, strict=True)
        ],
    }


def unmute_button(category: str, record: str) -> Block:
    return button(UNMUTE, f"Unmute {category}", _value(category, record))


def ack_button(action: str, category: str, record: str) -> Block:
    """The ``Acknowledge`` (or ``Unacknowledge``) button of an alert's message."""
    label = "Acknowledge" if action == ACK else "Unacknowledge"
    return button(action, label, _value(category, record), "primary" if action == ACK else "")


def button(action: str, label: str, value: str, style: str = "") -> Block:
    """A button (its label cut to Slack's 75 characters)."""
    element: Block = {
        "type": "button",
        "action_id": action,
        "text": {"type": "plain_text", "text": fit_plain(label, LINK_TEXT)},
        "value": value,
    }
    return {**element, "style": style} if style else element


def _value(category: str, record: str, duration: str = "") -> str:
    """A button's value: a click trusts only its sealed duration (the block's seal names the rest)."""
    return json.dumps({"category": category, "record": record, **({"for": duration} if duration else {})})


def fit_plain(text: str, limit: int) -> str:
    """Plain text (no escaping) cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
