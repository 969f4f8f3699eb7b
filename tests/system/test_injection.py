"""Event text cannot mention anyone or inject links, in the fallback text and in every block.

A gateway process posts through the real slack-sdk to the Slack stand-in; the test reads the
payloads exactly as Slack would receive them.
"""

from __future__ import annotations

import re

import pytest
from helpers import Gateway, wait_for

HOSTILE = [
    "<!channel> wake up",
    "<!here>",
    "<!everyone>",
    "<@U123ABC> look",
    "<#C024BE7LR|general>",
    "<!subteam^S012AB3CD|@oncall>",
    "<https://evil.example/login|https://bank.example>",
    "<mailto:a@b.example|mail>",
    "<!date^1392734382^{date}|x>",
    "already &lt;!channel&gt; escaped",
    "&#60;!channel&#62;",
    "<<!channel>>",
    "<\n!channel>",
    "@channel @here",
    "a > b < c & d",
]
# Whatever Slack would parse starts with "<"; escaped text has none left.
CONTROL = re.compile(r"<[!@#]|<[a-z]+:|<[^<>]*\|")


def strings(value) -> list[str]:
    """Every string inside a payload (texts of blocks, fields, elements)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def events() -> list[dict]:
    out = []
    for i, hostile in enumerate(HOSTILE):
        out.append(
            {
                "category": f"inj{i % 3}",
                "text": f"#{i} {hostile}",
                "title": hostile[:150],
                "severity": "critical",
                "fields": {hostile[:100]: hostile, "host": hostile},
            }
        )
    return out


@pytest.mark.parametrize("sink", ["api", "webhook"])
def test_no_mention_or_link_reaches_slack(redis_url, slack, sink):
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_CHANNEL_RATE": "1000/1s",
        "NOTIFIER_GLOBAL_LIMIT": "1000/1m",
        "NOTIFIER_CATEGORY_LIMIT": "1000/1m",
    }
    if sink == "api":
        env |= {
            "NOTIFIER_SLACK_BOT_TOKEN": "xoxb-test-token",
            "NOTIFIER_SLACK_API_URL": slack.api_url,
            "NOTIFIER_SLACK_CHANNEL": "#alerts",
        }
    else:
        env |= {"NOTIFIER_SLACK_WEBHOOK_URL": slack.webhook_url}
    gateway = Gateway(env).start()
    try:
        sent = events()
        for event in sent:
            assert gateway.post(event)[0] == 202
        wait_for(lambda: len(slack.received()) >= len(sent), 30, what="every event delivered")
    finally:
        gateway.stop()

    for message in slack.received():
        payload = message.raw
        texts = strings(payload.get("text")) + strings(payload.get("blocks"))
        assert payload.get("blocks"), "events are posted with blocks"
        for text in texts:
            assert "<" not in text and ">" not in text, text
            assert not CONTROL.search(text), text
        if sink == "api":
            assert str(payload.get("link_names", "false")).lower() in ("false", "0")
    # The words are still there, made inert.
    joined = " ".join(s for m in slack.received() for s in strings(m.raw))
    assert "&lt;!channel&gt; wake up" in joined and "&lt;@U123ABC&gt;" in joined
    assert "&amp;lt;!channel&amp;gt;" in joined  # pre-escaped input stays literal
