"""Fair shares (contract, "Fair shares") on a real redis-server: exact scenarios, replicas
racing, local refusals, and the gateway as a user runs it.

Each event's class: ``critical`` when its severity is critical (and the critical reserve is
above 0%), else its category when that category has a reserve, else none. Under a global
rule COUNT/DURATION a class with share N% owns floor(N * COUNT / 100) slots; the rest,
S, is shared by the overflow (per class, admissions above its slots, plus every event of
no class).
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time

import pytest
import redis.asyncio as aioredis
from builders import build_limiter
from helpers import Gateway

from notifier.admission.local import OPEN_TRUST
from notifier.models import Decision, Event
from notifier.settings import load_settings
from notifier.store.keys import Keys


@pytest.fixture
async def replica(redis_url):
    """Build limiters on the session's redis-server, each with its own connection (a replica)."""
    stores = []

    def build(**overrides):
        settings = load_settings(redis_url=redis_url, digest_interval=0, **overrides)
        limiter, store = build_limiter(settings)
        stores.append(store)
        return limiter

    yield build
    for store in stores:
        await store.close()


@pytest.fixture
async def client(redis_url):
    redis = aioredis.Redis.from_url(redis_url)
    yield redis
    await redis.aclose()


def ev(category: str, severity: str = "info", text: str = "x") -> Event:
    return Event(category=category, text=text, severity=severity)


async def decide(limiter, events: list[Event]) -> list[Decision]:
    """Decisions for ``events`` sent together (one batch)."""
    return list(await asyncio.gather(*(limiter.admit(e) for e in events)))


def answer(d: Decision) -> tuple:
    """(outcome) for an admission, (outcome, level, rule) for a refusal."""
    if d.outcome.value == "accepted":
        return ("accepted",)
    return (d.outcome.value, d.level, d.rule)


ACCEPTED = ("accepted",)


def refused(rule: str, level: str = "global") -> tuple:
    return ("dropped", level, rule)


# Three reserved classes under 10/1m: critical 10% = 1, payments 20% = 2, security 10% = 1; S = 6.
RESERVES = dict(
    global_limit="10/1m",
    category_limit="100/1m",
    category_reserves={"payments": "20%", "security": "10%"},
    critical_reserve="10%",
)


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


# -- replicas racing -----------------------------------------------------------------------------

RACE = dict(
    global_limit="40/1h", category_limit="100/1h", category_reserves={"payments": "25%"}, critical_reserve="10%"
)
RACE_SLOTS = {"critical": 4, "payments": 10}  # 10% and 25% of 40; shared: 26


def race_class(category: str, severity: str) -> str | None:
    if severity == "critical":
        return "critical"
    return "payments" if category == "payments" else None


async def test_replicas_racing_keep_every_reserve_and_the_whole(replica, client):
    limiters = [replica(**RACE) for _ in range(6)]
    rng = random.Random(20240611)
    plan = [
        (
            rng.randrange(6),
            rng.choice(["payments", "payments", "noisy", "ops", "db"]),
            rng.choice(["info", "info", "warning", "critical"]),
            rng.random() * 0.3,
        )
        for _ in range(400)
    ]
    demand = [race_class(c, s) for _, c, s, _ in plan]
    assert all(demand.count(cls) > 2 * RACE_SLOTS.get(cls, 26) for cls in ("critical", "payments", None))

    async def one(index: int, category: str, severity: str, delay: float):
        await asyncio.sleep(delay)
        sent = time.monotonic()
        decision = await limiters[index].admit(ev(category, severity))
        return race_class(category, severity), sent, time.monotonic(), decision

    results = await asyncio.gather(*(one(*step) for step in plan))
    admitted = [(cls, sent) for cls, sent, _, d in results if d.outcome.value == "accepted"]
    per_class = {cls: sum(c == cls for c, _ in admitted) for cls in ("critical", "payments", None)}

    # The whole: never more than COUNT; and with every class asking for more than it owns,
    # every slot is taken (refusals only come from a full level).
    assert len(admitted) == 40, per_class
    shared = 40 - sum(RACE_SLOTS.values())
    overflow = per_class[None] + sum(max(0, per_class[c] - n) for c, n in RACE_SLOTS.items())
    assert overflow <= shared, per_class
    for cls, slots in RACE_SLOTS.items():
        assert slots <= per_class[cls] <= slots + shared, per_class

    # No refusal while its class surely had reserved slots left: when the refusal was
    # decided, its class had at most as many admissions as were SENT before its answer came.
    for cls, _, answered, d in results:
        if d.outcome.value != "accepted":
            assert (d.level, d.rule) == ("global", "40/1h"), d
            if cls in RACE_SLOTS:
                before = sum(c == cls and sent < answered for c, sent in admitted)
                assert before >= RACE_SLOTS[cls], f"{cls} refused with {before} of its {RACE_SLOTS[cls]} slots used"

    keys = Keys("notifier")
    assert await client.zcard(keys.bucket_log("global", "")) == len(admitted)
    assert await client.xlen(keys.outbox) == len(admitted)
    for limiter in limiters:
        await limiter.flush()
    stats = await client.hgetall(keys.stats)
    assert int(stats[b"accepted"]) == 40 and int(stats[b"dropped"]) == 400 - 40


