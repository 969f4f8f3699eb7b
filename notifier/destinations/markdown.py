"""What the chats that read Markdown share (Discord, Mattermost): cutting, links, counted fields.

Each takes the chat's own ``inert`` (what makes a mention text differs from chat to chat), so
these parts are the same everywhere and only the mentions are each kind's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from ..view import View

ELLIPSIS = "…"
ZWSP = "\u200b"  # a zero-width space: breaks a mention's syntax, shows nothing
FIT_CUT = 16  # characters of a field's value worth showing cut; fewer: it is counted instead
Inert = Callable[[str], str]


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, ending in ``…`` when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS if limit > 0 else ""


def links(view: View, limit: int, inert: Inert) -> str:
    """The event's links as ``[text](url)``, whole ones only, within ``limit`` characters."""
    shown: list[str] = []
    used = 0
    for link in view.links:
        markdown = f"[{link_text(link.text, inert)}]({link_url(link.url)})"
        if used + len(markdown) + 3 * bool(shown) > limit:
            break
        used += len(markdown) + 3 * bool(shown)
        shown.append(markdown)
    return " · ".join(shown)


def link_text(text: str, inert: Inert) -> str:
    """A link's text, with the characters that would end it escaped (``\\[``, ``\\]``, ``\\)``)."""
    plain = " ".join(inert(text).split()) or "link"
    return "".join("\\" + c if c in "[]()\\" else c for c in cut(plain, 100))


def link_url(url: str) -> str:
    """A URL that cannot end the markdown link early: parentheses, spaces and angle brackets encoded."""
    return "".join({"(": "%28", ")": "%29", " ": "%20", "<": "%3C", ">": "%3E"}.get(c, c) for c in url)


def fit_fields(fields: list[tuple[str, str]], hidden: int, budget: int, note: int) -> list[tuple[str, str]]:
    """The fields within ``budget`` characters (``note`` kept for the count): the last one that fits
    is cut, the rest counted in a last field (``… 12 more fields not shown``)."""
    kept: list[tuple[str, str]] = []
    used = 0
    for name, value in fields:
        room = budget - used - note
        if len(name) + len(value) > room:
            if room - len(name) >= FIT_CUT:  # worth showing cut; else leave it to the count
                kept.append((name, cut(value, room - len(name))))
            break
        kept.append((name, value))
        used += len(name) + len(value)
    hidden += len(fields) - len(kept)
    if hidden:
        kept.append((ELLIPSIS, f"{hidden} more field{'s' if hidden > 1 else ''} not shown"))
    return kept


def clip(view: View, limit: int) -> View:
    """The view's long strings trimmed to ``limit`` (what a message could show): a 1 MB title costs no more
    than a short one."""
    trim = {name: getattr(view, name).strip()[: limit + 1] for name in ("text", "title", "category", "head")}
    return replace(view, **trim)


def head(view: View, icons: Mapping[str, str], inert: Inert) -> str:
    """``⚠️ [warning] db``: severity (with its icon) and category; the category alone for a gateway note."""
    if not view.severity:
        return inert(view.category)
    return f"{icons.get(view.severity, '')} [{view.severity}] {inert(view.category)}".strip()
