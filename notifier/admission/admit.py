"""The admission policy: a local refusal, else the store, else (``fail_open``) the fallback.

Every decision is counted here, once, whichever of the three made it. This is
the storm path: it stays a handful of lines with no await when the replica
refuses by itself.
"""

from __future__ import annotations

import time

from ..errors import StoreUnavailable
from ..metrics import Classes, Decisions
from ..models import Decision, Event
from .fallback import Fallback
from .limiter import Limiter


class Admission:
    """Decides events and counts the decisions."""

    def __init__(self, limiter: Limiter, fallback: Fallback | None, decisions: Decisions) -> None:
        self.limiter, self.fallback, self._decisions = limiter, fallback, decisions
        policy = limiter.policy  # overrides change rules, never the classes: this mapping holds
        critical = any(reserve.kind == "severity" for reserve in policy.reserves)
        self._count_critical = decisions.count_critical if critical else None
        if policy.reserves:
            names = ("none", *(reserve.name for reserve in policy.reserves))
            reserved = frozenset(r.name for r in policy.reserves if r.kind == "category")
            decisions.classes_of(Classes(policy.class_of, names, reserved))

    async def decide(self, event: Event) -> Decision:
        """Run one event through the limiter and count the outcome."""
        return self.decide_here(event) or await self.decide_in_store(event)

    def decide_here(self, event: Event) -> Decision | None:
        """The decision of ``event`` when this replica knows it (counted), else None; no I/O.

        In a storm nearly every event meets a level known to be full, or repeats an alert
        known firing: a plain call, so the storm path awaits nothing for it.
        """
        started = time.perf_counter()
        decision = self.limiter.decide_locally(event)
        if decision is not None:
            self._count(event, decision, started)
        return decision

    async def decide_in_store(self, event: Event) -> Decision:
        """The store's decision of ``event`` (or the fallback's, with ``fail_open``), counted."""
        started = time.perf_counter()
        try:
            decision = await self.limiter.decide_in_store(event)
        except StoreUnavailable:
            if self.fallback is None:
                raise
            decision = self.fallback.admit(event, self.limiter.policy)
        self._count(event, decision, started)
        return decision

    def _count(self, event: Event, decision: Decision, started: float) -> None:
        self._decisions.count(event.category, decision.outcome, decision.level, time.perf_counter() - started)
        if self._count_critical is not None and event.severity == "critical":  # its class may not be its category's
            self._count_critical(event.category, decision.outcome, decision.level)
