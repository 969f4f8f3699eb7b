"""The neutral view of each message the Slack builders make, for the kinds that are not Slack.

Every builder of ``slack.messages`` (and the folded backlog's) sets ``Message.view`` from the
same facts its blocks show, as raw text: the event's own strings as sent, and the gateway's
lines with Slack's escaping undone (:func:`notifier.view.unescape`). Each kind escapes and cuts
for itself (``destinations.teams``, ``destinations.google_chat``...).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..view import Link, View, unescape

RESOLVED, FIRING_AGAIN = "Resolved", "Firing again"


def event_view(event: dict[str, Any], lines: Iterable[str] = (), head: str = "", resolved: bool = False) -> View:
    """An event's view: its title, text, severity, category, fields and links; ``lines`` Slack-escaped."""
    return View(
        text=str(event.get("text") or ""),
        title=str(event.get("title") or ""),
        severity=str(event.get("severity") or "info"),
        category=str(event.get("category") or ""),
        fields=tuple((str(name), str(value)) for name, value in (event.get("fields") or {}).items()),
        links=links(event.get("links") or []),
        head=head,
        lines=tuple(unescape(line) for line in lines),
        resolved=resolved,
        thread_key=str(event.get("dedup_key") or ""),
    )


def links(given: Iterable[Any]) -> tuple[Link, ...]:
    """An event's links (``{"text", "url"}`` each) as :class:`Link` values; anything else is skipped."""
    return tuple(
        Link(str(link["text"]), str(link["url"])) for link in given if isinstance(link, dict) and link.get("url")
    )


def reply_view(event: dict[str, Any], reopened: bool) -> View:
    """A resolution (``Resolved``) or a reopening (``Firing again``) of an alert."""
    return event_view(event, head=FIRING_AGAIN if reopened else RESOLVED, resolved=not reopened)


def escalation_view(text: str, event: dict[str, Any] | None, quoted: str) -> View:
    """An escalation step: its text as the settings wrote it, in the alert's thread, quoting the alert if ``quoted``."""
    if event is None:
        return View(text=text)
    alert = event_view(event)
    return View(
        text=text,
        severity=alert.severity,
        category=alert.category,
        lines=(unescape(quoted),) if quoted else (),
        thread_key=alert.thread_key,
    )


def note_view(head: str, text: str = "", lines: Iterable[str] = ()) -> View:
    """A gateway note (digest, hand-over, window, folded backlog): its head and text, Slack-escaped, undone."""
    return View(text=unescape(text), head=unescape(head), lines=tuple(unescape(line) for line in lines))


def edited_view(text: str, category: str, lines: Iterable[str], resolved: bool) -> View:
    """A message clicked in Slack, known by its (escaped) text alone, with its state now."""
    return View(
        text=unescape(text),
        category=category,
        head=RESOLVED if resolved else "",
        lines=tuple(unescape(line) for line in lines),
        resolved=resolved,
    )
