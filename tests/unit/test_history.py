"""Per-minute counts (store/history.py, lua/history.lua): one replica records each minute for the fleet,
the minutes are the differences of consecutive records, and nothing shows a spike that did not happen:
not a replica's restart, not a minute nobody recorded, not counters that went back. Records are bounded.

Run on the embedded store (fakeredis with the same Lua), with the store's clock set by the test.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import fakeredis
import pytest
from doors_app import sha

from notifier.http.history import HISTORY
from notifier.store.client import Store
from notifier.store.history import KEEP_MS, LATE, MINUTE_MS, SHOWN, History, fields_of
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts

KEYS = Keys("h")
START = 29_400_000  # a unix minute (2025-11-24 and some): its records are KEYS.history(START + n)


class Clock:
    """The store's clock as the test sets it (ms)."""

    def __init__(self) -> None:
        self.ms = START * MINUTE_MS

    async def time_us(self, key: str) -> int:
        return self.ms * 1000


@pytest.fixture
def world():
    client = fakeredis.FakeAsyncRedis()
    store = Store(client, embedded=True)
    clock = Clock()
    store.server_time_us = clock.time_us  # type: ignore[method-assign]
    return client, store, clock, Scripts(client)


def replica(world) -> History:
    _, store, _, scripts = world
    return History(store, scripts, KEYS)


async def count(world, admitted: int = 0, dropped: int = 0, level: tuple[str, str] | None = None) -> None:
    """Events counted as counts.lua counts them: in all, and per level value."""
    client = world[0]
    await client.hincrby(KEYS.stats, "accepted", admitted)
    await client.hincrby(KEYS.stats, "dropped", dropped)
    if level:
        accepted, refused = fields_of(*level)
        await client.hincrby(KEYS.stats, accepted, admitted)
        await client.hincrby(KEYS.stats, refused, dropped)


async def minute_passes(world, sampler: History, admitted: int = 0, dropped: int = 0) -> None:
    """Events counted during a minute, then the next minute starts and ``sampler`` records it."""
    await count(world, admitted, dropped)
    world[2].ms += MINUTE_MS
    await sampler.sample()


async def test_one_replica_records_each_minute_and_the_others_find_it_written(world):
    client, _, clock, _ = world
    a, b = replica(world), replica(world)
    await count(world, 5, 2)
    await client.hset(KEYS.stats, mapping={"delivered": 4, "accepted:db": 5, "level:team:accepted:web": 3})
    clock.ms += 1500  # 1.5 s into the minute
    assert await a.sample() is True
    await count(world, 1)
    assert await b.sample() is False  # the same minute: written already, by a
    record = {k.decode(): v.decode() for k, v in (await client.hgetall(KEYS.history(START))).items()}
    assert record == {"@at": str(clock.ms), "accepted": "5", "dropped": "2", "level:team:accepted:web": "3"}
    assert 61 * MINUTE_MS < await client.pttl(KEYS.history(START)) <= KEEP_MS <= 65 * MINUTE_MS
    assert a.pause() == pytest.approx(58.5 + LATE)  # wakes just after the next minute starts


async def test_minutes_are_the_differences_of_consecutive_records_and_the_last_counts_up_to_now(world):
    sampler = replica(world)
    await sampler.sample()  # minute START, nothing counted yet (no stats hash at all)
    for admitted, dropped in ((3, 0), (7, 2), (0, 9)):
        await minute_passes(world, sampler, admitted, dropped)
    await count(world, 4, 1)  # in the current minute, so far
    series = await sampler.series(fields_of())
    assert len(series.minutes) == SHOWN
    assert [(m.admitted, m.dropped) for m in series.minutes[-4:]] == [(3, 0), (7, 2), (0, 9), (4, 1)]
    assert series.minutes[-1].at * 1000 == (START + 3) * MINUTE_MS == series.now_ms
    assert all(m.admitted is None for m in series.minutes[:-4])  # before the first record: unknown
    assert [b.at - a.at for a, b in zip(series.minutes, series.minutes[1:], strict=False)] == [60] * (SHOWN - 1)


async def test_one_level_value_has_its_own_minutes(world):
    sampler = replica(world)
    await sampler.sample()
    await count(world, 5, 1, level=("team", "web"))
    await count(world, 2, 0, level=("team", "db"))
    world[2].ms += MINUTE_MS
    await sampler.sample()
    web = await sampler.series(fields_of("team", "web"))
    assert (web.minutes[-2].admitted, web.minutes[-2].dropped) == (5, 1)
    whole = await sampler.series(fields_of())
    assert (whole.minutes[-2].admitted, whole.minutes[-2].dropped) == (7, 1)
    nobody = await sampler.series(fields_of("team", "nobody"))  # a value never counted: 0, not unknown
    assert (nobody.minutes[-2].admitted, nobody.minutes[-2].dropped) == (0, 0)


