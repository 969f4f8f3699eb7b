"""An in-process gateway with two front-door tokens and a Slack stand-in that records each call."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import pytest
from aiohttp import web

from notifier.config import parse_config
from notifier.http.app import create_app
from notifier.settings import load_settings


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


TOKENS = {
    "pay": {"sha256": sha("PAYTOKEN"), "scopes": ["send"], "channels": ["#payments-*"]},
    "ops": {"sha256": sha("OPSTOKEN"), "scopes": ["send"]},
}


class Slack:
    """A stand-in for Slack's Web API that records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self._ts = itertools.count(1)

    async def handle(self, request: web.Request) -> web.Response:
        method, body = request.match_info["method"], await request.json()
        self.calls.append((method, body))
        if method == "chat.postMessage":
            return web.json_response(
                {"ok": True, "channel": "C" + body["channel"].strip("#"), "ts": f"1.{next(self._ts)}"}
            )
        return web.json_response({"ok": True, "channel": body.get("channel"), "ts": body.get("ts")})


@pytest.fixture
def make_doors(aiohttp_client):
    async def make(tokens: dict[str, Any] | None = None, **settings: Any):
        slack = Slack()
        stand_in = web.Application()
        stand_in.router.add_post("/api/{method}", slack.handle)
        slack_client = await aiohttp_client(stand_in)
        url = str(slack_client.make_url("/api/"))
        app = create_app(
            load_settings(slack_bot_token="xoxb-test", slack_api_url=url, digest_interval=0, **settings),
            parse_config({"tokens": TOKENS if tokens is None else tokens}),
        )
        return await aiohttp_client(app), slack

    return make
