"""The limit hierarchy as data: levels, rules, reserves, routing, with overrides applied.

A :class:`Policy` is an immutable snapshot. The gateway builds one from the
settings at start and swaps it for a new one when a run-time override changes
(``admission.overrides``); whatever was decided under a snapshot is read under
that same snapshot, never under a newer one.

Levels: ``global`` (every event) and one level per category. The global level
may be split into classes with reserved slots (``Fair shares`` in the contract):
an event of severity ``critical`` when ``NOTIFIER_CRITICAL_RESERVE`` is above 0%,
else its category when that category has a reserve, else no class.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from .rules import Rule, Rules, longest_ms
from .settings import GLOBAL as GLOBAL  # the global level's name, re-exported: policy speaks of levels
from .settings import Settings
from .windows import MaintenanceWindow, QuietWindow, Span, current_or_next

CATEGORY = "category"  # what a refusal names for a category's own level
CRITICAL_CLASS = "severity:critical"
MAX_CACHED_CHANNELS = 10_000  # channels whose quiet hours a snapshot remembers (channels come from settings)
CLOCK_SLACK_US = 1_000_000  # the replica's estimates of the store's clock differ by less than this
NO_QUIET_RECHECK_US = 3_600_000_000  # a channel with no quiet hours within 8 days is looked at again hourly


def category_class(category: str) -> str:
    """The class id of a category with a reserve."""
    return f"category:{category}"


@dataclass(frozen=True)
class Override:
    """Rules that replace a level's own, until ``until_us`` (store clock) or until removed."""

    level: str
    rules: Rules
    until_us: int | None = None
    by: str = ""


@dataclass(frozen=True)
class Reserve:
    """A class's guaranteed share of the global level."""

    class_id: str
    share: Fraction  # percent, exact

    @property
    def name(self) -> str:
        """What the class is called in answers: ``critical`` or the category."""
        return self.class_id.partition(":")[2]

    @property
    def kind(self) -> str:
        return self.class_id.partition(":")[0]

    def slots(self, rule: Rule) -> int:
        """Reserved slots of this class under ``rule``: floor(share * count / 100), exactly."""
        return math.floor(self.share * rule.count / 100)


@dataclass(frozen=True)
class Policy:
    """One snapshot of the hierarchy the gateway enforces."""

    global_rules: Rules
    category_default: Rules
    category_rules: Mapping[str, Rules]
    channels: Mapping[str, str]
    default_channel: str
    categories: frozenset[str] | None = None  # NOTIFIER_CATEGORIES; None = any valid name
    reserves: tuple[Reserve, ...] = ()
    overrides: Mapping[str, Override] = field(default_factory=dict)
    version: int = 0  # the store's override version this snapshot was read at
    quiet: Mapping[str, tuple[QuietWindow, ...]] = field(default_factory=dict)  # channel or "*" -> windows
    maintenance: Mapping[str, MaintenanceWindow] = field(default_factory=dict)  # not yet ended, by name
    hold_bypass: frozenset[str] = frozenset()  # severities no window holds
    _critical: int = field(init=False, repr=False, compare=False)
    _quiet_spans: dict[str, tuple[int, int, tuple[str, Span] | None]] = field(init=False, repr=False, compare=False)
    _by_category: Mapping[str, int] = field(init=False, repr=False, compare=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        reserves = [Reserve(category_class(c), s) for c, s in sorted(settings.category_reserves.items()) if s]
        if settings.critical_reserve:
            reserves.insert(0, Reserve(CRITICAL_CLASS, settings.critical_reserve))
        return cls(
            global_rules=settings.global_limit,
            category_default=settings.category_limit,
            category_rules=dict(settings.category_limits),
            channels=dict(settings.category_channels),
            default_channel=settings.slack_channel or "default",
            categories=None if settings.categories is None else frozenset(settings.categories),
            reserves=tuple(reserves),
            quiet=dict(settings.quiet_hours),
            hold_bypass=frozenset(settings.hold_bypass),
        )

    def with_overrides(
        self,
        overrides: Mapping[str, Override],
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

    def rules_for(self, level: str) -> Rules:
        """The rules in force for ``level``: ``global`` or a category (its override first)."""
        override = self.overrides.get(level)
        if override is not None:
            return override.rules
        if level == GLOBAL:
            return self.global_rules
        return self.category_rules.get(level, self.category_default)

    def default_rules(self, level: str) -> Rules:
        """The rules of ``level`` from the settings, whatever override is in force."""
        return self.global_rules if level == GLOBAL else self.category_rules.get(level, self.category_default)

    def until_us(self, level: str) -> int | None:
        """When the override of ``level`` lapses (store clock), if it has one that does."""
        override = self.overrides.get(level)
        return override.until_us if override is not None else None

    @property
    def earliest_until_us(self) -> int | None:
        """The first moment (store clock) an override of this snapshot lapses."""
        ends = [o.until_us for o in self.overrides.values() if o.until_us is not None]
        return min(ends) if ends else None

    def channel_for(self, category: str) -> str:
        """The Slack channel events of ``category`` go to."""
        return self.channels.get(category) or self.default_channel

    def allows(self, category: str) -> bool:
        """False when ``NOTIFIER_CATEGORIES`` is set and does not name ``category``."""
        return self.categories is None or category in self.categories

    def __post_init__(self) -> None:
        # class_of runs for every event of a storm: a lookup, not a scan of the reserves.
        by_class = {reserve.class_id: index for index, reserve in enumerate(self.reserves, 1)}
        object.__setattr__(self, "_critical", by_class.pop(CRITICAL_CLASS, 0))
        object.__setattr__(self, "_by_category", {c.partition(":")[2]: i for c, i in by_class.items()})
        object.__setattr__(self, "_quiet_spans", {})

    def class_of(self, category: str, severity: str) -> int:
        """The index of the event's class in :attr:`reserves`, plus one; 0 for no class."""
        if self._critical and severity == "critical":
            return self._critical
        return self._by_category.get(category, 0)

    def one_class(self, category: str) -> bool:
        """True when every event of ``category`` is of one class (no critical reserve sets some apart)."""
        return self.class_of(category, "critical") == self.class_of(category, "info")

    def levels(self, categories: list[str]) -> Iterator[tuple[str, Rules]]:
        """``global`` and each of ``categories`` with the rules in force."""
        yield GLOBAL, self.rules_for(GLOBAL)
        for category in categories:
            yield category, self.rules_for(category)

    @property
    def global_longest_ms(self) -> int:
        return longest_ms(self.rules_for(GLOBAL))
