"""Repeats of alerts decided on a replica: the same answers and counts as the store's, never stale.

Two replicas share one Redis. A replica that learnt from the store that an alert is firing
answers its firing repeats ``duplicate`` itself, and one that learnt a key refused refuses it
while its level is full; the counts reach the store with the next call. The same storm sent to
a fleet whose replicas decide nothing locally (``STORE_ONLY``) must give the same answers and
the same counts, with most duplicates never sent to the store. A resolution on one replica is known on the other
before 100 ms have passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest
import redis
from builders import build_limiter
from helpers import STORE_ONLY, Gateway, RedisServer, slack_env, wait_for
from redis_proxy import ReplyProxy
from slack_standin import SlackStandin

from notifier.admission import limiter as limiter_module
from notifier.http.app import create_app
from notifier.models import Decision, Event, Outcome
from notifier.settings import load_settings
from notifier.store.keys import Keys

# 32 keys, 4 per category: db and web admit all theirs (and their reopens), tight 2, the rest 3;
# the global level fills with the second reopens. Digests wait an hour: their counts are compared.
LIMITS = {
    "NOTIFIER_GLOBAL_LIMIT": "27/1h",
    "NOTIFIER_CATEGORY_LIMIT": "3/1h",
    "NOTIFIER_CATEGORY_LIMITS": json.dumps({"tight": "2/1h", "db": "100/1h", "web": "100/1h"}),
    "NOTIFIER_DIGEST_INTERVAL": "1h",
}
KEYS = 32
CATEGORIES = ["db", "web", "cache", "tight", "queue", "edge", "mail", "dns"]


@contextlib.contextmanager
def _fleet(env: dict[str, str], tmp_path, command: list[str] | None = None):
    gateways: list[Gateway] = []
    try:
        for name in ("a", "b"):
            gw = Gateway({**env, "NOTIFIER_REPLICA_ID": name}, log_dir=str(tmp_path), command=command)
            gateways.append(gw.start())
        yield gateways
    finally:
        for gw in gateways:
            gw.stop()


def _alert(category: str, key: str, status: str = "firing") -> dict:
    return {"category": category, "text": f"{key} in {category}", "dedup_key": key, "status": status}


def _storm() -> list[tuple[int, dict] | float]:
    """A deterministic storm: (replica, event) pairs, and pauses (seconds) after resolutions."""
    steps: list[tuple[int, dict] | float] = []
    keys = [(CATEGORIES[i % len(CATEGORIES)], f"k{i}") for i in range(KEYS)]
    for round_ in range(12):
        for i, (category, key) in enumerate(keys):
            steps += [((i + round_) % 2, _alert(category, key)), ((i + round_ + 1) % 2, _alert(category, key))]
        if round_ in (4, 8):  # some alerts resolved on one replica, then repeats on the other
            steps += [(0, _alert(category, key, "resolved")) for category, key in keys[:6]]
            steps.append(0.15)
    return steps


def _run(gateways: list[Gateway]) -> list[tuple]:
    """Send the storm; each answer normalised (ids by order of first appearance)."""
    ids: dict[str, int] = {}
    answers = []
    for step in _storm():
        if isinstance(step, float):
            time.sleep(step)
            continue
        replica, event = step
        status, body, _ = gateways[replica].post(event)
        if body.get("id"):
            body["id"] = ids.setdefault(body["id"], len(ids))
        if status == 429:
            assert 0 < body.pop("retry_after") <= 3600, body
        answers.append((event["dedup_key"], event["status"], status, body))
    return answers


def _records(client: redis.Redis, prefix: str) -> dict:
    """Per alert: (n, fired, resolved, reopened) as the store holds them."""
    out = {}
    for category in CATEGORIES:
        for i in range(KEYS):
            rec = client.hmget(Keys(prefix).record(category, f"k{i}"), "n", "fired", "resolved", "reopened")
            if rec[0] is not None:
                out[(category, i)] = rec
    return out


def _digests(client: redis.Redis) -> dict:
    """Drops waiting for the next digest, per channel and category."""
    out = {}
    for key in client.scan_iter(match="notifier:{notifier}:digest:sup:*"):
        counts = client.hgetall(key)
        counts.pop(b"_since", None)
        out[key] = counts
    return out


def _store_duplicates(client: redis.Redis) -> int:
    """Firing events of firing alerts that the store decided: admit.lua reads their record's PTTL."""
    return client.info("commandstats").get("cmdstat_pttl", {}).get("calls", 0)


