"""Routing: where an event goes, and its path through the limit tree, computed once per kind of event.

Routing decides where, admission decides whether: the channel is a level key,
so routes run first. The first route whose ``match`` holds decides the channel
(and the template, and for front-door messages the category); with none, the
default channel. A ``match`` maps keys (``category``, ``source``, ``severity``,
``status``, ``channel``, ``field:NAME``) to regular expressions anchored at both
ends, matched in linear time (``patterns.py``); ``channel`` there is the channel a
message names itself (the front doors), empty for events, which name none.

An event's :class:`Path` is its channel and template, and per level its value and
class. Paths are interned: events that agree on every key routes and levels read
share one path object, so the storm path builds a small tuple and does one
lookup, and counters keyed by a path hash it by identity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .config import FIELD_PREFIX, Config
from .models import Facts
from .patterns import Pattern
from .tree import NO_VALUE, Tree, class_of

MAX_PATHS = 10_000  # kinds of event remembered: values come from clients
DEFAULT_TEMPLATE = "default"  # a template of this name shapes every event no route gives one


@dataclass(frozen=True)
class Route:
    """One route: what it matches (key, anchored pattern), where it sends, how it shapes."""

    match: tuple[tuple[str, Pattern], ...]
    channel: str | None
    template: str | None = None
    category: str | None = None
    destination: str | None = None

    def matches(self, values: Mapping[str, str]) -> bool:
        return all(pattern.fullmatch(values.get(key, "")) for key, pattern in self.match)


@dataclass(frozen=True)
class Places:
    """Where events can go: each destination's default channel, in order (the first is the default).

    With more than one destination a channel value names its destination,
    ``acme:#alerts``; a webhook's name stands for its one channel. With one, a
    channel value is the bare channel, as before destinations.
    """

    channels: Mapping[str, str]  # destination -> its default channel
    one_channel: frozenset[str] = frozenset()  # webhooks: the chat fixes the channel
    by_token: Mapping[str, str] = field(default_factory=dict)  # a token's name -> the destination it is bound to

    @property
    def default(self) -> str:
        return next(iter(self.channels))

    @property
    def named(self) -> bool:
        """True when channel values carry their destination's name."""
        return len(self.channels) > 1

    def value(self, destination: str, channel: str) -> str:
        """The channel value of ``channel`` at ``destination``: limits, stats and globs see this."""
        if not self.named:
            return channel
        return destination if destination in self.one_channel else f"{destination}:{channel}"


def single(channel: str) -> Places:
    """The places of a gateway with one destination whose default channel is ``channel``."""
    return Places({"": channel})


Cell = tuple[int, str, int]  # (level index, value, class): one bucket of one class, as the limiter knows it


class Path:
    """An event's way: its channel and template, and per level its value and class.

    Compared and hashed by identity: the router hands out one object per kind of event.
    """

    __slots__ = ("category", "cells", "channel", "classes", "template", "values")

    def __init__(
        self, channel: str, template: str | None, category: str, values: tuple[str, ...], classes: tuple[int, ...]
    ) -> None:
        self.channel, self.template, self.category = channel, template, category
        self.values, self.classes = values, classes
        self.cells: tuple[Cell, ...] = tuple(zip(range(len(values)), values, classes, strict=True))

    def __repr__(self) -> str:
        return f"Path({self.channel!r}, {self.template!r}, {self.values!r}, {self.classes!r})"


class Router:
    """Routes and the tree's keys: the path of any event, remembered per kind of event."""

    def __init__(self, tree: Tree, routes: Sequence[Route], places: Places, default_template: str | None) -> None:
        self.tree, self.routes, self.places = tree, tuple(routes), places
        self.default_template = default_template
        keys = [level.key for level in tree if level.key] + [key for route in routes for key, _ in route.match]
        self._fields = tuple(dict.fromkeys(k.removeprefix(FIELD_PREFIX) for k in keys if k.startswith(FIELD_PREFIX)))
        self._paths: dict[tuple[object, ...], Path] = {}

    def path(self, event: Facts, source: str, channel: str | None = None) -> Path:
        """The path of ``event`` sent by ``source`` (naming ``channel`` itself, at a front door)."""
        fields = self._fields
        kind: tuple[object, ...] = (event.category, source, event.severity, event.status, channel)
        if len(fields) == 1:  # the usual tree reads one field: no loop (a comprehension is a call)
            kind += (event.fields.get(fields[0]),)
        elif fields:
            kind += tuple(map(event.fields.get, fields))
        path = self._paths.get(kind)
        if path is None:
            if len(self._paths) >= MAX_PATHS:
                self._paths.clear()  # only a shortcut: a path is computed again, never wrong
            path = self._paths[kind] = self._route(event, source, channel)
        return path

    @property
    def default_channel(self) -> str:
        """The channel value of events nothing else sends anywhere."""
        places = self.places
        return places.value(places.default, places.channels[places.default])

    def channel_of(self, route: Route | None, channel: str | None = None, destination: str | None = None) -> str:
        """The channel value an event goes to: the one it names, else the route's, else its destination's own."""
        places = self.places
        destination = destination or (route.destination if route and route.destination else places.default)
        bare = channel or (route.channel if route and route.channel else places.channels[destination])
        return places.value(destination, bare)

    def door_route(self, source: str, channel: str) -> Route | None:
        """The route of a front-door message from ``source`` naming ``channel``, before it is an event
        (its category comes of it): matched on the channel value and destination, as an event's are."""
        places = self.places
        first = places.by_token.get(source, places.default)
        named = places.value(first, channel) if channel else ""
        return self.match({"source": source, "channel": named, "destination": first})

    def match(self, values: Mapping[str, str]) -> Route | None:
        """The first route whose every pattern matches ``values`` (key -> value)."""
        return next((route for route in self.routes if route.matches(values)), None)

    def _route(self, event: Facts, source: str, channel: str | None) -> Path:
        places = self.places
        first = places.by_token.get(source, places.default)
        values = self._values(event, source, places.value(first, channel) if channel else "", first)
        route = self.match(values)
        destination = route.destination if route and route.destination else first
        values["channel"], values["destination"] = self.channel_of(route, channel, destination), destination
        template = route.template if route and route.template else self.default_template
        per_level = tuple(values[level.key] if level.key else "" for level in self.tree)
        named = {level.name: value for level, value in zip(self.tree, per_level, strict=True)}
        classes = tuple(
            class_of(level.reserves_of(value), event.severity, named)
            for level, value in zip(self.tree, per_level, strict=True)
        )
        return Path(values["channel"], template, event.category, per_level, classes)

    def _values(self, event: Facts, source: str, channel: str, destination: str) -> dict[str, str]:
        values = {
            "category": event.category,
            "source": source,
            "severity": event.severity,
            "status": event.status,
            "channel": channel,
            "destination": destination,
        }
        for name in self._fields:
            values[FIELD_PREFIX + name] = event.fields.get(name, NO_VALUE)
        return values


def routes_from(config: Config, category_channels: Mapping[str, str]) -> list[Route]:
    """The file's routes, else one route per ``NOTIFIER_CATEGORY_CHANNELS`` entry."""
    if config.routes:
        return [
            Route(
                tuple((key, Pattern(pattern)) for key, pattern in route.match.items()),
                route.channel,
                route.template,
                route.category,
                route.destination,
            )
            for route in config.routes
        ]
    return [Route((("category", Pattern(re.escape(c))),), ch) for c, ch in category_channels.items()]
