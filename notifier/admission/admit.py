"""The admission policy: a local refusal, else the store, else (``fail_open``) the fallback.

Every decision is counted here, once, whichever of the three made it. This is
the storm path: it stays a handful of lines with no await when the replica
refuses by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import StoreFull, StoreUnavailable
from ..metrics import CATEGORIES, Decisions, Labels
from ..models import Decision, Event, Facts, Outcome
from ..policy import Policy
from ..routing import Path
from .fallback import Fallback
from .limiter import Limiter


class Admission:
    """Decides events and counts the decisions."""

    def __init__(self, limiter: Limiter, fallback: Fallback | None, decisions: Decisions) -> None:
        self.limiter, self.fallback, self._decisions = limiter, fallback, decisions
        policy = limiter.policy  # overrides change rules, never the tree: these names hold
        root_classes = tuple(reserve.name for reserve in policy.root.reserves)
        decisions.tree_of(tuple(level.name for level in policy.tree), root_classes, _reserved(policy))
        # Where an event from a source goes (naming a channel itself at a front door): the router's
        # own method, which every snapshot shares (overrides change rules, never routes). Bound here,
        # it is one call on the storm path, not three.
        self.route: Callable[..., Path] = policy.router.path

    async def decide(self, event: Event, source: str = "anonymous", channel: str | None = None) -> Decision:
        """Route one event, run it through the limiter and count the outcome."""
        return await self.decide_on(event, self.route(event, source, channel), source)

    async def decide_on(self, event: Event, path: Path, source: str) -> Decision:
        """Run one routed event through the limiter (here, here after a fresh read, else in the store)
        and count the outcome."""
        return (
            self.decide_here(event, path)
            or await self.decide_after_read(event, path)
            or await self.decide_in_store(event, path, source)
        )

    def decide_here(self, event: Facts, path: Path) -> Decision | None:
        """The decision of ``event`` when this replica knows it (counted), else None; no I/O.

        In a storm nearly every event meets a level known to be full, or repeats an alert
        known firing: a plain call, so the storm path awaits nothing for it.
        """
        started = time.perf_counter()
        decision = self.limiter.decide_locally(event, path)
        if decision is not None:
            self._decisions.count(path, decision.outcome, decision.level, time.perf_counter() - started)
        return decision

    async def decide_after_read(self, event: Facts, path: Path) -> Decision | None:
        """A repeat ``decide_here`` could not answer only because the alert epoch's read had aged:
        its answer after the next read (counted), else None. The events door awaits it before reading
        an event in full: on a loaded replica, one storm repeat in ten or so meets an aged read."""
        started = time.perf_counter()
        decision = await self.limiter.repeat_after_read(event)
        if decision is not None:
            self._decisions.count(path, decision.outcome, decision.level, time.perf_counter() - started)
        return decision

    async def decide_in_store(
        self, event: Event, path: Path, source: str = "anonymous", message: dict[str, Any] | None = None
    ) -> Decision:
        """The store's decision of ``event`` (or the fallback's, with ``fail_open``), counted.

        ``message``: a front-door client's message, posted as sent when admitted (``EventEntry.message``).
        """
        started = time.perf_counter()
        try:
            decision = await self.limiter.decide_in_store(event, path, source, message)
        except StoreUnavailable as exc:
            if self.fallback is None or isinstance(exc, StoreFull):  # what it admits could never be restored
                raise
            decision = self.fallback.admit(event, path, source, self.limiter.policy, message)
        self._decisions.count(path, decision.outcome, decision.level, time.perf_counter() - started)
        return decision

    def refuse(self, path: Path, level_name: str) -> Decision:
        """Refuse an event going ``path`` as the level ``level_name`` did another one (a reply to, or
        an update of, a refused front-door message): counted as dropped there, digested; no I/O."""
        names = [level.name for level in self.limiter.policy.tree]
        level = names.index(level_name) if level_name in names else 0  # a level gone since: the root's
        self.limiter.count_refusal(path, level)
        self._decisions.count(path, Outcome.DROPPED, names[level], 0.0)
        return Decision(Outcome.DROPPED, "", names[level], "", 0.0, path.values[level] if level else None)


def _reserved(policy: Policy) -> Labels:
    """Every ``LEVEL=VALUE`` class of the tree, and the categories among them, for the metrics' labels."""
    keys = {level.name: level.key for level in policy.tree}
    for level in policy.tree:
        for reserves in (level.reserves, *level.value_reserves.values()):
            for reserve in reserves:
                if reserve.kind in keys:
                    yield reserve.kind, reserve.name
                    if keys[reserve.kind] == "category":
                        yield CATEGORIES, reserve.name
