"""Shared fixtures: a real redis-server per session, a clean database per test, Slack stand-in."""

from __future__ import annotations

import pytest
import redis
from helpers import RedisServer
from slack_standin import SlackStandin


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """URL of the session's redis-server, emptied before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def slack():
    standin = SlackStandin().start()
    yield standin
    standin.stop()
