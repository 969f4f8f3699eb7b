"""Fair shares (contract, "Fair shares") on a real redis-server: exact scenarios.

A noisy category first, a reserved category first, several global rules each with its own
floors, a category limit tighter than its reserve, and ``retry_after``. Replicas racing, local
refusals and the gateway as a user runs it are in ``test_fair_shares_replicas.py``; the fixtures
and helpers both use in ``fair_shares_replica.py`` (tests/support).

Each event's class: ``critical`` when its severity is critical (and the critical reserve is
above 0%), else its category when that category has a reserve, else none. Under a global
rule COUNT/DURATION a class with share N% owns floor(N * COUNT / 100) slots; the rest,
S, is shared by the overflow (per class, admissions above its slots, plus every event of
no class).
"""

from __future__ import annotations

import asyncio
import time

import fair_shares_replica
from fair_shares_replica import ACCEPTED, RESERVES, answer, decide, ev, refused

from notifier.models import Event
from notifier.store.keys import Keys

client = fair_shares_replica.client  # a fixture, from tests/support/fair_shares_replica.py
replica = fair_shares_replica.replica  # a fixture, from tests/support/fair_shares_replica.py


# -- (a) a noisy category first ----------------------------------------------------------------


async def test_a_noisy_category_leaves_the_reserved_slots(replica, client):
    limiter = replica(**RESERVES)
    # One by one, so each answer is the store's or a local refusal decided from it.
    noisy = [answer(await limiter.admit(ev("noisy"))) for _ in range(9)]
    assert noisy == [ACCEPTED] * 6 + [refused("10/1m")] * 3  # only the shared part
    # The global level is full for events of no class, yet every class gets its slots.
    assert [answer(await limiter.admit(ev("payments"))) for _ in range(3)] == [ACCEPTED] * 2 + [refused("10/1m")]
    assert [answer(await limiter.admit(ev("security"))) for _ in range(2)] == [ACCEPTED, refused("10/1m")]
    # critical wins over the category's own class: a critical payments event is of class critical
    critical = [answer(await limiter.admit(ev("payments", "critical"))) for _ in range(2)]
    assert critical == [ACCEPTED, refused("10/1m")]
    last = await limiter.admit(ev("ops", "critical"))
    assert answer(last) == refused("10/1m") and 0 < last.retry_after <= 60
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 10  # COUNT, as a whole


async def test_a_noisy_burst_in_one_batch(replica, client):
    """The same, decided in one script call: reserves hold within a batch too."""
    limiter = replica(**RESERVES)
    events = [ev("noisy")] * 9 + [ev("payments")] * 3 + [ev("security")] * 2 + [ev("ops", "critical")] * 2
    got = [answer(d) for d in await decide(limiter, events)]
    want = [ACCEPTED] * 6 + [refused("10/1m")] * 3
    want += [ACCEPTED] * 2 + [refused("10/1m")] + [ACCEPTED, refused("10/1m")] + [ACCEPTED, refused("10/1m")]
    assert got == want
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 10


# -- (b) a reserved category first -------------------------------------------------------------


async def test_a_reserved_category_first_takes_its_reserve_then_the_shared_part(replica, client):
    limiter = replica(**RESERVES)
    payments = [answer(d) for d in await decide(limiter, [ev("payments")] * 10)]
    assert payments == [ACCEPTED] * 8 + [refused("10/1m")] * 2  # 2 reserved + 6 shared
    # The others get only what is left: nothing shared, each class its own slots.
    assert [answer(await limiter.admit(ev("noisy"))) for _ in range(2)] == [refused("10/1m")] * 2
    assert [answer(await limiter.admit(ev("security"))) for _ in range(2)] == [ACCEPTED, refused("10/1m")]
    assert [answer(await limiter.admit(ev("noisy", "critical"))) for _ in range(2)] == [ACCEPTED, refused("10/1m")]
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 10


# -- (c) several global rules, each with its own floors ----------------------------------------


async def test_each_global_rule_has_its_own_reserved_slots(replica):
    """10/1s: payments 5% = 0, critical 20% = 2, S = 8. 30/1h: payments 5% = 1, critical 20% = 6, S = 23."""
    limiter = replica(
        global_limit="10/1s,30/1h",
        category_limit="100/1h",
        category_reserves={"payments": "5%"},
        critical_reserve="20%",
    )
    # Round 1, one batch: the short rule binds. Payments owns no slot under it (5% of 10 = 0).
    got = await decide(limiter, [ev("noisy")] * 9 + [ev("payments")] + [ev("ops", "critical")] * 3)
    assert [answer(d) for d in got] == (
        [ACCEPTED] * 8 + [refused("10/1s")] + [refused("10/1s")] + [ACCEPTED] * 2 + [refused("10/1s")]
    )
    await asyncio.sleep(max(d.retry_after for d in got) + 0.05)  # the short window has slid
    # Round 2: 8 more of no class (the long rule's overflow is 16 of its 23).
    got = await decide(limiter, [ev("noisy")] * 9)
    assert [answer(d) for d in got] == [ACCEPTED] * 8 + [refused("10/1s")]
    await asyncio.sleep(max(d.retry_after for d in got) + 0.05)
    # Round 3: the long rule's shared part fills after 7; payments gets its one slot of it
    # (5% of 30 = 1) and no more; critical events their 2 of the short rule.
    got = await decide(limiter, [ev("noisy")] * 8 + [ev("payments")] * 2 + [ev("ops", "critical")] * 3)
    assert [answer(d) for d in got] == (
        [ACCEPTED] * 7
        + [refused("30/1h")]
        + [ACCEPTED, refused("30/1h")]  # both rules refuse it: the 1h one stays full longest
        + [ACCEPTED] * 2
        + [refused("10/1s")]  # 4 of its 6 slots under 30/1h used, 2 of 2 under 10/1s
    )
    assert got[9].retry_after > 3000 and got[12].retry_after <= 1


