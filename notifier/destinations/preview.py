"""What each kind of destination is sent for a message: ``notifier render --destination KIND`` prints it.

The same functions the sinks call, so what is shown is what is posted (a Slack
workspace's message as ``chat.postMessage`` takes it, a webhook's body as sent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..view import View
from . import discord, google_chat, mattermost, teams
from .base import Message, view_of

KINDS = ("slack", "slack-webhook", "teams", "discord", "mattermost", "google-chat")
_SHAPES: dict[str, Callable[[View], dict[str, Any]]] = {
    "teams": teams.shape,
    "discord": discord.shape,
    "mattermost": mattermost.shape,
    "google-chat": google_chat.shape,
}


def payload(kind: str, message: Message) -> dict[str, Any]:
    """The body ``kind`` is sent for ``message`` (``ValueError`` for a kind there is not)."""
    if kind in ("slack", "slack-webhook"):
        return {"channel": message.channel, "text": message.text, "blocks": message.blocks}
    if kind not in _SHAPES:
        raise ValueError(f"no destination kind {kind!r} (kinds: {', '.join(KINDS)})")
    return _SHAPES[kind](view_of(message))
