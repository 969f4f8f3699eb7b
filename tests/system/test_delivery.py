"""Delivery in process: real Redis, real slack-sdk, the Slack stand-in scripted to fail."""

from __future__ import annotations

import asyncio
import re
import time

from slack_standin import TOKEN

from notifier.delivery.channels import Channels
from notifier.delivery.compose import Composer
from notifier.delivery.group import ConsumerGroup
from notifier.delivery.worker import STORE_ATTEMPTS
from notifier.errors import StoreUnavailable
from notifier.http.app import create_app
from notifier.settings import load_settings


def _settings(redis_url, slack, **extra):
    options = dict(
        redis_url=redis_url,
        slack_bot_token=TOKEN,
        slack_api_url=slack.api_url,
        slack_channel="#alerts",
        global_limit="1000/30m",
        category_limit="1000/30m",
        channel_rate="20/1s",
        digest_interval=0,
    )
    return load_settings(**{**options, **extra})


async def _until(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _counts(slack, prefix):
    texts = [m.group() for m in (re.search(prefix + r"-\d+", t) for t in slack.texts()) if m]
    return {t: texts.count(t) for t in texts}


async def _posted_once(slack, text, what, timeout=30.0):
    """Until ``text`` (``prefix-N``) is posted, and no other of its prefix is."""
    prefix = text.rsplit("-", 1)[0]

    async def posted():
        return _counts(slack, prefix) == {text: 1}

    await _until(posted, timeout, what=what)


def _first_call_fails(monkeypatch, owner, name, error):
    """``owner.name`` (a method of one argument) raises ``error`` when first called; what it was called with."""
    failures = []
    real = getattr(owner, name)

    async def once(self, arg):
        if not failures:
            failures.append(arg)
            raise error
        return await real(self, arg)

    monkeypatch.setattr(owner, name, once)
    return failures


async def _post(client, texts):
    for text in texts:
        response = await client.post("/v1/events", json={"category": "ops", "text": text})
        assert response.status == 202


async def test_429_and_5xx_every_event_arrives_exactly_once(aiohttp_client, redis_url, slack):
    slack.script((429, 1), (500,), (502,), (429, 1), (503,))
    client = await aiohttp_client(create_app(_settings(redis_url, slack)))
    texts = [f"retry-{i}" for i in range(8)]
    await _post(client, texts)

    async def all_there():
        return len(_counts(slack, "retry")) == len(texts)

    await _until(all_there, what="all events delivered")
    await asyncio.sleep(0.5)  # a duplicate, if any, would arrive now
    assert _counts(slack, "retry") == {t: 1 for t in texts}
    # After each 429 no call reached Slack before its Retry-After was over.
    calls = list(slack.calls)
    for at, status in calls:
        if status == 429:
            assert not [c for c, _ in calls if at < c < at + 0.95], calls

    async def counted():  # a delivery is counted after its settle, which may trail Slack's answer
        return 'notifier_deliveries_total{outcome="delivered"} 8.0' in await (await client.get("/metrics")).text()

    await _until(counted, what="8 deliveries counted")
    metrics = await (await client.get("/metrics")).text()
    assert 'notifier_deliveries_total{outcome="rate_limited"} 2.0' in metrics
    assert 'notifier_deliveries_total{outcome="failed"} 3.0' in metrics
    assert 'notifier_deliveries_total{outcome="delivered"} 8.0' in metrics
    assert "notifier_delivery_failed_attempts_total 3.0" in metrics


async def _dead(client, count):
    async def there():
        body = await (await client.get("/v1/dead")).json()
        return body["count"] == count and body

    await _until(there, what=f"{count} dead letters")
    return (await (await client.get("/v1/dead")).json())["entries"]


async def test_permanent_error_dead_letters_at_once_and_requeue_delivers(aiohttp_client, redis_url, slack):
    slack.script(("error", "channel_not_found"))
    client = await aiohttp_client(create_app(_settings(redis_url, slack)))
    response = await client.post("/v1/events", json={"category": "ops", "text": "lost-1"})
    event_id = (await response.json())["id"]
    [entry] = await _dead(client, 1)
    assert entry["id"] == event_id and entry["category"] == "ops" and entry["channel"] == "#alerts"
    assert entry["reason"] == "channel_not_found"
    assert len(slack.calls) == 1  # at once: no retry of a permanent error
    stats = await (await client.get("/v1/stats")).json()
    assert stats["dead_lettered"] == 1
    response = await client.post("/v1/dead/requeue", headers={"Content-Type": "application/json"})  # open mode
    assert (await response.json()) == {"status": "requeued", "count": 1, "ids": [event_id]}

    await _posted_once(slack, "lost-1", "requeued event delivered")
    body = await (await client.get("/v1/dead")).json()
    assert body["count"] == 0
    assert body["counters"] == {"delivered": 1, "delivered_again": 0, "dead_lettered": 1, "requeued": 1}


async def test_transient_beyond_max_attempts_dead_letters_then_requeue_by_id(aiohttp_client, redis_url, slack):
    slack.script((500,), (500,))
    client = await aiohttp_client(create_app(_settings(redis_url, slack, delivery_max_attempts=2)))
    await _post(client, ["flaky-1"])
    [entry] = await _dead(client, 1)
    assert "gave up after 2 attempts" in entry["reason"]
    response = await client.post("/v1/dead/requeue", json={"ids": ["no-such-id"]})
    assert (await response.json())["count"] == 0
    response = await client.post("/v1/dead/requeue", json={"ids": [entry["id"]]})
    assert (await response.json())["ids"] == [entry["id"]]

    await _posted_once(slack, "flaky-1", "requeued event delivered")
    metrics = await (await client.get("/metrics")).text()
    assert 'notifier_deliveries_total{outcome="dead_lettered"} 1.0' in metrics


async def test_requeue_needs_the_api_token(aiohttp_client, redis_url, slack):
    client = await aiohttp_client(create_app(_settings(redis_url, slack, api_tokens="s3cret")))
    assert (await client.post("/v1/dead/requeue")).status == 401
    response = await client.post("/v1/dead/requeue", headers={"Authorization": "Bearer s3cret"})
    assert response.status == 200 and (await response.json())["count"] == 0
    assert (
        await client.post("/v1/dead/requeue", json={"ids": "x"}, headers={"Authorization": "Bearer s3cret"})
    ).status == 422


def _gauge(text, name):
    match = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(match.group(1)) if match else None


async def test_queue_gauges_follow_a_cooldown(aiohttp_client, redis_url, slack):
    slack.script((429, 3))
    client = await aiohttp_client(create_app(_settings(redis_url, slack)))
    await _post(client, ["held-1", "held-2"])

    async def backlog():
        text = await (await client.get("/metrics")).text()
        return (
            _gauge(text, "notifier_outbox_length") == 2
            and _gauge(text, "notifier_outbox_pending") == 2
            and _gauge(text, "notifier_outbox_oldest_pending_seconds") > 0
        )

    await _until(backlog, what="gauges showing the held backlog")

    async def drained():
        text = await (await client.get("/metrics")).text()
        return (
            _gauge(text, "notifier_outbox_length") == 0
            and _gauge(text, "notifier_outbox_oldest_pending_seconds") == 0
            and _counts(slack, "held") == {"held-1": 1, "held-2": 1}
        )

    await _until(drained, what="delivery and empty gauges")
    text = await (await client.get("/metrics")).text()
    assert "notifier_slack_request_seconds_count 3.0" in text
    assert "notifier_delivery_seconds_count 2.0" in text


async def test_dead_letters_are_kept_up_to_their_bound_the_oldest_going_first(aiohttp_client, redis_url, slack):
    slack.script(*[("error", "channel_not_found")] * 3)
    client = await aiohttp_client(create_app(_settings(redis_url, slack, dead_letters_max=2)))
    ids = []
    for n in range(3):
        response = await client.post("/v1/events", json={"category": "ops", "text": f"lost-{n}"})
        ids.append((await response.json())["id"])
        await _dead(client, min(n + 1, 2))

    async def three_dead() -> bool:
        return (await (await client.get("/v1/stats")).json())["dead_lettered"] == 3

    await _until(three_dead, what="three dead-lettered")
    entries = await _dead(client, 2)
    assert [e["id"] for e in entries] == ids[1:]  # the oldest went first


async def test_a_store_failure_before_the_post_is_retried_at_once_not_after_claim_idle(
    aiohttp_client, redis_url, slack, monkeypatch
):
    """A step before the post (here the channel's pace) finds the store gone for a moment: the entry is
    posted once the store answers, not left pending until another replica reclaims it (60 s here)."""
    failures = _first_call_fails(monkeypatch, Channels, "bucket", StoreUnavailable("Connection closed by server."))
    client = await aiohttp_client(create_app(_settings(redis_url, slack, claim_idle="60s")))
    await _post(client, ["blip-1"])

    await _posted_once(slack, "blip-1", "the event posted within seconds", timeout=10)
    assert failures == ["#alerts"]


async def test_a_read_of_the_outbox_that_fails_unexpectedly_is_made_again(
    aiohttp_client, redis_url, slack, monkeypatch
):
    """Whatever a read raises (a client's exception of a kind no one foresaw), the reader goes on."""
    failures = _first_call_fails(monkeypatch, ConsumerGroup, "read", RuntimeError("an exception of an unforeseen kind"))
    client = await aiohttp_client(create_app(_settings(redis_url, slack)))
    await _post(client, ["reread-1"])

    await _posted_once(slack, "reread-1", "the event posted after the failed read", timeout=10)
    assert failures == ["0"]


async def test_an_entry_the_store_always_fails_before_its_post_does_not_hold_its_channel(
    aiohttp_client, redis_url, slack, monkeypatch
):
    """Tried a few times (STORE_ATTEMPTS), then left for claim_idle: the channel's next entry goes out."""
    tries = []
    message = Composer.message

    async def refused(self, taken):
        if "poison" in taken.entry.event.get("text", ""):
            tries.append(taken.stream_id)
            raise StoreUnavailable("WRONGTYPE Operation against a key holding the wrong kind of value")
        return await message(self, taken)

    monkeypatch.setattr(Composer, "message", refused)
    client = await aiohttp_client(create_app(_settings(redis_url, slack, claim_idle="60s")))
    await _post(client, ["poison-1", "after-1"])

    await _posted_once(slack, "after-1", "the channel's next entry posted", timeout=10)
    assert len(tries) == STORE_ATTEMPTS and len(set(tries)) == 1 and not _counts(slack, "poison")
