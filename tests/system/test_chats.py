"""Discord and Google Chat destinations through the gateway: paced, edited, threaded, defused, dead-lettered."""

from __future__ import annotations

import itertools
import time

import pytest
import yaml
from clicks import AUTH, Replicas
from discord_standin import DiscordStandin
from google_chat_standin import GoogleChatStandin
from helpers import wait_for


@pytest.fixture
def chats():
    discord, google = DiscordStandin().start(), GoogleChatStandin().start()
    yield discord, google
    discord.stop()
    google.stop()


@pytest.fixture
def fleet(redis_url, tmp_path, chats):
    discord, google = chats
    document = {
        "destinations": {
            "gaming": {"kind": "discord", "url": "${DISCORD_HOOK}"},
            "space": {"kind": "google-chat", "url_file": str(tmp_path / "gchat")},
        },
        "routes": [{"match": {"category": "chat"}, "destination": "space"}],
    }
    (tmp_path / "gchat").write_text(google.url)
    (tmp_path / "notifier.yaml").write_text(yaml.safe_dump(document))
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_CONFIG": str(tmp_path / "notifier.yaml"),
        "DISCORD_HOOK": discord.webhook_url,
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_API_TOKENS": AUTH["Authorization"].removeprefix("Bearer "),
        "NOTIFIER_DELIVERY_MAX_ATTEMPTS": "3",
    }
    replicas = Replicas(str(tmp_path))
    yield lambda count=2: replicas.start(env, count)
    replicas.stop()


def send(gateway, **event: object) -> None:
    status, answer, _ = gateway.post(event, headers=AUTH)
    assert status == 202 or answer.get("status") in ("duplicate", "resolved"), answer


def test_a_burst_to_discord_keeps_its_pace_and_mentions_no_one(fleet, chats):
    discord, _ = chats
    a, b = fleet()
    for i in range(6):
        send([a, b][i % 2], category="game", text=f"burst-{i} @everyone @here <@123> <@&456>", severity="error")
    wait_for(lambda: len(discord.messages) == 6, 30, what="six Discord messages")
    assert discord.throttled == [] and discord.refusals == []
    assert all(m.allowed == [{"parse": []}] and m.pinged == [] for m in discord.messages)
    times = sorted(m.at for m in discord.messages)
    assert min(later - earlier for earlier, later in itertools.pairwise(times)) >= 1.9  # 30/1m: one per 2 s


def test_a_429_from_discord_pauses_both_replicas(fleet, chats):
    discord, _ = chats
    discord.script((429, 2.5))
    a, b = fleet()
    for i in range(3):
        send([a, b][i % 2], category="game", text=f"after-{i}")
    paused = lambda: b.get("/v1/stats", AUTH)[1]["destinations"]["gaming"]["paused_until"]  # noqa: E731
    assert wait_for(paused, 10, what="the pause in /v1/stats").endswith("Z")
    wait_for(lambda: len(discord.messages) == 3, 30, what="three Discord messages")
    [limited] = [at for at, _, status in discord.calls if status == 429]
    assert not [at for at, _, status in discord.calls if limited + 0.05 < at < limited + 2.45]
    delivered = lambda: a.get("/v1/stats", AUTH)[1]["destinations"]["gaming"]["delivered"]  # noqa: E731
    wait_for(lambda: delivered() == 3, 10, what="3 counted as delivered to gaming")  # counted after the settle


def test_discord_alerts_are_edited_and_resolved_in_place(fleet, chats):
    discord, _ = chats
    a, b = fleet()
    for i in range(3):
        send([a, b][i % 2], category="game", text="lag on eu-1", dedup_key="lag-eu-1", severity="warning")
        time.sleep(0.3)
    wait_for(lambda: discord.messages and discord.messages[0].edits, 30, what="the repeat's edit")
    send(a, category="game", text="lag on eu-1", dedup_key="lag-eu-1", status="resolved")
    shown = lambda: str(discord.messages[0].embeds) + discord.messages[0].content  # noqa: E731
    wait_for(lambda: "Resolved" in shown(), 30, what="the resolution's edit")
    assert "Seen 3 times" in shown(), shown()
    time.sleep(2.5)  # a resolution posted apart would come within a slot
    assert len(discord.messages) == 1 and discord.refusals == []


def test_a_deleted_discord_webhook_dead_letters_with_its_reason(fleet, chats):
    discord, _ = chats
    discord.delete_webhook()
    [a] = fleet(1)
    send(a, category="game", text="nobody hears this")
    dead = wait_for(lambda: a.get("/v1/dead", AUTH)[1]["entries"], 30, what="a dead letter")
    assert "404" in dead[0]["reason"] and "Unknown Webhook" in dead[0]["reason"], dead
    dead_count = lambda: a.get("/v1/stats", AUTH)[1]["destinations"]["gaming"]["dead"]  # noqa: E731
    wait_for(lambda: dead_count() == 1, 10, what="1 counted as dead for gaming")  # counted after the dead letter


def test_google_chat_keeps_an_alert_in_one_thread(fleet, chats):
    _, google = chats
    [a] = fleet(1)
    send(a, category="chat", text="queue backlog at 90% <users/all>", dedup_key="q-1", severity="critical")
    wait_for(lambda: len(google.received) == 1, 30, what="the alert in Google Chat")
    send(a, category="chat", text="queue backlog at 90%", dedup_key="q-1", status="resolved")
    wait_for(lambda: len(google.received) == 2, 30, what="its resolution")
    first, resolution = google.received
    assert first.thread == resolution.thread and first.thread
    assert "<users/all>" not in str(first.body) and google.refusals == []
