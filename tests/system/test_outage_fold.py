"""After an outage (contract: "After an outage"): a channel's stale backlog is folded into one message,
each alert among it posted once as it stands now, and nothing is lost from the counts."""

from __future__ import annotations

import asyncio

from helpers import until
from redis_proxy import ReplyProxy
from slack_standin import TOKEN

from notifier.http.app import create_app
from notifier.settings import load_settings

OUTAGE = 3  # Slack answers this many posts with 503; then it refuses connections for a while
AWAY = 2.5  # seconds of refused connections


async def test_a_stale_backlog_is_one_folded_message_and_each_alert_once(redis_url, slack, aiohttp_client):
    proxy = ReplyProxy(slack.port).start()  # a TCP proxy in front of Slack: it can refuse connections
    try:
        await outage(redis_url, slack, proxy, aiohttp_client)
    finally:
        proxy.stop()


async def outage(redis_url, slack, proxy: ReplyProxy, aiohttp_client) -> None:
    api_url = f"http://127.0.0.1:{proxy.port}/api/"
    settings = load_settings(
        redis_url=redis_url, slack_bot_token=TOKEN, slack_api_url=api_url, slack_channel="#alerts",
        global_limit="1000/30m", category_limit="1000/30m", channel_rate="20/1s", digest_interval=0,
        stale_after="2s", delivery_max_attempts=1000,
    )  # fmt: skip
    slack.script(*[(503,)] * OUTAGE)
    gateway = await aiohttp_client(create_app(settings))

    async def post(**event) -> None:
        answer = await gateway.post("/v1/events", json=event)
        assert answer.status == 202, await answer.text()

    await post(category="db", text="lag on db-1", dedup_key="lag-1", severity="critical")  # waits first
    for n in range(40):
        await post(category=("web", "api", "batch")[n % 3], text=f"plain event {n}", severity="warning")
    await post(category="db", text="disk full on db-2", dedup_key="disk-2", severity="error")
    await post(category="db", text="cpu high on db-3", dedup_key="cpu-3")
    await post(category="db", text="cpu ok on db-3", dedup_key="cpu-3", status="resolved")
    await until(lambda: _async(len(slack.calls) >= OUTAGE), 60, what="the 503s answered")
    proxy.refuse()  # then Slack cannot be reached at all for a while
    await asyncio.sleep(AWAY)
    proxy.accept()

    async def settled() -> bool:
        stats = await (await gateway.get("/v1/stats")).json()
        return stats["accepted"] + stats["resolved"] == stats["delivered"] + stats["folded"] + stats["dead_lettered"]

    await until(settled, 60, what="every admitted entry delivered or folded")
    stats = await (await gateway.get("/v1/stats")).json()
    texts = [m.text for m in slack.received() if m.thread_ts is None]
    folded = [t for t in texts if t.startswith("Folded")]
    assert len(folded) == 1 and stats["folded"] >= 40, (texts, stats)
    assert not any("plain event" in t for t in texts if not t.startswith("Folded")), texts
    for alert in ("lag on db-1", "disk full on db-2", "cpu high on db-3"):
        assert sum(alert in t for t in texts) == 1, (alert, texts)  # each alert once
    assert any("cpu high on db-3" in t and t.startswith("Resolved") for t in texts), texts  # as it stands now
    assert stats["dead_lettered"] == 0

    await post(category="web", text="after the outage")  # fresh again: posted as usual
    await until(
        lambda: _async(any("after the outage" in m.text for m in slack.received())), 60, what="a fresh event posted"
    )
    metrics = await (await gateway.get("/metrics")).text()
    assert 'notifier_events_total{category="web",outcome="folded"}' in metrics
    assert slack.refusals == []


async def _async(value: bool) -> bool:
    return value
