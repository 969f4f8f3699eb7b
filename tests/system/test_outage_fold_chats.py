"""After an outage of a chat that is not Slack (contract: "After an outage", "for every destination kind"):
a Discord channel's stale backlog is one folded message too, shaped for Discord, and each alert once."""

from __future__ import annotations

import pytest
from discord_standin import DiscordStandin
from helpers import until

from notifier.config import parse_config
from notifier.http.app import create_app
from notifier.settings import load_settings

OUTAGE = 6  # Discord answers this many posts with 500


@pytest.fixture
def discord():
    standin = DiscordStandin().start()
    yield standin
    standin.stop()


async def test_a_discord_backlog_is_folded_into_one_message(redis_url, discord, aiohttp_client, monkeypatch):
    monkeypatch.setenv("HOOK", discord.webhook_url)
    settings = load_settings(
        redis_url=redis_url, digest_interval=0, stale_after="2s", delivery_max_attempts=1000,
        global_limit="1000/30m", category_limit="1000/30m",
    )  # fmt: skip
    config = parse_config({"destinations": {"gaming": {"kind": "discord", "url": "${HOOK}", "rate": "4/1s"}}})
    discord.script(*[(500,)] * OUTAGE)
    gateway = await aiohttp_client(create_app(settings, config))

    async def post(**event) -> None:
        answer = await gateway.post("/v1/events", json=event)
        assert answer.status == 202, await answer.text()

    await post(category="raid", text="boss server down", dedup_key="boss-1", severity="critical")
    for n in range(20):
        await post(category=("chat", "lobby")[n % 2], text=f"plain event {n}", severity="warning")

    async def settled() -> bool:
        stats = await (await gateway.get("/v1/stats")).json()
        return stats["accepted"] == stats["delivered"] + stats["folded"] and stats["folded"] > 0

    await until(settled, 60, what="every entry delivered or folded")
    shown = [m.content + str(m.embeds) for m in discord.messages]
    stats = await (await gateway.get("/v1/stats")).json()
    [folded] = [s for s in shown if "Folded" in s]
    assert "Folded 20 messages" in folded and "chat 10, lobby 10" in folded and stats["folded"] == 20, shown
    assert [s for s in shown if s != folded and "boss server down" in s] == [s for s in shown if s != folded], shown
    assert len(shown) == 2, shown  # the fold, and the alert on its own
    assert discord.refusals == [] and all(m.allowed == [{"parse": []}] for m in discord.messages)