# -- local refusals with reserves ----------------------------------------------------------------


@pytest.fixture
def store_calls(monkeypatch):
    """Counts the script calls of a limiter: watch(limiter) -> list that grows per call."""

    def watch(limiter):
        calls = []
        store = limiter._store
        real_run = store.run
        monkeypatch.setattr(store, "run", lambda *a, **kw: calls.append(a) or real_run(*a, **kw))
        return calls

    return watch


async def test_a_full_shared_part_does_not_refuse_a_class_with_slots_left(replica, store_calls):
    limiter = replica(**RESERVES)
    got = [answer(await limiter.admit(ev("noisy"))) for _ in range(8)]
    assert got == [ACCEPTED] * 6 + [refused("10/1m")] * 2  # the replica now knows the shared part full
    await limiter.flush()  # the local refusal's count is written now, not during what follows
    calls = store_calls(limiter)
    # Reserved classes with slots left go to the store, which admits them.
    assert answer(await limiter.admit(ev("payments"))) == ACCEPTED
    assert answer(await limiter.admit(ev("security"))) == ACCEPTED
    assert answer(await limiter.admit(ev("noisy", "critical"))) == ACCEPTED
    assert answer(await limiter.admit(ev("payments"))) == ACCEPTED
    assert len(calls) == 4
    # Then each is full: the store says so once, and local refusals repeat its answer.
    for event in (ev("payments"), ev("security"), ev("db", "critical")):
        first = await limiter.admit(event)
        answered = time.monotonic()
        assert answer(first) == refused("10/1m")
        calls.clear()
        for _ in range(3):
            again = await limiter.admit(event)
            assert answer(again) == answer(first) and 0 < again.retry_after <= first.retry_after
        # Decided by the replica itself: it trusts that the category has room for OPEN_TRUST
        # (1 s) only, as critical events could fill it; past that it may ask the store again.
        if time.monotonic() - answered < OPEN_TRUST:
            assert calls == []


@pytest.mark.parametrize("global_limit", ["8/1m", "8/700ms"])
async def test_a_muted_category_names_its_mute_even_when_the_global_level_is_known_full(
    replica, store_calls, global_limit
):
    """Issue: a muted category (0/1h) answered ``global 8/700ms`` by a replica that only knew
    the global level was full. The level that stays full longer is the mute's."""
    limiter = replica(
        global_limit=global_limit,
        category_limit="100/1h",
        category_limits={"debug": "0/1h"},
        category_reserves={"payments": "25%"},  # payments owns 2 of 8; S = 6
    )
    got = [answer(d) for d in await decide(limiter, [ev("noisy")] * 7)]
    assert got == [ACCEPTED] * 6 + [refused(global_limit)]
    calls = store_calls(limiter)
    first = await limiter.admit(ev("debug"))
    assert answer(first) == refused("0/1h", "category")
    assert 3599 < first.retry_after <= 3600
    calls.clear()
    for _ in range(3):  # now answered by the replica, as the store answered
        again = await limiter.admit(ev("debug"))
        assert answer(again) == refused("0/1h", "category") and 3599 < again.retry_after <= 3600
    assert calls == []


