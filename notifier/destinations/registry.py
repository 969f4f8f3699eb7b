"""The fleet's destinations as sinks: which destination a channel value belongs to, and its sink there.

A channel value is what limits, stats and the outbox know a channel by: with one
destination the bare channel (``#alerts``), with several ``acme:#alerts`` (or a
webhook's name alone, ``legacy``). :class:`Sinks` maps a value to the sink of its
destination, scoped: the scoped sink posts to the bare channel and answers the
channel id with the destination's name in front, so a later edit of that post
(kept in the store as the id) finds its workspace again. A value that names no
destination (an entry admitted before the destinations changed) goes to the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

import aiohttp

from ..rules import Rules
from ..slack.sinks import ConsoleSink, SlackApiSink, WebhookSink
from .base import Message, Posted, Sink
from .discord import DiscordSink
from .google_chat import GoogleChatSink
from .mattermost import MattermostSink
from .spec import Destination
from .teams import TeamsSink

Factory = Callable[[Destination, aiohttp.ClientSession, Rules], Sink]
Hooked = Callable[[str, aiohttp.ClientSession, Rules | None], Sink]


def _hook(kind: Hooked) -> Factory:
    """A webhook kind's factory: its URL (a secret) and the destination's ``rate``, if any."""

    def make(destination: Destination, session: aiohttp.ClientSession, slack_rate: Rules) -> Sink:
        url = destination.url.get_secret_value() if destination.url else ""
        return kind(url, session, destination.rate)

    return make


# One entry per kind: a new kind is a module of its own and a line here.
KINDS: dict[str, Factory] = {
    "slack": SlackApiSink,
    "slack-webhook": WebhookSink,
    "teams": _hook(TeamsSink),
    "discord": _hook(DiscordSink),
    "mattermost": _hook(MattermostSink),
    "google-chat": _hook(GoogleChatSink),
    "console": lambda destination, session, rate: ConsoleSink(),
}


class Scoped:
    """One destination's sink, seen through channel values: ``acme:#alerts`` is ``#alerts`` there."""

    def __init__(self, name: str, sink: Sink, prefix: str) -> None:
        self.destination, self.inner, self._prefix = name, sink, prefix
        self.name, self.paced, self.edits, self.threads = sink.name, sink.paced, sink.edits, sink.threads
        self.rate = sink.rate

    async def post(self, message: Message) -> Posted:
        bare = message.channel.removeprefix(self._prefix)
        posted = await self.inner.post(replace(message, channel=bare) if bare != message.channel else message)
        return Posted(self._prefix + posted.channel_id, posted.ts) if self._prefix else posted

    async def update(self, posted: Posted, message: Message) -> None:
        bare = posted.channel_id.removeprefix(self._prefix)
        await self.inner.update(Posted(bare, posted.ts), message)

    def bare(self, channel: str) -> str:
        """``channel`` as this destination names it (its prefix dropped)."""
        return channel.removeprefix(self._prefix)


class Sinks:
    """Every destination's scoped sink, and the one a channel value (or a post's channel id) belongs to."""

    def __init__(self, scoped: Mapping[str, Scoped]) -> None:
        self._scoped = dict(scoped)
        self._first = next(iter(self._scoped.values()))
        self.named = len(self._scoped) > 1

    def of(self, channel: str) -> Scoped:
        """The sink of the destination ``channel`` (a channel value, or a posted channel id) belongs to."""
        if not self.named:
            return self._first
        head, sep, _ = channel.partition(":")
        return self._scoped.get(head if sep else channel) or self._first

    def __iter__(self) -> Iterator[Scoped]:
        return iter(self._scoped.values())

    @property
    def any_edits(self) -> bool:
        return any(sink.edits for sink in self._scoped.values())

    @property
    def default(self) -> Scoped:
        return self._first

    async def update(self, posted: Posted, message: Message) -> None:
        """Edit a post, through the sink of the destination it was posted to."""
        await self.of(posted.channel_id).update(posted, message)


def build(destinations: list[Destination], session: aiohttp.ClientSession, slack_rate: Rules) -> Sinks:
    """A sink per destination, scoped when there are several (their channel values carry their names)."""
    named = len(destinations) > 1
    scoped = {}
    for destination in destinations:
        sink = KINDS[destination.kind](destination, session, slack_rate)
        prefix = f"{destination.name}:" if named and not destination.one_channel else ""
        scoped[destination.name] = Scoped(destination.name, sink, prefix)
    return Sinks(scoped)
