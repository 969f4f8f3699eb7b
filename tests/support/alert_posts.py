"""Helpers of the alert tests (test_alerts*.py): settings, alerts sent, their posts, steps, open alerts, the store."""

from __future__ import annotations

import pytest
import redis
from helpers import Gateway, http, slack_env, wait_for
from slack_standin import SlackStandin

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
API_TOKEN = "api-5c2b0d77e1"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


# ---------------------------------------------------------------- helpers


def _env(redis_url: str, slack: SlackStandin, **extra: str) -> dict[str, str]:
    settings = {
        "NOTIFIER_CHANNEL_RATE": "20/1s",
        "NOTIFIER_SLACK_SIGNING_SECRET": SECRET,
        "NOTIFIER_API_TOKENS": API_TOKEN,
        **extra,
    }
    return slack_env(redis_url, slack, **settings)


def _alert(key: str, text: str, status: str = "firing", severity: str = "critical", category: str = "db") -> dict:
    return {"category": category, "text": text, "dedup_key": key, "status": status, "severity": severity}


def _post(gateway: Gateway, body: dict) -> tuple[int, dict]:
    status, answer, _ = gateway.post(body, headers=AUTH)
    return status, answer


def _the_post(slack: SlackStandin, needle: str):
    def found():
        posts = [m for m in slack.received() if m.thread_ts is None and needle in m.text]
        if slack.refusals:
            pytest.fail(f"Slack refused a message: {slack.refusals}")
        return posts[0] if len(posts) == 1 else None

    return wait_for(found, 20, what=f"the post of {needle!r}")


def _steps(slack: SlackStandin, ts: str) -> list:
    return [r for r in slack.replies(ts) if "Not acknowledged after" in r.text]


def _alerts(gateway: Gateway, cursor: str | None = None, token: bool = True) -> tuple[int, dict]:
    path = "/v1/alerts" + (f"?cursor={cursor}" if cursor else "")
    status, body, _ = http("GET", gateway.url + path, headers=AUTH if token else {})
    return status, body


def _store(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)