async def _fired_and_aged(limiter: limiter_module.Limiter, event: Event, client: redis.Redis) -> tuple[Decision, int]:
    """``event``'s alert admitted by ``limiter``, then its epoch read left to age past ``FRESH`` (the
    next repeats cannot be answered at once); the first decision and the store's duplicates so far."""
    first = await limiter.admit(event)
    await limiter.flush()
    await asyncio.sleep(0.2)
    return first, _store_duplicates(client)


def test_alert_storm_answers_and_counts_as_the_store_would(redis_url, tmp_path):
    results = {}
    for mode, command in (("store", STORE_ONLY), ("local", None)):
        server = RedisServer().start()  # its own: script calls are counted per run
        try:
            client = redis.Redis.from_url(server.url)
            with _fleet({"NOTIFIER_REDIS_URL": server.url, **LIMITS}, tmp_path, command) as gateways:
                calls = _store_duplicates(client)
                answers = _run(gateways)
                time.sleep(0.3)  # the last local counts go with the next call (FLUSH_DELAY)
                stats = [gw.get("/v1/stats")[1] for gw in gateways]
                calls = _store_duplicates(client) - calls
                counters = client.hgetall("notifier:{notifier}:stats")
                digests = _digests(client)
            results[mode] = (answers, stats, _records(client, "notifier"), calls, counters, digests)
            client.close()
        finally:
            server.stop()
    store, local = results["store"], results["local"]
    outcomes = {body["status"] for *_, body in store[0]}
    assert outcomes >= {"accepted", "duplicate", "dropped", "resolved", "reopened"}, outcomes
    for sent, (theirs, ours) in enumerate(zip(store[0], local[0], strict=True)):
        assert theirs == ours, f"answer {sent} differs"
    assert store[1] == local[1]  # /v1/stats on both replicas, flushed before answering
    assert store[2] == local[2]  # every alert's n (Seen N), fired, resolved, reopened
    assert store[4] == local[4]  # the raw counters
    assert store[5] == local[5]  # the drops waiting for the next digest
    assert sum(int(n) for counts in store[5].values() for n in counts.values()) == store[1][0]["dropped"]
    duplicates = sum(1 for *_, body in store[0] if body["status"] == "duplicate")
    assert store[1][0]["duplicates"] == duplicates
    # The replicas did decide locally: most duplicates never reached the store.
    assert store[3] >= duplicates and local[3] < store[3] / 2, (local[3], store[3], duplicates)


def test_a_resolution_reaches_the_other_replica_within_100_ms(redis_url, tmp_path):
    """Resolve on a, a firing repeat on b 150 ms later: reopened (or 429 when full), never duplicate.

    Also measures the bound: b is hammered with repeats right after the resolution, and no
    repeat sent more than 100 ms after a's answer may be a duplicate.
    """
    limits = {
        "NOTIFIER_CATEGORY_LIMIT": "1000/1h",
        "NOTIFIER_CATEGORY_LIMITS": json.dumps({f"full-{i}": "1/1h" for i in range(5)}),
    }
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_GLOBAL_LIMIT": "1000/1h", **limits}
    with _fleet(env, tmp_path) as [a, b]:
        stale = []
        for i in range(25):
            key = f"flap-{i % 3}"
            status, first, _ = b.post(_alert("db", key))
            assert status in (202, 200), first
            for _ in range(3):  # b now answers its repeats itself
                assert b.post(_alert("db", key))[1]["status"] == "duplicate"
            assert a.post(_alert("db", key, "resolved"))[1]["status"] == "resolved"
            resolved_at = time.monotonic()
            if i % 2:
                time.sleep(0.15)
                status, body, _ = b.post(_alert("db", key))
                assert (status, body["status"]) == (202, "reopened"), body
            else:  # hammer b: every duplicate must be sent within 100 ms of the resolution
                while True:
                    sent = time.monotonic()
                    status, body, _ = b.post(_alert("db", key))
                    if body["status"] != "duplicate":
                        assert (status, body["status"]) == (202, "reopened"), body
                        break
                    stale.append(sent - resolved_at)
                    assert sent - resolved_at < 0.1, f"duplicate {sent - resolved_at:.3f} s after the resolution"
        # The category is full: the firing repeat after a resolution is an ordinary refusal.
        for i in range(5):
            category = f"full-{i}"
            assert b.post(_alert(category, "k"))[0] == 202
            assert b.post(_alert(category, "k"))[1]["status"] == "duplicate"
            assert a.post(_alert(category, "k", "resolved"))[1]["status"] == "resolved"
            time.sleep(0.15)
            status, body, _ = b.post(_alert(category, "k"))
            assert (status, body["status"], body.get("limit")) == (429, "dropped", "category"), body
            assert b.post(_alert(category, "k"))[0] == 429  # and again, now decided on b
        print(f"duplicates after a resolution: {len(stale)}, latest {max(stale, default=0) * 1000:.0f} ms")


