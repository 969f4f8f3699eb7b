"""Keeping a chat's payload within its size limit, whatever the event says.

A chat refuses a whole message over its limit (Teams: 28 KB a card; Google Chat:
32,000 bytes a message), so a kind builds its payload part by part from a
:class:`Budget` of bytes and cuts each part to what is left, ending it with ``…``.

Sizes are counted as the bytes of ``json.dumps`` (ASCII-escaped): that is what
aiohttp sends for ``json=``, and it is never less than the UTF-8 size a chat
counts, so a payload measured here is within the limit as sent and as read.
"""

from __future__ import annotations

import json
from typing import Any

ELLIPSIS = "…"
_SEPARATOR = 2  # ", " between two items of a JSON list or object


def size(value: Any) -> int:
    """Bytes of ``value`` serialised as it is sent."""
    return len(json.dumps(value))


def char_cost(char: str) -> int:
    """Bytes one character takes in ``json.dumps``: 1, 2 (``\\"``), 6 (``\\u00e9``) or 12 (a surrogate pair)."""
    point = ord(char)
    if 0x20 <= point < 0x7F:
        return 2 if char in '"\\' else 1
    if point < 0x20:
        return 2 if char in "\n\r\t\b\f" else 6
    return 12 if point > 0xFFFF else 6


def cut(text: str, room: int) -> str:
    """``text`` within ``room`` bytes of JSON (quotes not counted), ending in ``…`` when cut."""
    head = text[: room + 1]  # every character costs at least a byte: the rest cannot fit
    if len(head) == len(text) and len(json.dumps(text)) - 2 <= room:
        return text
    kept, used, limit = [], 0, room - char_cost(ELLIPSIS)
    for char in head:
        used += char_cost(char)
        if used > limit:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS if limit >= 0 else ""


def cut_units(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-16 code units (how chats count "characters"), ending in ``…`` when cut."""
    if len(text) <= limit // 2 or len(text.encode("utf-16-le")) // 2 <= limit:
        return text
    kept, used = [], 1  # the ellipsis is one unit
    for char in text:
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


class Budget:
    """The bytes left for a payload's parts, once its frame (``base``, with every list empty) is counted."""

    def __init__(self, limit: int, base: Any) -> None:
        self.left = limit - size(base)

    def fits(self, item: Any, keep: int = 0) -> bool:
        """True when ``item`` fits (as one more entry of a list) leaving ``keep``; its bytes are then spent."""
        cost = size(item) + _SEPARATOR
        if cost + keep > self.left:
            return False
        self.left -= cost
        return True

    def text_room(self, frame: Any, keep: int = 0) -> int:
        """Bytes a string can take in ``frame`` (the item with that string empty) leaving ``keep`` for later parts."""
        return max(0, self.left - keep - size(frame) - _SEPARATOR)
