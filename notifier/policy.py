"""The limit tree as the gateway enforces it: levels, routes, overrides and windows, in one snapshot.

A :class:`Policy` is an immutable snapshot. The gateway builds one from the
settings and the configuration file at start and swaps it for a new one when a
run-time override or a maintenance window changes (``admission.overrides``);
whatever was decided under a snapshot is read under that same snapshot, never
under a newer one. Routing (``routing.Router``) does not change with overrides:
snapshots share one router and the paths it remembers.

An override replaces the rules of one value of one level (``(level, "")`` for
the root) until it lapses or is removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .config import EMPTY, Config
from .models import Facts
from .routing import DEFAULT_TEMPLATE, Path, Places, Router, routes_from
from .rules import Rules, longest_ms
from .settings import GLOBAL as GLOBAL  # the root's name without a file, re-exported: policy speaks of levels
from .settings import Settings
from .tree import CATEGORY as CATEGORY
from .tree import Level, Tree, level_index, tree_from_config
from .windows import MaintenanceWindow, QuietWindow, Span, current_or_next

MAX_CACHED_CHANNELS = 10_000  # channels whose quiet hours a snapshot remembers
CLOCK_SLACK_US = 1_000_000  # the replica's estimates of the store's clock differ by less than this
NO_QUIET_RECHECK_US = 3_600_000_000  # a channel with no quiet hours within 8 days is looked at again hourly

Target = tuple[str, str]  # (level name, value): what an override addresses; the root's value is ""


def override_field(target: Target, root: str) -> str:
    """The field of the overrides hash for ``(level, value)``: the root's name; a value's own name
    at the level named ``category`` (as before the tree) when it cannot be read as anything else
    (no ``=``, not the root's name); else ``level=value``. One field per target, whatever the values."""
    level, value = target
    if level == root:
        return level
    return value if level == CATEGORY and "=" not in value and value != root else f"{level}={value}"


def override_target(field: str, root: str) -> Target:
    """The ``(level, value)`` a field of the overrides hash addresses (see :func:`override_field`)."""
    level, sep, value = field.partition("=")
    if sep:
        return (level, value)
    return (root, "") if field == root else (CATEGORY, field)


@dataclass(frozen=True)
class Override:
    """Rules that replace a level value's own, until ``until_us`` (store clock) or until removed."""

    level: str
    value: str
    rules: Rules
    until_us: int | None = None
    by: str = ""

    @property
    def target(self) -> Target:
        return (self.level, self.value)


def places_from(config: Config, settings: Settings) -> Places:
    """The destinations' default channels (the file's, else the one of NOTIFIER_SLACK_CHANNEL)."""
    specs = config.destinations
    if specs:
        channels = {name: (spec.channel or name) if spec.kind == "slack" else name for name, spec in specs.items()}
    else:
        creds = settings.slack_bot_token or settings.slack_webhook_url
        channels = {"slack" if creds else "console": settings.slack_channel or "default"}
    one_channel = frozenset(name for name, spec in specs.items() if spec.kind != "slack")
    bound = {name: t.destination for name, t in config.tokens.items() if t.destination in channels}
    return Places(channels, one_channel, bound)


@dataclass(frozen=True)
class Policy:
    """One snapshot of the tree the gateway enforces."""

    tree: Tree
    router: Router
    categories: frozenset[str] | None = None  # NOTIFIER_CATEGORIES; None = any valid name
    overrides: Mapping[Target, Override] = field(default_factory=dict)
    version: int = 0  # the store's override version this snapshot was read at
    quiet: Mapping[str, tuple[QuietWindow, ...]] = field(default_factory=dict)  # channel or "*" -> windows
    maintenance: Mapping[str, MaintenanceWindow] = field(default_factory=dict)  # not yet ended, by name
    hold_bypass: frozenset[str] = frozenset()  # severities no window holds
    _quiet_spans: dict[str, tuple[int, int, tuple[str, Span] | None]] = field(init=False, repr=False, compare=False)

    @classmethod
    def from_settings(cls, settings: Settings, config: Config = EMPTY) -> Policy:
        tree = tree_from_config(config, settings)
        default_template = DEFAULT_TEMPLATE if DEFAULT_TEMPLATE in config.templates else None
        routes = routes_from(config, settings.category_channels)
        return cls(
            tree=tree,
            router=Router(tree, routes, places_from(config, settings), default_template),
            categories=None if settings.categories is None else frozenset(settings.categories),
            quiet=dict(settings.quiet_hours),
            hold_bypass=frozenset(settings.hold_bypass),
        )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_quiet_spans", {})

    @property
    def root(self) -> Level:
        return self.tree[0]

    def level(self, name: str) -> int | None:
        """The index of the level called ``name``, or None."""
        return level_index(self.tree, name)

    def route(self, event: Facts, source: str, channel: str | None = None) -> Path:
        """Where ``event`` from ``source`` goes, and its value and class at every level."""
        return self.router.path(event, source, channel)

    def rules_for(self, level: int, value: str) -> Rules:
        """The rules in force for ``value`` of level number ``level`` (its override first)."""
        tree_level = self.tree[level]
        override = self.overrides.get((tree_level.name, value)) if self.overrides else None
        return override.rules if override is not None else tree_level.rules_of(value)

    def default_rules(self, level: int, value: str) -> Rules:
        """The configured rules of ``value`` at level number ``level``, whatever override is in force."""
        return self.tree[level].rules_of(value)

    def until_us(self, level: int, value: str) -> int | None:
        """When the override of that level value lapses (store clock), if it has one that does."""
        override = self.overrides.get((self.tree[level].name, value)) if self.overrides else None
        return override.until_us if override is not None else None

    def longest_ms(self, level: int, value: str) -> int:
        return longest_ms(self.rules_for(level, value))

    @property
    def earliest_until_us(self) -> int | None:
        """The first moment (store clock) an override of this snapshot lapses."""
        ends = [o.until_us for o in self.overrides.values() if o.until_us is not None]
        return min(ends) if ends else None

    def channel_for(self, category: str) -> str:
        """The channel events of ``category`` go to when nothing else about them decides it."""
        default = self.router.places.default
        route = self.router.match(
            {"category": category, "severity": "info", "status": "firing", "destination": default}
        )
        return self.router.channel_of(route)

    def mute_target(self, category: str) -> Target | None:
        """What a message's mute control mutes: its category at the level named ``category``, else at
        the lowest level; None for a tree of the root alone (a mute there would silence everything)."""
        named = self.level(CATEGORY)
        index = named if named else len(self.tree) - 1  # (a root named category is still the root)
        return (self.tree[index].name, category) if index else None

    def allows(self, category: str) -> bool:
        """False when ``NOTIFIER_CATEGORIES`` is set and does not name ``category``."""
        return self.categories is None or category in self.categories

    def with_overrides(
        self,
        overrides: Mapping[Target, Override],
        version: int,
        maintenance: Mapping[str, MaintenanceWindow] | None = None,
    ) -> Policy:
        """The same defaults with ``overrides`` (and maintenance windows) in force, as read at ``version``."""
        windows = self.maintenance if maintenance is None else dict(maintenance)
        return replace(self, overrides=dict(overrides), version=version, maintenance=windows)

    def quiet_windows(self, channel: str) -> tuple[QuietWindow, ...]:
        """The quiet hours of ``channel``: its own and those of every channel (``*``)."""
        return self.quiet.get(channel, ()) + self.quiet.get("*", ())

    def hold(self, channel: str, category: str, now_us: int) -> tuple[str, Span] | None:
        """The window that holds an event of ``category`` in ``channel`` at ``now_us`` (or next), with its span.

        Maintenance windows first (their name), then quiet hours (as configured).
        The span may lie ahead: the admission script decides by the store's clock
        whether it holds, so a window starts and ends to the microsecond everywhere.
        """
        if not self.maintenance and not self.quiet:
            return None  # the storm path without windows: nothing to look at
        spans = [(w.name, w.span) for w in self.maintenance.values() if w.covers(channel, category)]
        quiet = self._quiet_span(channel, now_us)
        if quiet is not None:
            spans.append(quiet)
        current = [(name, span) for name, span in spans if span.end_us > now_us]
        return min(current, key=lambda item: item[1].start_us) if current else None

    def window_end(self, channel: str, name: str, start_us: int, now_us: int) -> int:
        """The end (us) of the window ``name`` of ``channel`` that started at ``start_us``, as this
        snapshot knows it; 0 when that stretch is no longer known (ended, removed, reconfigured)."""
        window = self.maintenance.get(name)
        if window is not None and window.start_us == start_us:
            return window.end_us
        quiet = self._quiet_span(channel, now_us)
        if quiet is not None and quiet[0] == name and quiet[1].start_us == start_us:
            return quiet[1].end_us
        return 0

    def window_channels(self, window: MaintenanceWindow) -> list[str]:
        """The channels a maintenance window holds: its own, then those of its categories."""
        channels = dict.fromkeys([*window.channels, *(self.channel_for(c) for c in window.categories)])
        return list(channels)

    def _quiet_span(self, channel: str, now_us: int) -> tuple[str, Span] | None:
        """The channel's quiet hours in force or next; kept until they end (one zone computation per stretch)."""
        valid_from, valid_until, found = self._quiet_spans.get(channel, (0, 0, None))
        if valid_from - CLOCK_SLACK_US <= now_us < valid_until:  # a store clock set back: computed again
            return found
        windows = self.quiet_windows(channel)
        span = current_or_next(windows, now_us) if windows else None
        found = ("; ".join(w.text for w in windows), span) if span is not None else None
        if len(self._quiet_spans) < MAX_CACHED_CHANNELS:
            self._quiet_spans[channel] = (now_us, span.end_us if span else now_us + NO_QUIET_RECHECK_US, found)
        return found
