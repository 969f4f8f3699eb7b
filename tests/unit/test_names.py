"""Slack names (slack/names.py, GET /v1/names): asked of Slack once and kept for the fleet, ids checked,
Slack's rate limits spared from any reader, and nothing without a bot token."""

from __future__ import annotations

import asyncio
from typing import Any

import fakeredis
import pytest
from doors_app import sha
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from notifier.slack.names import ASKS_PER_MINUTE, KEEP_MS, UNKNOWN_KEEP_MS, Names
from notifier.store.client import Store
from notifier.store.keys import Keys

KEYS = Keys("n")


def refused(error: str, status: int = 200) -> SlackApiError:
    """Slack's refusal as slack-sdk raises it."""
    data = {"ok": False, "error": error}
    answer = SlackResponse(
        client=None, http_verb="GET", api_url="", req_args={}, data=data, headers={}, status_code=status
    )
    return SlackApiError(error, answer)


class Directory:
    """Slack's users.info and conversations.info, answering from dicts and counting the asks."""

    def __init__(self, users: dict[str, Any], channels: dict[str, str], delay: float = 0.0) -> None:
        self.users, self.channels, self.delay = users, channels, delay
        self.asked: list[str] = []
        self.error = ""  # Slack's answer to a user it does not name: user_not_found, or this

    async def users_info(self, *, user: str) -> Any:
        self.asked.append(user)
        await asyncio.sleep(self.delay)
        if user not in self.users:
            raise refused(self.error or "user_not_found", 429 if self.error == "ratelimited" else 200)
        return {"ok": True, "user": {"id": user, **self.users[user]}}

    async def conversations_info(self, *, channel: str) -> Any:
        self.asked.append(channel)
        if channel not in self.channels:
            raise refused("channel_not_found")
        return {"ok": True, "channel": {"id": channel, "name": self.channels[channel]}}


DANA = {"name": "dana.k", "real_name": "Dana Kim", "profile": {"display_name": "dana"}}


@pytest.fixture
def redis():
    return fakeredis.FakeAsyncRedis()


def names(redis, *directories: Directory | None) -> Names:
    return Names(lambda: [d for d in directories if d is not None], Store(redis, embedded=True), KEYS)


async def test_names_are_asked_once_and_kept_for_the_fleet(redis):
    slack = Directory({"U0DANA1": DANA, "U0LEE22": {"name": "lee", "profile": {"display_name": ""}}}, {"C0OPS1": "ops"})
    first = await names(redis, slack).of(["U0DANA1", "C0OPS1", "U0LEE22", "U0GONE9"])
    assert first == {"U0DANA1": "dana", "C0OPS1": "#ops", "U0LEE22": "lee", "U0GONE9": None}
    other_replica = names(redis, slack)
    again = await other_replica.of(["U0GONE9", "U0DANA1", "C0OPS1"])
    assert again == {"U0GONE9": None, "U0DANA1": "dana", "C0OPS1": "#ops"}
    assert sorted(slack.asked) == ["C0OPS1", "U0DANA1", "U0GONE9", "U0LEE22"]  # once each, unknown too
    assert 0 < await redis.pttl(KEYS.name("U0DANA1")) <= KEEP_MS
    assert 0 < await redis.pttl(KEYS.name("U0GONE9")) <= UNKNOWN_KEEP_MS


async def test_without_a_bot_token_ids_stay_alone(redis):
    assert await names(redis, None).of(["U0DANA1", "C0OPS1"]) == {"U0DANA1": None, "C0OPS1": None}


async def test_the_fleet_asks_slack_a_bounded_number_of_names_a_minute(redis):
    slack = Directory({}, {})
    hostile = [f"U{n:08d}" for n in range(100)]
    await names(redis, slack).of(hostile)
    await names(redis, slack).of([f"W{n:08d}" for n in range(100)])
    assert len(slack.asked) == ASKS_PER_MINUTE