def test_seen_n_equals_the_repeats_sent_to_both_replicas(redis_url, tmp_path):
    slack = SlackStandin().start()
    try:
        env = slack_env(redis_url, slack, NOTIFIER_CHANNEL_RATE="20/1s")
        with _fleet(env, tmp_path) as [a, b]:
            status, first, _ = a.post(_alert("db", "seen"))
            assert status == 202
            repeats = 0
            for i in range(300):
                status, body, _ = (a, b)[i % 2].post(_alert("db", "seen"))
                assert (status, body) == (200, {"status": "duplicate", "id": first["id"]})
                repeats += 1
            last = time.time()
            post = wait_for(lambda: next(iter(slack.received()), None), 20, what="the alert's post")
            wanted = f"Seen {repeats + 1} times"
            wait_for(lambda: wanted in slack.message(post.ts).text, 30, what=wanted)
            time.sleep(1.0)  # a count too many would show now
            text = slack.message(post.ts).text
            assert wanted in text, text
            clock = time.strftime("%H:%M:%S", time.gmtime(last))
            assert any(time.strftime("%H:%M:%S", time.gmtime(last + d)) in text for d in (-2, -1, 0, 1)), (text, clock)
            assert a.get("/v1/stats")[1]["duplicates"] == repeats
    finally:
        slack.stop()


async def test_a_key_refused_by_a_full_shared_part_is_not_refused_locally_when_another_class_fired_it(redis_url):
    """With a critical reserve, a key refused at the global level can still be admitted as critical.

    Replica ``a`` learns key K refused (the shared part of the global level is full, its
    category has room); replica ``b`` admits K as a critical event (its reserved slot). A's
    next firing repeat of K is a duplicate for the store, so ``a`` must not refuse it itself.
    """
    settings = load_settings(
        redis_url=redis_url, global_limit="10/1h", category_limit="100/1h", critical_reserve="10%", digest_interval=0
    )
    a, store = build_limiter(settings)
    b, _ = build_limiter(settings, store)
    try:
        for i in range(9):  # the shared part (10 - 1 reserved) is full
            assert (await a.admit(Event(category="db", text=f"fill {i}"))).outcome == Outcome.ACCEPTED
        key = Event(category="db", text="k", dedup_key="K")
        assert (await a.admit(key)).outcome == Outcome.DROPPED
        assert a._known.knows_refused(("db", "K"))  # what a learnt
        first = await b.admit(Event(category="db", text="k", dedup_key="K", severity="critical"))
        assert first.outcome == Outcome.ACCEPTED
        again = await a.admit(key)
        assert (again.outcome, again.id) == (Outcome.DUPLICATE, first.id)
    finally:
        await store.close()


def _commands(client: redis.Redis) -> int:
    """Commands the store ran so far, INFO's own left out."""
    stats = client.info("commandstats")
    return sum(s["calls"] for name, s in stats.items() if name != "cmdstat_info")


async def test_the_epoch_is_read_by_the_calls_that_count_repeats_never_polled(redis_url, monkeypatch):
    """A quiet replica that knows an alert firing sends nothing; while repeats keep coming, the
    read stays fresh and every repeat is answered locally: the first after the pause waits for
    the read it starts, and none goes to the store.

    The flush delay is made longer than ``FRESH``: only the rule "a repeat answered once the read
    is ``REFRESH`` old starts a call at once" keeps the reads fresh.
    """
    monkeypatch.setattr(limiter_module, "FLUSH_DELAY", 0.3)
    settings = load_settings(redis_url=redis_url, global_limit="100/1h", category_limit="100/1h", digest_interval=0)
    limiter, store = build_limiter(settings)
    client = redis.Redis.from_url(redis_url)
    try:
        event = Event(category="db", text="epoch", dedup_key="epoch-read")
        first = await limiter.admit(event)
        assert first.outcome == Outcome.ACCEPTED
        assert (await limiter.admit(event)).outcome == Outcome.DUPLICATE  # known firing: answered here
        await limiter.flush()
        quiet = _commands(client)
        await asyncio.sleep(0.5)
        assert _commands(client) == quiet  # nothing polls
        asked, answers, started = _store_duplicates(client), [], time.monotonic()
        while time.monotonic() - started < 1.0:
            answers.append(await limiter.admit(event))
            await asyncio.sleep(0.005)
        assert {(a.outcome, a.id) for a in answers} == {(Outcome.DUPLICATE, first.id)}
        assert _store_duplicates(client) - asked == 0, len(answers)
        await limiter.flush()
        fetched = client.hget(Keys("notifier").record("db", "epoch-read"), "n")
        assert int(fetched) == 2 + len(answers)  # every repeat counted
    finally:
        client.close()
        await store.close()


