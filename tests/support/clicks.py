"""Helpers of the tests that act from Slack (over HTTP or Socket Mode): events and their messages, the
controls on them, and how every replica answers a category."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Gateway, http, wait_for
from slack_payloads import block_actions_payload, signed_action_request

API_TOKEN = "api-5c2b0d77e1"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
USER, OTHER_USER = "U0ALICE123", "U0BOB45678"
BOUND = 1.0  # the contract's figure for an override to be in force everywhere
CLICK_ANSWER = 3.0  # Slack's: a click is answered within 3 s


class Replicas:
    """Gateway processes a test starts (several at once) and stops at its end."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir, self.started = log_dir, []

    def start(self, env: dict[str, str], replicas: int) -> list[Gateway]:
        gateways = [Gateway(env, log_dir=self.log_dir) for _ in range(replicas)]
        with ThreadPoolExecutor(replicas) as pool:
            list(pool.map(lambda g: g.start(), gateways))
        self.started.extend(gateways)
        return gateways

    def stop(self) -> None:
        with ThreadPoolExecutor(max(1, len(self.started))) as pool:
            list(pool.map(lambda g: g.stop(), self.started))


def post_event(gateway: Gateway, slack, category: str, text: str, **extra: object):
    """Send an event and wait for its Slack message (found by the text's first word); the stand-in's record."""
    status, answer, _ = gateway.post({"category": category, "text": text, **extra}, headers=AUTH)
    assert status == 202, answer
    word = text.split()[0]
    return wait_for(
        lambda: (
            next((m for m in slack.received() if word in m.text and m.thread_ts is None), None)
            or (slack.refusals and pytest.fail(f"Slack refused a message: {slack.refusals}"))
        ),
        20,
        what=f"the message of {category!r} in Slack",
    )


def buttons(message: dict) -> list[dict]:
    """Every button of a message (actions blocks and section accessories)."""
    found = []
    for block in message.get("blocks") or []:
        elements = block.get("elements") or [] if block.get("type") == "actions" else [block.get("accessory")]
        found += [e for e in elements if isinstance(e, dict) and e.get("type") == "button"]
    return found


def the_button(message: dict, action_id: str) -> dict:
    found = [b for b in buttons(message) if b.get("action_id") == action_id]
    assert len(found) == 1, (action_id, message.get("blocks"))
    return found[0]


def click(gateway: Gateway, slack, ts: str, action_id: str, user: str, secret: str) -> int:
    """A click by ``user`` on the button ``action_id`` of the message ``ts`` in #alerts, signed with
    ``secret`` as Slack sends it; the gateway's status."""
    message = slack.message_json(ts)
    value = the_button(message, action_id)["value"]
    payload = block_actions_payload(action_id, value, user, slack.channel_id("#alerts"), ts, message)
    body, headers = signed_action_request(secret, payload)
    return http("POST", gateway.url + "/v1/slack/actions", body, headers)[0]


def control(message: dict, action_id: str) -> dict:
    """The one element ``action_id`` of a message's actions blocks: a button or a menu."""
    found = [
        e
        for b in message.get("blocks") or []
        if b.get("type") == "actions"
        for e in b["elements"]
        if e.get("action_id") == action_id
    ]
    assert len(found) == 1, (action_id, message.get("blocks"))
    return found[0]


def chosen(menu: dict, choice: str | None) -> str | None:
    """The value of the option of ``menu`` offering ``choice`` (a duration, sealed: ``<duration>~<seal>``)."""
    return next((o["value"] for o in menu["options"] if o["value"].partition("~")[0] == choice), choice)


def send(gateway: Gateway, category: str):
    status, body, _ = gateway.post({"category": category, "text": "probe"}, headers=AUTH)
    return status, body


def is_muted(category: str, rule: str = "0/1h"):
    return lambda s, b: s == 429 and b.get("limit") == "category" and b.get("rule") == rule


def is_admitted(s: int, b: dict) -> bool:
    return s == 202 and b.get("status") == "accepted"


def until_every_replica(gateways: list[Gateway], category: str, wanted, since: float, timeout: float = 10.0):
    """Seconds from ``since`` until each replica answered ``wanted`` (and kept doing so)."""

    def poll(gateway: Gateway) -> float:
        deadline = time.monotonic() + timeout
        while True:
            status, body = send(gateway, category)
            if wanted(status, body):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{gateway.url} still answers {status} {body} for {category}")
        seen = time.time() - since
        for _ in range(3):
            again = send(gateway, category)
            assert wanted(*again), (gateway.url, again)
        return seen

    with ThreadPoolExecutor(len(gateways)) as pool:
        return list(pool.map(poll, gateways))


def overrides(gateway: Gateway) -> dict:
    status, body, _ = gateway.get("/v1/limits")
    assert status == 200, body
    return body["overrides"]


def shown(slack, ts: str) -> str:
    """The message as the stand-in has it: its text and its blocks (one a line), for the report."""
    message = slack.message_json(ts)
    blocks = "\n".join(f"  {json.dumps(b)}" for b in message["blocks"])
    return f"text: {message['text']!r}\nblocks:\n{blocks}"


def edited_to(slack, ts: str, needle: str):
    def check():
        message = slack.message(ts)
        return message is not None and message.edits and needle in message.text and message

    return check


def context_texts(message: dict) -> list[str]:
    return [
        e.get("text", "")
        for b in message.get("blocks") or []
        if b.get("type") == "context"
        for e in b.get("elements") or []
    ]
