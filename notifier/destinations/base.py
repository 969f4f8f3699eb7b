"""The seam every destination kind plugs into: the message it is given, and what it answers.

The delivery worker holds a :class:`Sink` per destination and asks it, never the
kind's name: whether to pace it, whether it edits its messages, what it answered.
Every sink raises the same errors (``errors.DeliveryError`` and its kinds), so
retries, backoff and 429 pauses are the worker's, shared across replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ..rules import Rule
from ..view import View, unescape

Block = dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One message: a Slack plain-text fallback and Block Kit blocks, and the neutral view of it.

    Slack sinks post ``text`` and ``blocks``; the other kinds shape ``view``.
    """

    channel: str
    text: str
    blocks: list[Block] = field(default_factory=list)
    thread_ts: str | None = None  # a reply in the thread of this message
    # A front-door client's own fields (text, blocks, attachments, username, ...), posted as sent:
    # they take the place of the gateway's (``text`` and ``blocks`` above then only show it on the console).
    sent: Mapping[str, Any] = field(default_factory=dict)
    shape: str = ""  # the template that shaped it ("": the built-in shape)
    view: View | None = None  # None: a view of ``text`` alone (see view_of)


class Posted(NamedTuple):
    """Where a message went: the channel id the chat answered (not the name) and the message's id."""

    channel_id: str
    ts: str


class Sink(Protocol):
    """Something that takes messages: a Slack workspace, a webhook, Teams, Discord, the console."""

    name: str
    paced: bool  # keep the per-channel pace (chats do; stdout does not)
    edits: bool  # can edit a posted message
    threads: bool  # can reply in a posted message's thread (``thread_ts``); with edits and no threads, edits show all
    rate: tuple[Rule, ...]  # the pace its owner documents, per channel (a destination's ``rate`` overrides it)

    async def post(self, message: Message) -> Posted:
        """Post ``message``; raises a ``DeliveryError`` when it was not taken."""

    async def update(self, posted: Posted, message: Message) -> None:
        """Replace the content of a posted message (only where :attr:`edits`)."""


def view_of(message: Message) -> View:
    """The message's view, or one of its text alone: a front-door client's message (its ``text`` is the
    plain rendering of what the client sent, blocks and attachments included), Slack's escaping undone."""
    if message.view is not None:
        return message.view
    return View(text=unescape(message.text) or "(empty message)")
