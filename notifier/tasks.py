"""Background loops: run a step every N seconds, and stop them for certain.

One ``task.cancel()`` is not always enough. On Python 3.10 and 3.11,
``asyncio.wait_for`` returns the inner result and drops a cancellation that
arrives in the same loop turn as that result (CPython gh-86296, fixed in 3.12),
and redis-py wraps every socket write in ``wait_for`` when ``socket_timeout``
is set. A loop cancelled at that moment carries on, and a shutdown that waits
for it waits forever. So tasks are cancelled again until they end.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import ParamSpec, TypeVar

from .errors import StoreUnavailable

log = logging.getLogger(__name__)

RECANCEL_EVERY = 0.1  # seconds between cancellations of a task that is still running
STORE_RETRY = 0.5  # seconds (plus as much jitter) between attempts while the store is down

P = ParamSpec("P")
T = TypeVar("T")


async def until_answered(doing: str, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """``await call(...)`` until the store answers: what Slack already took must be recorded."""
    return await answered_within(None, doing, call, *args, **kwargs)


async def answered_within(
    attempts: int | None, doing: str, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``await call(...)``, again while the store does not answer: ``attempts`` times at most (None:
    until it answers), the last failure raised."""
    failed = 0
    while True:
        try:
            return await call(*args, **kwargs)
        except StoreUnavailable as exc:
            failed += 1
            if failed == attempts:
                raise
            log.warning("store unavailable while %s: %s", doing, exc)
            await asyncio.sleep(STORE_RETRY + random.uniform(0, STORE_RETRY))


async def every(doing: str, pause: Callable[[], float], step: Callable[[], Awaitable[object]]) -> None:
    """Run ``step`` forever, ``pause()`` seconds apart; a failure is logged, never fatal."""
    while True:
        await asyncio.sleep(pause())
        try:
            await step()
        except StoreUnavailable as exc:
            log.warning("store unavailable while %s: %s", doing, exc)
            await asyncio.sleep(random.uniform(0, STORE_RETRY))
        except Exception:  # a bug here must not silently stop the loop
            log.exception("%s failed; trying again", doing)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]], patience: float = 10.0) -> None:
    """Cancel ``tasks`` and wait until all have ended, cancelling again meanwhile.

    Gives up after ``patience`` seconds and logs the tasks still running, so a
    task that never ends cannot hold a shutdown forever.
    """
    pending = {task for task in tasks if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        done, pending = await asyncio.wait(pending, timeout=RECANCEL_EVERY)
        for task in done:  # retrieve outcomes: no "exception was never retrieved" warnings
            if not task.cancelled() and task.exception():
                log.error("background task %s failed", task.get_name(), exc_info=task.exception())
    if pending:
        log.error(
            "%d background tasks did not stop within %.0fs: %s",
            len(pending),
            patience,
            ", ".join(task.get_name() for task in pending),
        )
