"""What a message says, whatever the chat: the neutral form every destination kind shapes.

The delivery worker builds one :class:`View` beside each Slack message (the Slack
Block Kit shape is one shape among several); a Teams, Discord, Mattermost or
Google Chat sink builds its own payload from the view alone. Every string here is
the raw text as the event or the gateway wrote it, never escaped for a chat: each
kind escapes and cuts for itself, within its own limits.
"""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("info", "warning", "error", "critical")


@dataclass(frozen=True)
class Link:
    """A link button: what it says, and where it goes (an ``http(s)`` URL, checked at intake)."""

    text: str
    url: str


@dataclass(frozen=True)
class View:
    """One message in neutral form.

    ``head`` says what kind of message it is beyond an event's own: ``Resolved``,
    ``Firing again``, or a gateway note's own head (a digest's ``Suppressed 40
    notifications in the last 5m``); ``""`` for an event's first post. ``lines``
    are what changed since the message was posted (``Seen 3 times, last at
    14:05:09 UTC``, an acknowledgement, a mute). ``thread_key`` groups an alert's
    messages (its dedup key) where the chat threads by key (Google Chat).
    """

    text: str
    title: str = ""
    severity: str = ""  # one of SEVERITIES; "" for a gateway note (digest, window, folded backlog)
    category: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    links: tuple[Link, ...] = ()
    head: str = ""
    lines: tuple[str, ...] = ()
    resolved: bool = False
    thread_key: str = ""


def unescape(text: str) -> str:
    """Slack's escaping undone (``&lt;`` -> ``<``): for text the Slack builders escaped first."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