@pytest.mark.parametrize("pause", [0.0, 0.15])
async def test_a_resolution_on_another_replica_is_seen_by_the_next_read(redis_url, pause):
    """b knows the alert firing and keeps answering repeats; a resolves it. b's repeats are
    duplicates only while sent less than ``FRESH`` after the resolution; then it is reopened."""
    settings = load_settings(redis_url=redis_url, global_limit="100/1h", category_limit="100/1h", digest_interval=0)
    a, store = build_limiter(settings)
    b, _ = build_limiter(settings, store)
    try:
        event = Event(category="db", text="flap", dedup_key=f"flap-{pause}")
        assert (await b.admit(event)).outcome == Outcome.ACCEPTED
        assert (await b.admit(event)).outcome == Outcome.DUPLICATE
        resolved = await a.admit(Event(category="db", text="flap", dedup_key=f"flap-{pause}", status="resolved"))
        assert resolved.outcome == Outcome.RESOLVED
        resolved_at = time.monotonic()
        await asyncio.sleep(pause)
        while True:
            sent = time.monotonic()
            answer = await b.admit(event)
            if answer.outcome != Outcome.DUPLICATE:
                break
            assert sent - resolved_at < 0.1, f"duplicate {sent - resolved_at:.3f} s after the resolution"
            await asyncio.sleep(0.002)
        assert answer.outcome == Outcome.REOPENED
    finally:
        await store.close()


async def test_repeats_met_with_an_aged_read_share_the_next_read_and_none_goes_to_the_store(redis_url):
    """Repeats that arrive once the epoch's read is older than ``FRESH`` wait for one read together,
    then are answered here; one of them cancelled (its client gone) does not cancel the others' wait."""
    settings = load_settings(redis_url=redis_url, global_limit="100/1h", category_limit="100/1h", digest_interval=0)
    limiter, store = build_limiter(settings)
    client = redis.Redis.from_url(redis_url)
    try:
        event = Event(category="db", text="aged", dedup_key="aged-read")
        first, asked = await _fired_and_aged(limiter, event, client)
        waiting = [asyncio.create_task(limiter.admit(event)) for _ in range(10)]
        await asyncio.sleep(0)  # each is waiting for the read now
        waiting[0].cancel()
        answers = await asyncio.gather(*waiting[1:])
        assert {(a.outcome, a.id) for a in answers} == {(Outcome.DUPLICATE, first.id)}
        await limiter.flush()
        assert _store_duplicates(client) == asked  # all nine answered here, after one read
        seen = int(client.hget(Keys("notifier").record("db", "aged-read"), "n"))
        assert seen == 1 + 9  # the cancelled one was never answered
    finally:
        client.close()
        await store.close()


async def test_a_repeat_read_on_sight_with_an_aged_read_waits_for_the_next_and_is_not_read_in_full(
    aiohttp_client, redis_url, monkeypatch
):
    """At the events door, the wait comes before ``parse_event``: on a loaded replica about one storm
    repeat in ten meets an aged read, and reading each in full cost more than the wait."""
    settings = load_settings(redis_url=redis_url, global_limit="100/1h", category_limit="100/1h", digest_interval=0)
    client = await aiohttp_client(create_app(settings))
    store = redis.Redis.from_url(redis_url)
    try:
        link = {"text": "Runbook", "url": "https://runbooks.example.com/db"}
        body = {"category": "db", "text": "aged at the door", "dedup_key": "aged-door", "links": [link]}
        first = await (await client.post("/v1/events", json=body)).json()
        await asyncio.sleep(0.2)  # the read ages past FRESH

        def not_read(*args: object) -> None:
            raise AssertionError("a repeat read on sight was read again in full")

        monkeypatch.setattr("notifier.http.events.parse_event", not_read)
        asked = _store_duplicates(store)
        answers = await asyncio.gather(*(client.post("/v1/events", json=body) for _ in range(5)))
        assert [(a.status, (await a.json())["id"]) for a in answers] == [(200, first["id"])] * 5
        assert _store_duplicates(store) == asked  # answered here, after one read
    finally:
        store.close()


