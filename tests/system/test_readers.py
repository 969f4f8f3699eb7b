"""A burst of readers cannot take event admission's connections to the store (http/readers.py).

Counts are open, and a replica's redis-py pool holds 100 connections: before the bound, 1,500
concurrent ``GET /v1/stats`` beside 300 events made 98 of the events answer 503. Now reads wait
their turn (16 at once), and the ones that waited too long answer 503 "busy", never an event.
"""

from __future__ import annotations

import asyncio

import aiohttp
import redis
from helpers import Gateway

from notifier.http.readers import BUSY

LIMITS = {"NOTIFIER_GLOBAL_LIMIT": "1000000/1h", "NOTIFIER_CATEGORY_LIMIT": "1000000/1h"}


async def flood(url: str, readers: int, events: int) -> tuple[list[tuple[int, str]], list[int]]:
    """``readers`` concurrent GET /v1/stats and, while they run, ``events`` events: the answers of each."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def read() -> tuple[int, str]:
            async with session.get(url + "/v1/stats") as answer:
                body = await answer.json()
                return answer.status, body.get("error", "")

        async def send(n: int) -> int:
            await asyncio.sleep(n * 0.002)  # spread over the flood
            async with session.post(url + "/v1/events", json={"category": "c", "text": f"e{n}"}) as answer:
                await answer.read()
                return answer.status

        reads = [asyncio.ensure_future(read()) for _ in range(readers)]
        sent = await asyncio.gather(*(send(n) for n in range(events)))
        return await asyncio.gather(*reads), list(sent)


def test_a_flood_of_open_reads_leaves_event_admission_its_connections(redis_url, tmp_path):
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_DIGEST_INTERVAL": "0", **LIMITS}
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        reads, sent = asyncio.run(flood(gateway.url, 1500, 300))
        assert sent == [202] * 300, {s: sent.count(s) for s in set(sent)}
        assert {status for status, _ in reads} <= {200, 503}
        assert all(error == BUSY for status, error in reads if status == 503), {e for _, e in reads}
        assert sum(status == 200 for status, _ in reads) >= 16  # readers are served, in turn
        store = redis.Redis.from_url(redis_url)
        assert store.info("clients")["connected_clients"] < 60  # the pool did not fill: 16 readers, then admission's
        store.close()
        assert gateway.get("/v1/stats")[1]["accepted"] == 300
    finally:
        gateway.stop()
