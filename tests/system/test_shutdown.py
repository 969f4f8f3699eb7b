"""Shutdown always ends, even when a background task shrugs off a cancellation or Slack does not answer."""

import asyncio
import contextlib
import time

import redis
from aiohttp.test_utils import TestClient, TestServer
from helpers import Gateway, slack_env, wait_for
from slack_standin import SlackStandin

from notifier.http.app import create_app
from notifier.settings import load_settings
from notifier.store.keys import Keys
from notifier.tasks import cancel_and_wait


async def test_cancel_and_wait_stops_a_task_that_ignores_one_cancellation():
    cancels = 0

    async def stubborn():
        nonlocal cancels
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancels += 1
                if cancels > 1:
                    raise
                task = asyncio.current_task()
                if hasattr(task, "uncancel"):  # 3.11+: what asyncio.wait_for does there (gh-86296)
                    task.uncancel()  # (3.10 keeps no count of cancellations: swallowing it is enough)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await cancel_and_wait([task])
    assert task.cancelled() and cancels == 2


async def test_cancel_and_wait_gives_up_after_its_patience(caplog):
    async def immortal():
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    task = asyncio.create_task(immortal(), name="immortal")
    await asyncio.sleep(0)
    await cancel_and_wait([task], patience=0.3)
    assert not task.done() and "immortal" in caplog.text
    task.get_coro().close()  # end it for good: no cancellation reaches it


async def test_a_gateway_closed_right_after_start_shuts_down(redis_url):
    # Closing at once cancels the delivery reader while redis-py is still connecting:
    # the moment a single cancel() got lost and shutdown waited forever.
    for _ in range(5):
        client = TestClient(TestServer(create_app(load_settings(redis_url=redis_url, digest_interval=0))))
        await client.start_server()
        response = await client.post("/v1/events", data=b"{}", headers={"Content-Type": "text/json"})
        assert response.status == 415
        closing = asyncio.ensure_future(client.close())
        done, _ = await asyncio.wait([closing], timeout=30)
        assert done, "the gateway did not shut down"


def test_sigterm_ends_the_process_in_time_when_slack_does_not_answer(redis_url, tmp_path):
    # The chart's grace period allows the gateway 20 s after SIGTERM (deploy/helm/notifier): a send
    # that hangs gets its 5 s, then it is handed back to the outbox, never lost and never waited for.
    hung = SlackStandin(post_latency=8).start()  # longer than the 5 s; short enough to stop the stand-in
    gateway = Gateway(slack_env(redis_url, hung), log_dir=str(tmp_path)).start()
    try:
        assert gateway.post({"category": "db", "text": "never answered"})[0] == 202
        wait_for(lambda: hung.in_flight == 1, 10, what="a send in flight")
        began = time.monotonic()
        assert gateway.stop(timeout=30) == 0, gateway.output()
        assert time.monotonic() - began < 20 and "Traceback" not in gateway.output()
        client = redis.Redis.from_url(redis_url)
        assert client.xlen(Keys("notifier").outbox) == 1  # handed back: a restart or another replica sends it
        client.close()
    finally:
        gateway.stop(kill=True)
        hung.stop()