async def test_a_slow_slack_does_not_hold_the_request_and_is_asked_again(redis, monkeypatch):
    monkeypatch.setattr("notifier.slack.names.WAIT", 0.1)
    slow = Directory({"U0DANA1": DANA}, {}, delay=5)
    assert await names(redis, slow).of(["U0DANA1"]) == {"U0DANA1": None}
    slow.delay = 0
    assert await names(redis, slow).of(["U0DANA1"]) == {"U0DANA1": "dana"}


async def test_a_busy_slack_is_asked_again_not_kept_as_unknown(redis):
    slack = Directory({}, {})
    slack.error = "ratelimited"
    assert await names(redis, slack).of(["U0DANA1"]) == {"U0DANA1": None}
    assert await redis.get(KEYS.name("U0DANA1")) is None
    slack.error, slack.users["U0DANA1"] = "", DANA
    assert await names(redis, slack).of(["U0DANA1"]) == {"U0DANA1": "dana"}
    assert slack.asked == ["U0DANA1", "U0DANA1"]


async def test_ids_of_another_shape_are_never_looked_up(redis):
    slack = Directory({}, {})
    assert await names(redis, slack).of(["u0lower", "X0NOPE1", "U", "U0DANA1\n", "*"]) == {}
    assert slack.asked == []


# --- GET /v1/names ---

READER, SENDER = "READERTOKEN-n1", "SENDERTOKEN-n1"


@pytest.fixture
async def gateway(make_doors):
    tokens = {
        "reader": {"sha256": sha(READER), "scopes": ["read"]},
        "sender": {"sha256": sha(SENDER), "scopes": ["send"]},
    }
    client, _ = await make_doors(tokens)
    return client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_route_needs_scope_read_and_answers_every_id(gateway):
    assert (await gateway.get("/v1/names?ids=U0DANA1")).status == 401
    assert (await gateway.get("/v1/names?ids=U0DANA1", headers=auth(SENDER))).status == 403
    answer = await gateway.get("/v1/names?ids=U0DANA1,C0OPS1", headers=auth(READER))
    assert answer.status == 200
    assert set((await answer.json())["names"]) == {"U0DANA1", "C0OPS1"}


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?ids=",
        "?ids=U0DANA1&ids=C0OPS1",
        "?ids=U0DANA1,",
        "?ids=u0dana1",
        "?ids=U0DANA1,<script>",
        "?ids=" + ",".join(f"U{n:08d}" for n in range(101)),
        "?ids=U" + "A" * 30,
    ],
)
async def test_bad_ids_are_refused(gateway, query):
    answer = await gateway.get("/v1/names" + query, headers=auth(READER))
    assert answer.status == 422, await answer.text()
    body = await answer.json()
    assert [d["field"] for d in body["details"]] == ["ids"]


async def test_each_workspace_names_its_own_ids_and_unknown_means_unknown_to_all(redis):
    acme = Directory({"U0DANA1": DANA}, {"C0OPS1": "ops"})
    contoso = Directory({"U0LEE22": {"name": "lee"}}, {"C0SALES": "sales"})
    found = await names(redis, acme, contoso).of(["U0DANA1", "U0LEE22", "C0SALES", "U0GONE9"])
    assert found == {"U0DANA1": "dana", "U0LEE22": "lee", "C0SALES": "#sales", "U0GONE9": None}
    assert sorted(acme.asked) == ["C0SALES", "U0DANA1", "U0GONE9", "U0LEE22"]  # the first workspace: every id
    assert sorted(contoso.asked) == ["C0SALES", "U0GONE9", "U0LEE22"]  # the next: what the first did not name
    assert 0 < await redis.pttl(KEYS.name("U0GONE9")) <= UNKNOWN_KEEP_MS  # refused by both: kept unknown


async def test_an_id_one_workspace_could_not_answer_is_not_kept_unknown(redis):
    busy, other = Directory({}, {}), Directory({}, {})
    busy.error = "ratelimited"
    assert await names(redis, busy, other).of(["U0LEE22"]) == {"U0LEE22": None}
    assert await redis.exists(KEYS.name("U0LEE22")) == 0  # asked again later: the busy one may name it
