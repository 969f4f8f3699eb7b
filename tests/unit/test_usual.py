"""The webhook door's storm path: the usual message read from its bytes accepts only what the
reader of every shape accepts, names the same channel, and is what real tools send."""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest
from builders import sent_to_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.http.app import create_app
from notifier.http.slack_compat import usual
from notifier.http.slack_compat.payload import SlackError, read_post, webhook_body
from notifier.http.slack_compat.usual import read_usual
from notifier.http.state import GATEWAY
from notifier.settings import load_settings

JSON, FORM = "application/json", "application/x-www-form-urlencoded"

# Alertmanager 0.25's slack_configs payload as Go's encoder writes it (<, > and & escaped).
ALERTMANAGER = (
    b'{"channel":"#alerts","username":"Alertmanager","link_names":true,"attachments":[{"title":'
    b'"[FIRING:2] DiskFull","title_link":"http://am:9093/#/alerts?receiver=slack","text":"'
    b'*Alert:* disk \\u003e 95%\\n \\u2022 host-1","fallback":"[FIRING:2] DiskFull | http://am:9093",'
    b'"callback_id":"","fields":[{"title":"team","value":"storage","short":true}],"actions":[{"type":'
    b'"button","text":"Runbook","url":"https://runbooks.example/disk","confirm":{"text":"Sure?",'
    b'"title":"Open","ok_text":"Yes","dismiss_text":"No"}}],"footer":"","color":"danger",'
    b'"mrkdwn_in":["fallback","pretext","text"]}]}\n'
)
GRAFANA = {  # Grafana's Slack contact point on a webhook URL
    "channel": "#grafana",
    "username": "Grafana",
    "icon_url": "https://grafana.com/static/assets/img/fav32.png",
    "attachments": [
        {
            "color": "#D63232",
            "title": "[FIRING:1] HighLatency",
            "title_link": "https://grafana.example/alerting/list",
            "text": "**Firing**\nValue: 2.5s",
            "fallback": "[FIRING:1] HighLatency",
            "footer": "Grafana v11.3.0",
            "footer_icon": "https://grafana.com/static/assets/img/fav32.png",
            "ts": 1764115200,
            "mrkdwn_in": ["text"],
        }
    ],
}


def slow_channel(raw: bytes, content_type: str = JSON) -> str | None:
    """The channel ``payload.py``, the reader of every shape, reads (it raises what Slack refuses)."""
    return read_post(webhook_body(raw, content_type), "invalid_payload", "invalid_blocks", False).channel


@pytest.mark.parametrize(
    "raw",
    [ALERTMANAGER, orjson.dumps(GRAFANA), json.dumps(GRAFANA).encode(), b'{"text": "deploy of api finished"}'],
)
def test_what_real_tools_send_is_read_on_sight(raw):
    read = read_usual(raw, JSON)
    assert read is not None
    assert (read.channel or None) == slow_channel(raw)


@pytest.mark.parametrize(
    "raw, content_type",
    [
        (b"payload=%7B%22text%22%3A%22x%22%7D", FORM),  # a form
        (b'{"text": "x", "blocks": [{"type": "divider"}]}', JSON),  # blocks: slack-sdk's models check them
        (b'{"attachments": [{"text": "x", "blocks": []}]}', JSON),
        (b'{"text": "x", "thread_ts": "1.2"}', JSON),  # a reply waits for its parent
        (b'{"text": null, "attachments": [{}]}', JSON),  # null is an absent field there, not here
        (b'{"text": "x", "link_names": "true"}', JSON),  # a boolean as a string
        (b'{"text": "x", "unknown": [[[[[[1]]]]]]}', JSON),  # a key the records do not name
        (b'{"attachments": [{"text": "x", "actions": [{"type": "button", "deep": [[[1]]]}]}]}', JSON),
        (b'{"text": "x", "channel": "#has space"}', JSON),  # channel_not_found
        (b'{"text": "' + b"x" * 40_001 + b'"}', JSON),  # msg_too_long
        (b'{"text": "", "attachments": []}', JSON),  # no_text
        (b'{"attachments": [' + b",".join([b"{}"] * 101) + b"]}", JSON),
        (b'{"text": "\xff"}', JSON),  # not UTF-8
        (b'{"text": "x"} trailing', JSON),
        (b'{"attachments": [{"title": 5}]}', JSON),
        (b'{"text": "x", "attachments": [{"ts": 2' + b"0" * 308 + b"}]}", JSON),  # past a double: not JSON to orjson
    ],
)
def test_anything_else_is_left_to_the_reader_of_every_shape(raw, content_type):
    assert read_usual(raw, content_type) is None


# Strings of the kinds the readers treat apart: empty, broadcast, channel names Slack has and has not.
TEXT = st.sampled_from(["", "x", "true", "#ops", "#has space", "C0123", "<!here>", "a" * 81]) | st.text(max_size=8)
NUMBERS = st.integers(-(2**70), 2**70) | st.integers(-(10**400), 10**400) | st.floats(allow_nan=False)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
ANY = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)


def record(kind: type, **values: st.SearchStrategy) -> st.SearchStrategy:
    """Dicts of some of a record's keys, each of its type (strings unless said)."""
    return st.fixed_dictionaries({}, optional={name: values.get(name, TEXT) for name in kind.__struct_fields__})


