"""Shared fixtures: a real redis-server per session, a clean database per test, Slack stand-in."""

from __future__ import annotations

import pytest
import redis
from aiohttp import web
from helpers import RedisServer
from slack_standin import SlackStandin

from notifier.http.serving import shortcut
from notifier.http.state import SETTINGS


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


@pytest.fixture
def aiohttp_client(aiohttp_client):
    """pytest-aiohttp's client; a gateway it serves answers ``POST /v1/events`` as ``notifier serve``
    does, before the router (``notifier/http/serving.py``), so the suite's requests take that path."""

    async def client(app, *args, **kwargs):
        made = await aiohttp_client(app, *args, **kwargs)
        if isinstance(app, web.Application) and SETTINGS in app:  # the gateway's, not a stand-in's
            shortcut(made.server.runner.server, app)
        return made

    return client
