"""Shared by the Slack action tests (test_actions*.py): the fleet on the Slack stand-in, clicks as Slack sends them."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest
from clicks import (
    API_TOKEN,
    USER,
    Replicas,
    chosen,
    control,
)
from helpers import Gateway, http, slack_env
from slack_standin import block_actions_payload, signed_action_request

SECRET = "8f14e45fceea167a5a36dedd4bea2543"


def env(redis_url: str, slack, secret: str | None = SECRET, choices: str | None = "1h") -> dict[str, str]:
    far = {"NOTIFIER_GLOBAL_LIMIT": "100000/1h", "NOTIFIER_CATEGORY_LIMIT": "100000/1h"}
    settings = slack_env(redis_url, slack, NOTIFIER_API_TOKENS=API_TOKEN, NOTIFIER_CHANNEL_RATE="20/1s", **far)
    if secret:
        settings["NOTIFIER_SLACK_SIGNING_SECRET"] = secret
    if choices:  # one choice: the mute control is one button (the default, three, is a menu)
        settings["NOTIFIER_MUTE_CHOICES"] = choices
    return settings


@pytest.fixture
def make_fleet(redis_url, slack, tmp_path):
    fleet = Replicas(str(tmp_path))

    def make(replicas: int = 3, secret: str | None = SECRET, choices: str | None = "1h") -> list[Gateway]:
        return fleet.start(env(redis_url, slack, secret, choices), replicas)

    yield make
    fleet.stop()


# ---------------------------------------------------------------- helpers


def click(
    gateway: Gateway, slack, ts: str, action_id: str, user: str = USER, choice: str | None = None, **change: object
):
    """Click ``action_id`` on the message ``ts`` as Slack would (``choice``: the option picked in a menu):
    (status, answer, seconds, answered at)."""
    message = slack.message_json(ts)
    element = control(message, action_id)
    value = element.get("value") if element["type"] == "button" else chosen(element, choice)
    payload = block_actions_payload(action_id, value, user, slack.channel_id("#alerts"), ts, message)
    payload |= change
    body, headers = signed_action_request(SECRET, payload)
    started = time.monotonic()
    status, answer, _ = http("POST", gateway.url + "/v1/slack/actions", body, headers)
    return status, answer, time.monotonic() - started, time.time()


def signed(payload: dict | None = None, raw: bytes | None = None, secret: str = SECRET):
    """A request correctly signed (HMAC-SHA256 of the raw bytes, as Slack documents) for any body."""
    body = raw if raw is not None else urlencode({"payload": json.dumps(payload)}).encode()
    when = str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + when.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": when,
        "X-Slack-Signature": "v0=" + digest,
    }
    return body, headers
