"""Stopping background tasks for certain.

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
from collections.abc import Iterable

log = logging.getLogger(__name__)

RECANCEL_EVERY = 0.1  # seconds between cancellations of a task that is still running


async def cancel_and_wait(tasks: Iterable[asyncio.Task], patience: float = 10.0) -> None:
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
        log.error("%d background tasks did not stop within %.0fs: %s",
                  len(pending), patience, ", ".join(task.get_name() for task in pending))
