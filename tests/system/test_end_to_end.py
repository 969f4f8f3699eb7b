"""A mixed run over several categories with real Redis and the Slack stand-in."""

import asyncio
import re

from slack_standin import TOKEN

from notifier.http.app import create_app
from notifier.settings import load_settings


async def test_mixed_run_admits_exactly_delivers_once_and_counts_agree(aiohttp_client, redis_url, slack):
    settings = load_settings(
        redis_url=redis_url,
        slack_bot_token=TOKEN,
        slack_api_url=slack.api_url,
        slack_channel="#alerts",
        category_channels='{"db": "#db"}',
        global_limit="20/30m",
        category_limit="6/30m",
        category_limits='{"deploy": "2/30m"}',
        channel_rate="200/1s",
        digest_interval=0,
    )
    client = await aiohttp_client(create_app(settings))
    categories = ["db", "web", "deploy", "queue", "auth"]

    async def send(i):
        response = await client.post("/v1/events", json={"category": categories[i % 5], "text": f"event-{i}"})
        return i, response.status, await response.json()

    answers = await asyncio.gather(*(send(i) for i in range(100)))
    accepted = {f"event-{i}": categories[i % 5] for i, status, _ in answers if status == 202}
    per_category = {c: sum(v == c for v in accepted.values()) for c in categories}
    assert len(accepted) == 20
    assert per_category["deploy"] == 2 and max(per_category.values()) <= 6
    limits = {body["limit"] for _, status, body in answers if status == 429}
    assert limits == {"global", "category"}

    def delivered():
        return [m for m in slack.received() if re.search(r"event-\d+", m.text)]

    for _ in range(200):
        if len(delivered()) >= 20:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a duplicate, if any, would arrive now
    texts = [re.search(r"event-\d+", m.text).group() for m in delivered()]
    assert sorted(texts) == sorted(accepted)  # each admitted event exactly once
    assert all(
        m.channel == ("#db" if accepted[re.search(r"event-\d+", m.text).group()] == "db" else "#alerts")
        for m in delivered()
    )

    stats = await (await client.get("/v1/stats")).json()
    assert stats["accepted"] == 20 and stats["dropped"] == 80
    assert stats["dropped_by_limit"]["global"] + stats["dropped_by_limit"]["category"] == 80
    assert {c: v["accepted"] for c, v in stats["by_category"].items()} == per_category
    metrics = await (await client.get("/metrics")).text()
    for category, n in per_category.items():
        assert f'notifier_events_total{{category="{category}",outcome="accepted"}} {float(n)}' in metrics
    dropped = sum(float(v) for v in re.findall(r'notifier_events_total{[^}]*outcome="dropped_\w+"} (\S+)', metrics))
    assert dropped == 80
    assert 'notifier_deliveries_total{outcome="delivered"} 20.0' in metrics
