"""A front-door client's message as Slack gets it: as the client sent it.

The door checked it and turned broadcast mentions into text where its token may
not mention (``http/slack_compat``); here it only becomes a :class:`Message` whose
``sent`` fields the sinks post unchanged. ``text`` and ``blocks`` of the
:class:`Message` itself are a plain rendering, for the console.
"""

from __future__ import annotations

from typing import Any

from ..destinations.base import Message

# What a client's message may carry to Slack (``chat.postMessage``; ``chat.update`` takes fewer).
POSTED = (
    "text",
    "blocks",
    "attachments",
    "thread_ts",
    "reply_broadcast",
    "mrkdwn",
    "unfurl_links",
    "unfurl_media",
    "username",
    "icon_emoji",
    "icon_url",
    "link_names",
    "parse",
    "metadata",
)
UPDATED = ("text", "blocks", "attachments", "link_names", "parse", "metadata", "reply_broadcast")


def as_sent(channel: str, message: dict[str, Any], plain: str, thread_ts: str | None = None) -> Message:
    """The client's ``message`` for ``channel``, in the thread ``thread_ts`` (where Slack has its parent).

    ``plain`` is its plain rendering (the console prints it). The client's own ``thread_ts`` gives
    way to ``thread_ts``, which delivery found for it (None: posted on its own).
    """
    sent = {name: message[name] for name in POSTED if name in message}
    sent.pop("thread_ts", None)
    if thread_ts:
        sent["thread_ts"] = thread_ts
    else:
        sent.pop("reply_broadcast", None)
    sent.setdefault("text", None)  # none given: Slack gets none, not the plain rendering
    return Message(channel, plain, [], thread_ts, sent)


def as_updated(channel: str, message: dict[str, Any]) -> Message:
    """A client's ``chat.update`` of a message, as sent (what ``chat.update`` takes of it)."""
    sent = {name: message[name] for name in UPDATED if name in message}
    return Message(channel, str(message.get("text") or "(blocks or attachments)"), [], None, sent)