# -- (d) a category limit tighter than its reserve ---------------------------------------------


async def test_the_category_level_still_applies_to_a_reserved_category(replica, client):
    limiter = replica(
        global_limit="20/1m",
        category_limit="100/1m",
        category_limits={"payments": "3/1m"},
        category_reserves={"payments": "50%"},
    )
    got = [answer(d) for d in await decide(limiter, [ev("payments")] * 5)]
    assert got == [ACCEPTED] * 3 + [refused("3/1m", "category")] * 2
    # Its 7 unused reserved slots are not lent: the others have the 10 shared ones only.
    got = [answer(d) for d in await decide(limiter, [ev("noisy")] * 12)]
    assert got == [ACCEPTED] * 10 + [refused("20/1m")] * 2
    later = await limiter.admit(ev("payments"))
    assert answer(later) == refused("3/1m", "category") and 0 < later.retry_after <= 60
    assert await client.zcard(Keys("notifier").bucket_log("global", "")) == 13


# -- (e) retry_after -----------------------------------------------------------------------------


async def store_time_us(client) -> int:
    seconds, micros = await client.time()
    return seconds * 1_000_000 + micros


def ceil_ms(us: int) -> int:
    return -(-us // 1000)


async def check_retry_after(limiter, client, event: Event, departure_us: int, rule: str) -> None:
    """``event`` is refused with the wait until ``departure_us`` (store clock), and then admitted.

    The script decided between two readings of the store's clock around the call, so the
    wait it saw lies between them: bounds that hold at any speed.
    """
    before = await store_time_us(client)
    first = await limiter.admit(event)
    answered = time.monotonic()
    after = await store_time_us(client)
    assert answer(first) == refused(rule)
    retry_ms = round(first.retry_after * 1000)
    assert ceil_ms(departure_us - after) <= retry_ms <= ceil_ms(departure_us - before), (first, departure_us)
    if first.retry_after > 0.3:
        # Before retry_after has passed, the same event is refused (when the store decides
        # before the departure; a slow machine may only get there later: no conclusion then).
        await asyncio.sleep(answered + first.retry_after - 0.3 - time.monotonic())
        early = await limiter.admit(event)
        if await store_time_us(client) < departure_us:
            assert answer(early) == refused(rule)
        if early.outcome.value == "accepted":
            return
    await asyncio.sleep(answered + first.retry_after - time.monotonic())
    assert answer(await limiter.admit(event)) == ACCEPTED


async def oldest_us(client, key: str) -> int:
    ((_, score),) = await client.zrange(key, 0, 0, withscores=True)
    return int(score)


async def test_retry_after_of_an_event_of_no_class(replica, client):
    # 3/2s: payments 34% = 1 slot, S = 2
    limiter = replica(global_limit="3/2s", category_limit="100/1m", category_reserves={"payments": "34%"})
    assert [answer(d) for d in await decide(limiter, [ev("noisy")] * 2)] == [ACCEPTED] * 2
    departure = await oldest_us(client, Keys("notifier").bucket_log("global", "")) + 2_000_000
    await check_retry_after(limiter, client, ev("noisy"), departure, "3/2s")


async def test_retry_after_of_a_reserved_class_is_the_sooner_of_its_two_ways_in(replica, client):
    """Its own reserved slot frees when its entry leaves; the shared part when the first
    overflow entry leaves: the wait is the sooner of the two (here the shared one)."""
    limiter = replica(global_limit="3/2s", category_limit="100/1m", category_reserves={"payments": "34%"})
    assert [answer(d) for d in await decide(limiter, [ev("noisy")] * 2)] == [ACCEPTED] * 2
    shared_departure = await oldest_us(client, Keys("notifier").bucket_log("global", "")) + 2_000_000
    await asyncio.sleep(0.3)
    assert answer(await limiter.admit(ev("payments"))) == ACCEPTED  # its reserved slot
    await check_retry_after(limiter, client, ev("payments"), shared_departure, "3/2s")
