"""Front doors with several destinations: a token's messages go to the destination it is bound to,
its ``channels`` globs bind ``DESTINATION:CHANNEL``, and each workspace gets its own token's calls."""

from __future__ import annotations

import asyncio

from aiohttp import web
from doors_app import Slack, sha

from notifier.config import parse_config
from notifier.http.app import create_app
from notifier.settings import load_settings


async def workspace(aiohttp_client, token: str) -> tuple[Slack, str]:
    slack = Slack()
    app = web.Application()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        return await slack.handle(request)

    app.router.add_post("/api/{method}", handle)
    return slack, str((await aiohttp_client(app)).make_url("/api/"))


async def test_a_token_bound_to_a_destination_posts_there(aiohttp_client, monkeypatch):
    monkeypatch.setenv("ACME_BOT", "xoxb-acme")
    monkeypatch.setenv("CONTOSO_BOT", "xoxb-contoso")
    acme, acme_url = await workspace(aiohttp_client, "xoxb-acme")
    contoso, contoso_url = await workspace(aiohttp_client, "xoxb-contoso")
    config = {
        "destinations": {
            "acme": {"kind": "slack", "bot_token": "${ACME_BOT}", "channel": "#alerts", "api_url": acme_url},
            "contoso": {"kind": "slack", "bot_token": "${CONTOSO_BOT}", "channel": "#ops", "api_url": contoso_url},
        },
        "tokens": {
            "pay": {"sha256": sha("PAYTOKEN"), "scopes": ["send"], "channels": ["acme:#payments-*"]},
            "ops": {"sha256": sha("OPSTOKEN"), "scopes": ["send"], "destination": "contoso"},
        },
    }
    settings = load_settings(digest_interval=0)
    client = await aiohttp_client(create_app(settings, parse_config(config, "f.yaml", settings)))

    async def post(token: str, channel: str) -> dict:
        body = {"channel": channel, "text": f"to {channel}"}
        answer = await client.post("/api/chat.postMessage", json=body, headers={"Authorization": f"Bearer {token}"})
        return await answer.json()

    assert (await post("PAYTOKEN", "#payments-eu"))["ok"]
    assert (await post("PAYTOKEN", "#general"))["error"] == "channel_not_found"  # acme:#general: not its glob
    assert (await post("OPSTOKEN", "#ops"))["ok"]
    delivered: list[int] = []
    for _ in range(100):  # a stand-in records the call before the gateway reads its answer and counts it
        stats = await (await client.get("/v1/stats")).json()
        delivered = [stats["destinations"][name]["delivered"] for name in ("acme", "contoso")]
        if delivered == [1, 1]:
            break
        await asyncio.sleep(0.05)
    assert delivered == [1, 1]
    assert [(m, b["channel"]) for m, b in acme.calls] == [("chat.postMessage", "#payments-eu")]
    assert [(m, b["channel"]) for m, b in contoso.calls] == [("chat.postMessage", "#ops")]  # its token's