async def test_a_replica_that_restarts_or_joins_shows_no_spike(world):
    first = replica(world)
    await count(world, 1000)  # counted long before: the totals the store holds
    await first.sample()
    await minute_passes(world, first, 4)
    restarted = replica(world)  # a new process: nothing of its own to compare with
    await minute_passes(world, restarted, 6)
    await minute_passes(world, replica(world), 2)
    series = await restarted.series(fields_of())
    assert [m.admitted for m in series.minutes[-4:]] == [4, 6, 2, 0]


async def test_a_minute_nobody_recorded_is_unknown_not_the_sum_of_several(world):
    sampler = replica(world)
    await sampler.sample()
    await minute_passes(world, sampler, 3)
    await count(world, 50)  # the fleet is down: nobody records minutes START + 2 and START + 3
    world[2].ms += 2 * MINUTE_MS
    await minute_passes(world, sampler, 8)  # recorded again at START + 4
    series = await sampler.series(fields_of())
    # The 58 events between the records of START + 1 and START + 4 are not shown as one minute's.
    assert [m.admitted for m in series.minutes[-5:]] == [3, None, None, None, 0]


async def test_counters_that_went_back_are_unknown_not_a_negative_count_nor_the_total(world):
    client = world[0]
    sampler = replica(world)
    await count(world, 900, 90)
    await sampler.sample()
    await minute_passes(world, sampler, 5)
    await client.delete(KEYS.stats)  # the store lost its counters (emptied, or a failover)
    await minute_passes(world, sampler, 3, 1)
    await minute_passes(world, sampler, 2)
    series = await sampler.series(fields_of())
    assert [(m.admitted, m.dropped) for m in series.minutes[-4:]] == [(5, 0), (None, None), (2, 0), (0, 0)]


async def test_records_are_bounded_by_their_expiry(world):
    client = world[0]
    sampler = replica(world)
    for _ in range(3):
        await minute_passes(world, sampler, 1)
    names = [key.decode() async for key in client.scan_iter(match=KEYS.base + "history:*")]
    assert len(names) == 3
    for name in names:
        assert 0 < await client.pttl(name) <= KEEP_MS


async def test_a_failed_sample_is_tried_again_soon(world):
    _, store, _, _ = world

    async def down(key: str) -> int:
        raise ConnectionError("down")

    sampler = replica(world)
    store.server_time_us = down  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await sampler.sample()
    assert sampler.pause() == 5.0


# --- GET /v1/stats/history: scopes, bad input, and the minutes of the tree and of a level value ---

READER, SENDER = "READERTOKEN-h1", "SENDERTOKEN-h1"


@pytest.fixture
async def gateway(make_doors):
    tokens = {
        "reader": {"sha256": sha(READER), "scopes": ["read"]},
        "sender": {"sha256": sha(SENDER), "scopes": ["send"]},
    }
    # A prefix of its own: the embedded stores of one process share their data (fakeredis's one server).
    client, _ = await make_doors(tokens, category_limit="2/1h", key_prefix=f"history-{uuid.uuid4().hex[:8]}")
    return client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_route_needs_scope_read(gateway):
    assert (await gateway.get("/v1/stats/history")).status == 401
    assert (await gateway.get("/v1/stats/history", headers=auth(SENDER))).status == 403
    answer = await gateway.get("/v1/stats/history", headers=auth(READER))
    assert answer.status == 200
    body = await answer.json()
    assert body["level"] is None and body["value"] is None and len(body["minutes"]) == SHOWN


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ("?level=category", 422, "value"),
        ("?value=db", 422, "level"),
        ("?level=Category&value=db", 422, "level"),
        ("?level=category&value=", 422, "value"),
        ("?level=category&value=" + "x" * 501, 422, "value"),
        ("?level=category&level=category&value=db", 422, "level"),
        ("?level=team&value=db", 404, None),  # no such level in this tree
        ("?level=global&value=db", 404, None),  # the root has no values
    ],
)
async def test_bad_input_is_refused(gateway, query, status, field):
    answer = await gateway.get("/v1/stats/history" + query, headers=auth(READER))
    assert answer.status == status, await answer.text()
    body = await answer.json()
    assert body["error"]
    if field:
        assert [d["field"] for d in body["details"]] == [field]


async def test_the_tree_and_a_level_value_count_what_was_admitted_and_dropped(gateway):
    if time.time() % 60 > 50:  # the store's minute must not turn during the test
        await asyncio.sleep(61 - time.time() % 60)
    await gateway.app[HISTORY].sample()  # this minute's record, before the events (the loop's or this one)
    for category in ("db", "db", "db", "web"):  # db allows 2 an hour
        await gateway.post("/v1/events", json={"category": category, "text": "x"}, headers=auth(SENDER))
    expected = {"": (3, 1), "?level=category&value=db": (2, 1), "?level=category&value=web": (1, 0)}
    for query, counts in expected.items():
        body = await (await gateway.get("/v1/stats/history" + query, headers=auth(READER))).json()
        last = body["minutes"][-1]
        assert (last["admitted"], last["dropped"]) == counts, query
        assert body["minutes"][-2]["admitted"] in (None, 0)  # nothing before (recorded by the loop, or not)