FIELD = record(usual.Field, short=st.booleans())
ACTION = record(usual.Action, confirm=st.none() | record(usual.Confirm))
LISTS = {"fields": st.lists(FIELD, max_size=3), "actions": st.lists(ACTION, max_size=2), "mrkdwn_in": st.lists(TEXT)}
ATTACHMENT = record(usual.Attachment, ts=st.integers(0, 2**40) | NUMBERS | TEXT, **LISTS)
FLAGS = {name: st.booleans() for name in ("link_names", "mrkdwn", "unfurl_links", "unfurl_media")}
MESSAGE = record(usual.Usual, attachments=st.lists(ATTACHMENT, max_size=3), **FLAGS)
OTHER_KEYS = st.sampled_from(["blocks", "thread_ts", "metadata", "ts", "other", "text", "channel", "title", "short"])


def mutate(data: st.DataObject, value: object) -> None:
    """Put a value of any type at a place of ``value`` drawn by ``data``: a key it has, or another."""
    while True:
        places = list(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
        inner = [p for p in places if isinstance(value[p], (dict, list)) and value[p]]  # type: ignore[index]
        if not inner or not data.draw(st.booleans()):
            break
        value = value[data.draw(st.sampled_from(inner))]  # type: ignore[index]
    if isinstance(value, dict):
        value[data.draw(OTHER_KEYS | st.sampled_from(places or ["text"]))] = data.draw(ANY)
    elif isinstance(value, list):
        value.append(data.draw(ANY))


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(MESSAGE, st.integers(0, 2), st.booleans(), st.data())
def test_a_message_read_on_sight_is_one_the_reader_of_every_shape_takes_to_the_same_channel(
    message, mutations, ascii_only, data
):
    for _ in range(mutations):
        mutate(data, message)
    raw = json.dumps(message, ensure_ascii=ascii_only).encode()
    read = read_usual(raw, JSON)
    if read is None:
        return
    try:
        channel = slow_channel(raw)
    except SlackError as exc:  # pragma: no cover - what the test is for
        pytest.fail(f"read on sight, refused by the reader of every shape ({exc.code}): {raw[:300]!r}")
    assert (read.channel or None) == channel


def places() -> list[tuple[str, str]]:
    """Every key of every record, as (record, key)."""
    kinds = {"message": usual.Usual, "attachment": usual.Attachment, "field": usual.Field}
    kinds |= {"action": usual.Action, "confirm": usual.Confirm}
    return [(kind, name) for kind, record in kinds.items() for name in record.__struct_fields__]


@pytest.mark.parametrize("kind, name", places())
@pytest.mark.parametrize(
    "value", [None, 5, -(2**63) - 1, 10**400, 1.5, True, "", "s", [], ["s"], {}, {"type": "x"}, [{"title": 5}]]
)
def test_each_key_of_each_record_takes_only_what_the_reader_of_every_shape_takes(kind, name, value):
    confirm: dict = {"text": "c"}
    action: dict = {"type": "button", "confirm": confirm}
    field: dict = {"title": "t"}
    attachment: dict = {"fields": [field], "actions": [action]}
    message: dict = {"text": "x", "attachments": [attachment]}
    records = {"message": message, "attachment": attachment, "field": field, "action": action, "confirm": confirm}
    records[kind][name] = value
    raw = json.dumps(message).encode()
    if read_usual(raw, JSON) is not None:
        slow_channel(raw)  # raises what Slack would refuse


async def test_a_storm_of_usual_messages_is_refused_on_sight_and_a_wrong_one_still_counts_nothing(
    aiohttp_client, monkeypatch
):
    client = await aiohttp_client(create_app(load_settings(category_limit="1/30m", digest_interval=0)))
    door = "/services/T0/B0/secret"
    outcomes = []
    for _ in range(2):  # admitted; then refused by the store, which tells the replica the level is full
        answer = await client.post(door, data=ALERTMANAGER, headers={"Content-Type": JSON})
        outcomes.append((answer.status, answer.headers["X-Notifier-Outcome"]))
    assert outcomes == [(200, "accepted"), (200, "dropped")]

    def not_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused usual message was read by payload.py")

    monkeypatch.setattr("notifier.http.slack_compat.doors.read_post", not_read)
    for _ in range(3):
        again = await client.post(door, data=ALERTMANAGER, headers={"Content-Type": JSON})
        assert (again.status, await again.text(), again.headers["X-Notifier-Outcome"]) == (200, "ok", "dropped")
    monkeypatch.undo()
    before = (await (await client.get("/v1/stats")).json())["dropped"]
    wrong = await client.post(door, data=b'{"attachments": [{"title": 5}]}', headers={"Content-Type": JSON})
    assert (wrong.status, await wrong.text()) == (400, "invalid_blocks")
    assert (await (await client.get("/v1/stats")).json())["dropped"] == before == 4


async def test_when_room_is_no_longer_believed_the_message_that_asks_reaches_the_store(aiohttp_client):
    """As at ``POST /v1/events``: after the second in which room at the root is believed, one message
    asks the store; read again by ``payload.py``, it is not asked of the replica a second time."""
    app = create_app(load_settings(category_limit="1/30m", critical_reserve="10%", digest_interval=0))
    client = await aiohttp_client(app)
    asked = sent_to_store(app[GATEWAY].admission.limiter)
    door, headers = "/services/T0/B0/secret", {"Content-Type": JSON}
    outcomes = [(await client.post(door, data=ALERTMANAGER, headers=headers)).headers["X-Notifier-Outcome"]]
    outcomes += [(await client.post(door, data=ALERTMANAGER, headers=headers)).headers["X-Notifier-Outcome"]]
    assert (outcomes, len(asked)) == (["accepted", "dropped"], 2)
    await asyncio.sleep(1.05)  # the root's room is no longer believed
    for _ in range(3):
        assert (await client.post(door, data=ALERTMANAGER, headers=headers)).headers["X-Notifier-Outcome"] == "dropped"
    assert len(asked) == 3  # one asked the store; its answer renewed the belief
