"""Background loops: a failing step is logged and the loop goes on; cancelled loops end."""

import asyncio

from notifier.errors import StoreUnavailable
from notifier.tasks import cancel_and_wait, every


async def test_a_background_loop_survives_an_unexpected_error(caplog):
    """A bug in one step (any exception, not only a store error) is logged, and the loop goes on."""
    calls = []

    async def step():
        calls.append(1)
        if len(calls) == 1:
            raise NameError("a bug")
        if len(calls) == 2:
            raise StoreUnavailable("down")

    task = asyncio.create_task(every("testing", lambda: 0.01, step))
    for _ in range(300):
        if len(calls) >= 4:
            break
        await asyncio.sleep(0.01)
    await cancel_and_wait([task])
    assert len(calls) >= 4 and "testing failed" in caplog.text
    assert "store unavailable while testing" in caplog.text
    assert task.done()