# -- the gateway, as a user runs it --------------------------------------------------------------


@pytest.fixture
def gateway(redis_url):
    gw = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_GLOBAL_LIMIT": "10/1h",
            "NOTIFIER_CATEGORY_LIMIT": "100/1h",
            "NOTIFIER_CATEGORY_RESERVES": '{"payments":"20%"}',
            "NOTIFIER_CRITICAL_RESERVE": "10%",
            "NOTIFIER_DIGEST_INTERVAL": "0",
        }
    ).start()
    yield gw
    gw.stop()


def post(gw: Gateway, category: str, severity: str = "info") -> tuple:
    status, body, headers = gw.post({"category": category, "text": "fair shares", "severity": severity})
    if status == 429:
        assert int(headers["Retry-After"]) >= body["retry_after"] > 0
        return status, body["limit"], body["rule"]
    return (status,)


def shares(gw: Gateway) -> tuple[dict, dict]:
    status, body, _ = gw.get("/v1/limits")
    assert status == 200
    (view,) = body["global"]
    assert (view["rule"], view["limit"]) == ("10/1h", 10)
    reserves = {r["class"]: r for r in view["reserves"]}
    for r in reserves.values():
        assert isinstance(r["kind"], str) and r["kind"]
    return view, reserves


def test_gateway_answers_and_limits_follow_the_reserves(gateway):
    # critical 10% = 1 slot, payments 20% = 2, shared 7
    assert [post(gateway, "noisy") for _ in range(8)] == [(202,)] * 7 + [(429, "global", "10/1h")]
    assert post(gateway, "payments") == (202,)
    view, reserves = shares(gateway)
    assert view["used"] == 8
    assert view["shared"] == {"slots": 7, "used": 7, "free": 0}
    assert {c: (r["share"], r["slots"], r["used"], r["free"]) for c, r in reserves.items()} == {
        "critical": ("10%", 1, 0, 1),
        "payments": ("20%", 2, 1, 1),
    }
    assert [post(gateway, "payments") for _ in range(2)] == [(202,), (429, "global", "10/1h")]
    assert [post(gateway, "noisy", "critical") for _ in range(2)] == [(202,), (429, "global", "10/1h")]
    view, reserves = shares(gateway)
    assert view["used"] == 10 and view["remaining"] == 0
    assert view["shared"] == {"slots": 7, "used": 7, "free": 0}
    assert {c: (r["slots"], r["used"], r["free"]) for c, r in reserves.items()} == {
        "critical": (1, 1, 0),
        "payments": (2, 2, 0),
    }


@pytest.mark.parametrize(
    "env, named",
    [
        ({"NOTIFIER_CATEGORY_RESERVES": '{"payments":"60%"}', "NOTIFIER_CRITICAL_RESERVE": "50%"}, "RESERVE"),
        ({"NOTIFIER_CATEGORY_RESERVES": '{"payments":"60%","db":"40.5%"}'}, "NOTIFIER_CATEGORY_RESERVES"),
        ({"NOTIFIER_CATEGORY_RESERVES": '{"payments":"ten"}'}, "NOTIFIER_CATEGORY_RESERVES"),
        ({"NOTIFIER_CATEGORY_RESERVES": '{"payments":"12.55%"}'}, "NOTIFIER_CATEGORY_RESERVES"),
        ({"NOTIFIER_CRITICAL_RESERVE": "5"}, "NOTIFIER_CRITICAL_RESERVE"),
        (
            {"NOTIFIER_CATEGORIES": "ops,db", "NOTIFIER_CATEGORY_RESERVES": '{"payments":"10%"}'},
            "NOTIFIER_CATEGORY_RESERVES",
        ),
    ],
    ids=["over-100-with-critical", "over-100", "not-a-share", "two-decimals", "no-percent", "excluded-category"],
)
def test_bad_reserves_stop_startup_with_one_line(env, named):
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "serve"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    if named == "RESERVE":  # a check across both: either variable may be named
        assert "NOTIFIER_CATEGORY_RESERVES" in lines[0] or "NOTIFIER_CRITICAL_RESERVE" in lines[0], lines
    else:
        assert named in lines[0], lines
