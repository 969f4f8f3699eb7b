"""A replica's Limiter on a real redis-server, and the events and answers of test_fair_shares*.py."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from builders import build_limiter

from notifier.models import Decision, Event
from notifier.settings import load_settings


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
