"""A store over its maxmemory (contract: "After an outage", a full Redis): a real redis-server with
``noeviction`` and a ``maxmemory`` set below what it uses. Without the scripts' flags Redis never
refused a script for memory, and the gateway wrote past the operator's limit; now every request that
needs a write answers ``503 store full`` with nothing written, ``/readyz`` says so, delivery goes on,
and the gateway answers again by itself once there is room."""

from __future__ import annotations

import time

import pytest
import redis
from helpers import RedisServer, until
from slack_standin import TOKEN

from notifier.http.app import create_app
from notifier.settings import load_settings


@pytest.fixture
def store():
    server = RedisServer(extra=["--maxmemory-policy", "noeviction"]).start()
    yield server, redis.Redis.from_url(server.url)
    server.stop()


def fill(client: redis.Redis) -> None:
    """Lower maxmemory below what the store uses now: it is over its limit from here. (Right after a
    large write, used_memory still counts the connection's query buffer: wait until Redis freed it.)"""
    used = 0
    for _ in range(50):
        time.sleep(0.1)
        used, before = int(client.info("memory")["used_memory"]), used
        if abs(used - before) < 50_000:
            break
    client.config_set("maxmemory", str(used - 200_000))


async def test_a_full_store_answers_store_full_writes_nothing_and_recovers(store, slack, aiohttp_client):
    server, client = store
    settings = load_settings(
        redis_url=server.url, slack_bot_token=TOKEN, slack_api_url=slack.api_url, slack_channel="#alerts",
        global_limit="1000/30m", category_limit="1000/30m", channel_rate="1/1s", digest_interval=0,
    )  # fmt: skip
    gateway = await aiohttp_client(create_app(settings))
    for text in ("before-1", "before-2"):  # one posted at once, the other a second later: when the store is full
        assert (await gateway.post("/v1/events", json={"category": "db", "text": text})).status == 202
    client.set("ballast", "x" * 2_000_000)  # so that lowering maxmemory leaves a clear margin
    fill(client)
    written = _written(client)

    for body in ({"category": "db", "text": "during"}, {"category": "web", "text": "x", "dedup_key": "a-1"}):
        answer = await gateway.post("/v1/events", json=body)
        assert (answer.status, await answer.json()) == (503, {"error": "store full"})
    door = await gateway.post("/services/T0/B0/any", json={"text": "from a tool"})
    assert door.status == 503
    muted = await gateway.put("/v1/limits/category/db", json={"rules": "0/1h"})
    assert (muted.status, (await muted.json())["error"]) == (503, "store full")
    ready = await gateway.get("/readyz")
    assert (ready.status, await ready.json()) == (503, {"status": "unavailable", "error": "store full"})
    assert (await gateway.get("/healthz")).status == 200  # the process still serves
    assert _written(client) == written
    assert (await (await gateway.get("/v1/limits")).json())["overrides"] == {}  # reads still answer
    await until(lambda: _delivered(slack, "before-2"), 20, what="delivery of what was admitted before, store full")
    memory = client.info("memory")
    assert memory["used_memory"] > int(client.config_get("maxmemory")["maxmemory"]), (memory, client.keys("*"))

    client.delete("ballast")  # room again: no restart, no setting changed
    await until(lambda: _ready(gateway), 20, what="/readyz to answer 200 again")
    after = await gateway.post("/v1/events", json={"category": "db", "text": "after-1"})
    assert after.status == 202
    await until(lambda: _delivered(slack, "after-1"), 20, what="delivery after the store had room again")
    assert slack.refusals == []


def _written(client: redis.Redis) -> tuple:
    """What an admission or a change writes: the outbox's last id, the counts, the overrides."""
    outbox = client.xinfo_stream("notifier:{notifier}:outbox")["last-generated-id"]
    counts = {k: v for k, v in client.hgetall("notifier:{notifier}:stats").items() if not k.startswith(b"deliver")}
    return outbox, counts, client.exists("notifier:{notifier}:overrides")


async def _delivered(slack, text: str) -> bool:
    return any(text in m.text for m in slack.received())


async def _ready(gateway) -> bool:
    return (await gateway.get("/readyz")).status == 200
