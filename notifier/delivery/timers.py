"""Things due later, taken by exactly one replica of the fleet: escalation steps, and the
sweep of alerts whose window ended from the open-alert index.

Like digests: the due times live in the shared store (``timers``: an alert's record ->
when to look at it), every replica looks often, and one atomic script call
(``lua/timers.lua``) decides and appends what is due to the outbox. From there a step
is a message like any other: paced, retried, and reclaimed by another replica after
``NOTIFIER_CLAIM_IDLE`` when the one that read it dies. A replica that dies before the
call loses nothing either: the timer is still due, and the next replica to look takes it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from ..escalation import Escalation
from ..policy import Policy, override_field
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..tasks import every
from .handover import Handover

log = logging.getLogger(__name__)

LOOK_EVERY = (0.2, 0.4)  # seconds between two looks (random within): steps are posted within 5 s of due
TAKE = 16  # due timers looked at per turn
SWEEP = 64  # ended alerts taken out of the index per turn
NO_MUTE = "="  # the mute prefix of a tree of the root alone: no field of the overrides starts with it


def step_args(escalation: Escalation) -> list[Any]:
    """The steps as ``timers.lua`` reads them: S, then per severity its name, n, (offset us, text) * n."""
    args: list[Any] = [len(escalation)]
    for severity, steps in escalation.items():
        args += [severity, len(steps)]
        for step in steps:
            args += [step.after_ms * 1000, step.text]
    return args


class Timers:
    """Takes the escalation steps that are due and keeps the open-alert index bounded."""

    def __init__(
        self, store: Store, scripts: Scripts, keys: Keys, escalation: Escalation, policy: Callable[[], Policy]
    ) -> None:
        self._store, self._scripts, self._keys = store, scripts, keys
        self._args = step_args(escalation)
        self._policy = policy
        self._handover = Handover(store, scripts, keys, policy)

    async def run(self) -> None:
        """Look for what is due, forever (a store outage or a bug is logged, never fatal)."""
        await every("taking what is due", lambda: random.uniform(*LOOK_EVERY), self.turn)

    async def turn(self) -> None:
        """One look: the steps due, the alerts whose window ended, then windows' hand-overs and announcements."""
        await self.take_due()
        await self.sweep()
        await self._handover.turn()

    async def take_due(self) -> int:
        """Append every due step to the outbox; how many this replica took."""
        keys = self._keys
        now_us = await self._store.server_time_us(keys.timers)
        due = await self._store.call(self._store.redis.zrangebyscore, keys.timers, "-inf", now_us, start=0, num=TAKE)
        taken = 0
        for record in map(as_text, due):
            step_keys = [keys.timers, keys.outbox, keys.stats, keys.overrides, record]
            args = ["step", self._mute_prefix(), *self._args]
            taken += int(await self._store.run(self._scripts.timers, step_keys, args))
        if taken:
            log.info("escalation: %d step(s) due, queued", taken)
        return taken

    def _mute_prefix(self) -> str:
        """How the overrides name a category's mute, before the category (see ``override_field``);
        ``=`` for a tree of the root alone (no field starts with it: nothing is muted)."""
        policy = self._policy()
        target = policy.mute_target("")
        return NO_MUTE if target is None else override_field(target, policy.root.name)

    async def sweep(self) -> int:
        """Take alerts whose window ended out of the open-alert index."""
        keys = self._keys
        now_us = await self._store.server_time_us(keys.alerts_ends)
        ended = await self._store.call(
            self._store.redis.zrangebyscore, keys.alerts_ends, "-inf", now_us, start=0, num=SWEEP
        )
        if not ended:
            return 0
        return int(await self._store.run(self._scripts.timers, [*keys.alert_keys, *map(as_text, ended)], ["sweep"]))