async def test_an_alertmanager_repeat_with_an_aged_read_is_answered_here_after_the_next(aiohttp_client, redis_url):
    """The other doors decide through ``Admission.decide_on``, which waits for a read as the events door does."""
    settings = load_settings(redis_url=redis_url, global_limit="100/1h", category_limit="100/1h", digest_interval=0)
    client = await aiohttp_client(create_app(settings))
    store = redis.Redis.from_url(redis_url)
    try:
        alert = {"labels": {"alertname": "DiskFull", "instance": "db-1"}, "fingerprint": "aged-am"}
        payload = {"version": "4", "alerts": [alert]}
        first = (await (await client.post("/v1/alertmanager", json=payload)).json())["results"][0]
        await asyncio.sleep(0.2)  # the read ages past FRESH
        asked = _store_duplicates(store)
        again = (await (await client.post("/v1/alertmanager", json=payload)).json())["results"][0]
        assert (first["status"], again["status"], again["id"]) == ("accepted", "duplicate", first["id"])
        assert _store_duplicates(store) == asked  # answered here, after the read
    finally:
        store.close()


@pytest.fixture
def held(redis_server, redis_url):
    """A proxy in front of the session's redis-server that can hold one reply (a slow round trip)."""
    proxy = ReplyProxy(redis_server.port).start()
    yield proxy
    proxy.stop()


async def test_repeats_are_answered_here_by_a_slow_read_sent_after_they_arrived(held, redis_url):
    """The contract bounds a resolution's reach by when a repeat arrives: a read sent after the
    repeats arrived serves them however late its reply, so none goes to the store."""
    settings = load_settings(
        redis_url=held.url, key_prefix="slowread", global_limit="100/1h", category_limit="100/1h", digest_interval=0
    )
    limiter, store = build_limiter(settings)
    client = redis.Redis.from_url(redis_url)
    try:
        event = Event(category="db", text="slow", dedup_key="slow-read")
        first, asked = await _fired_and_aged(limiter, event, client)
        held.arm(b"slowread", "hold", seconds=0.15)  # the next call's reply comes 150 ms late
        started = time.monotonic()
        answers = await asyncio.gather(*(limiter.admit(event) for _ in range(5)))
        assert time.monotonic() - started >= 0.15  # answered after the held reply
        assert {(a.outcome, a.id) for a in answers} == {(Outcome.DUPLICATE, first.id)}
        await limiter.flush()
        assert _store_duplicates(client) == asked
    finally:
        client.close()
        await store.close()


async def test_a_slow_read_still_sees_a_resolution_made_before_the_repeat_arrived(held, redis_url):
    """A repeat arriving 150 ms after a resolution elsewhere, its replica's read aged: the read it
    waits for is sent after it arrived, so however late its reply it shows the resolution."""
    settings = load_settings(
        redis_url=redis_url, key_prefix="slowres", global_limit="100/1h", category_limit="100/1h", digest_interval=0
    )
    resolver, store = build_limiter(settings)
    repeater, far = build_limiter(settings.model_copy(update={"redis_url": held.url}))
    try:
        event = Event(category="db", text="flap", dedup_key="slow-flap")
        assert (await repeater.admit(event)).outcome == Outcome.ACCEPTED
        assert (await repeater.admit(event)).outcome == Outcome.DUPLICATE
        await repeater.flush()
        await asyncio.sleep(0.2)  # the repeater's read ages; a quiet replica reads nothing more
        resolution = Event(category="db", text="flap", dedup_key="slow-flap", status="resolved")
        assert (await resolver.admit(resolution)).outcome == Outcome.RESOLVED
        await asyncio.sleep(0.15)
        held.arm(b"slowres", "hold", seconds=0.15)
        assert (await repeater.admit(event)).outcome == Outcome.REOPENED
    finally:
        await store.close()
        await far.close()
