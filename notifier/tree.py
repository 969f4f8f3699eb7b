"""The limit tree as data: levels from the root down, each with its rules, values and reserves.

Every event passes every level. The root counts all events in one bucket; each
level below counts an event under its value there (its ``channel``, ``source``,
``severity``, ``status``, ``category`` or ``field:NAME``). A level may reserve
shares of its rules for classes of events (the contract's Fair shares, at any
level): ``critical`` (events of severity critical) or ``LEVEL=VALUE`` of a level
below it.

Without ``levels`` in the configuration file, the tree is the two levels of the
environment settings: ``global`` (reserves from ``NOTIFIER_CRITICAL_RESERVE`` and
``NOTIFIER_CATEGORY_RESERVES``) and ``category``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .config import CRITICAL, Config, LevelConfig
from .rules import Rule, Rules
from .settings import GLOBAL, Settings

CATEGORY = "category"  # the level a category's own rules live in (and the mute control mutes)
NO_VALUE = "-"  # an event's value at field:NAME when it has no such field


@dataclass(frozen=True)
class Reserve:
    """A class's guaranteed share of a level's rules: ``critical`` or ``LEVEL=VALUE``."""

    class_id: str
    share: Fraction  # percent, exact

    @property
    def name(self) -> str:
        """What the class is called in answers: ``critical``, or the value of ``LEVEL=VALUE``."""
        return self.class_id.partition("=")[2] or self.class_id

    @property
    def kind(self) -> str:
        """``severity`` for ``critical``, else the level its value is of."""
        level, sep, _ = self.class_id.partition("=")
        return level if sep else "severity"

    def slots(self, rule: Rule) -> int:
        """Reserved slots of this class under ``rule``: floor(share * count / 100), exactly."""
        return math.floor(self.share * rule.count / 100)


Reserves = tuple[Reserve, ...]


@dataclass(frozen=True)
class Level:
    """One level: its name, the key it counts events under (None at the root), rules and reserves."""

    name: str
    key: str | None
    rules: Rules
    values: Mapping[str, Rules] = field(default_factory=dict)  # values with rules of their own
    reserves: Reserves = ()
    value_reserves: Mapping[str, Reserves] = field(default_factory=dict)  # values with reserves of their own

    def rules_of(self, value: str) -> Rules:
        """The configured rules of ``value`` (no override)."""
        return self.values.get(value, self.rules)

    def reserves_of(self, value: str) -> Reserves:
        return self.value_reserves.get(value, self.reserves)

    @property
    def reserving(self) -> bool:
        """True when some value of this level has reserves."""
        return bool(self.reserves) or any(self.value_reserves.values())


Tree = tuple[Level, ...]


def tree_from_settings(settings: Settings) -> Tree:
    """The two levels of the environment settings: ``global`` and ``category``."""
    reserves = [Reserve(f"{CATEGORY}={c}", s) for c, s in sorted(settings.category_reserves.items()) if s]
    if settings.critical_reserve:
        reserves.insert(0, Reserve(CRITICAL, settings.critical_reserve))
    return (
        Level(GLOBAL, None, settings.global_limit, reserves=tuple(reserves)),
        Level(CATEGORY, CATEGORY, settings.category_limit, dict(settings.category_limits)),
    )


def tree_from_config(config: Config, settings: Settings) -> Tree:
    """The file's tree, or the settings' when the file has no ``levels``."""
    if config.levels is None:
        return tree_from_settings(settings)
    return tuple(_level(level) for level in config.levels)


def _level(level: LevelConfig) -> Level:
    own = {v: _reserves(limits.reserves) for v, limits in level.values.items() if limits.reserves is not None}
    return Level(
        level.name,
        level.key,
        level.rules,
        {value: limits.rules for value, limits in level.values.items()},
        _reserves(level.reserves),
        own,
    )


def _reserves(shares: Mapping[str, Fraction]) -> Reserves:
    return tuple(Reserve(class_id, share) for class_id, share in shares.items() if share)


def class_of(reserves: Reserves, severity: str, values: Mapping[str, str]) -> int:
    """The event's class among ``reserves`` (index from 1; 0 for none).

    ``critical`` when it matches and is reserved for, else the first ``LEVEL=VALUE``
    in the order written that the event's ``values`` (level name -> value) match.
    """
    if severity == CRITICAL:
        for index, reserve in enumerate(reserves, 1):
            if reserve.class_id == CRITICAL:
                return index
    for index, reserve in enumerate(reserves, 1):
        level, sep, value = reserve.class_id.partition("=")
        if sep and values.get(level) == value:
            return index
    return 0


def level_index(tree: Sequence[Level], name: str) -> int | None:
    """The position of the level called ``name``, or None."""
    return next((i for i, level in enumerate(tree) if level.name == name), None)
