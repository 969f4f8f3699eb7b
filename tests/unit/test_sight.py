"""The events door's storm path: an event read on sight accepts only what ``parse_event`` accepts,
with the same facts, and a storm is decided from it while every wrong body still gets its answer."""

from __future__ import annotations

import asyncio
import json

import pytest
from builders import sent_to_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.config import load_config
from notifier.http.answers import ApiError
from notifier.http.app import create_app
from notifier.http.input import parse_event, unknown_category
from notifier.http.sight import Seen, read_on_sight
from notifier.http.state import GATEWAY
from notifier.policy import Policy
from notifier.settings import load_settings
from notifier.tokens import new_token

POLICY = Policy.from_settings(load_settings())
FACTS = Seen.__struct_fields__  # every attribute of the record: the facts and text and title

# What services send: storm.py's bodies, as Python's and compact encoders write them, and more.
STORM = {"category": "storm-3", "text": "disk full", "severity": "error", "fields": {"host": "h3", "team": "t3"}}
ALERT = {**STORM, "severity": "critical", "dedup_key": "disk-1234"}
RUNBOOK = {"text": "Runbook", "url": "https://runbooks.example.com/disk?host=3"}


def linked_body(n: int) -> dict[str, object]:
    """Event ``n`` of bench/storm.py's alerts-links storm (``bench/storm_links.py``)."""
    severity = "critical" if n // 20 % 10 == 0 else "warning"
    link = {"text": "Runbook", "url": f"https://runbooks.example.com/disk?host={n}"}
    return {
        "category": f"svc{n % 20}",
        "text": f"disk almost full on host {n}",
        "severity": severity,
        "dedup_key": f"disk-{n % 5000}",
        "links": [link],
    }


SENT = [
    STORM,
    ALERT,
    {**ALERT, "status": "resolved", "title": "Disk full"},
    linked_body(3),  # bench/storm.py's alerts-links storm: real tools' alerts carry a link
    linked_body(20),  # a critical one
    {**ALERT, "links": [RUNBOOK, {"text": "D" * 75, "url": "http://[::1]:3000/d?a=1&b=%20#x"}]},
    {**STORM, "links": [{"text": "🚀", "url": "https://9.example/" + "x" * 2980}] * 5},
    {"category": "deploys", "text": "api 1.4.2 is live"},
    {"category": "a.b:c_d-e", "text": "ünïcödé 🚀 \u2028", "fields": {"ключ": "значение"}},
]


def facts(record: object) -> dict[str, object]:
    """What ``record`` (an event or the record read on sight) holds, its links as (text, url) pairs."""
    held = {name: getattr(record, name) for name in FACTS}
    held["links"] = [(link.text, link.url) for link in held["links"]]
    return held


def slow_facts(raw: bytes) -> dict[str, object]:
    """The facts ``parse_event`` reads (it raises what it refuses)."""
    return facts(parse_event(raw, POLICY))


def agrees(raw: bytes) -> None:
    """If ``raw`` is read on sight, ``parse_event`` reads the same facts (or refuses only a category
    the policy does not take, which the door asks of the record too)."""
    seen = read_on_sight(raw)
    if seen is None:
        return
    try:
        slow = slow_facts(raw)
    except ApiError as exc:
        assert unknown_category(seen.category, POLICY), f"read on sight, refused by parse_event ({exc}): {raw[:300]!r}"
        return
    assert facts(seen) == slow, raw[:300]


@pytest.mark.parametrize("body", SENT)
@pytest.mark.parametrize("dumps", [json.dumps, lambda b: json.dumps(b, separators=(",", ":"), ensure_ascii=False)])
def test_what_services_send_is_read_on_sight_with_the_facts_parse_event_reads(body, dumps):
    raw = dumps(body).encode()
    seen = read_on_sight(raw)
    assert seen is not None
    assert facts(seen) == slow_facts(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"category": "a", "text": "x", "links": []}',  # a default given: the count cannot tell
        b'{"category": "a", "text": "x", "links": null}',
        b'{"category": "a", "text": "x", "links": {"text": "R", "url": "https://r.example"}}',
        b'{"category": "a", "text": "x", "links": ['
        + b",".join([b'{"text": "R", "url": "https://r.example"}'] * 6)
        + b"]}",
        b'{"category": "a", "text": "x", "links": [{"text": "", "url": "https://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "' + b"t" * 76 + b'", "url": "https://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example/' + b"x" * 2983 + b'"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R"}]}',
        b'{"category": "a", "text": "x", "links": [{"url": "https://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example", "style": "primary"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "text": "S", "url": "https://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example", "url": "ftp://r"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "ftp://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "javascript:alert(1)"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https:///path"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "HTTPS://r.example"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example/a b"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example\\n"}]}',  # Python's "$"
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": "https://r.example/\\u00e9"}]}',
        b'{"category": "a", "text": "x", "links": [{"text": "R", "url": 5}]}',
        b'{"category": "a", "text": "x", "links": [{"text": null, "url": "https://r.example"}]}',
        # Keys written twice beside a URL's colon, as compact encoders write them (no blank before a value).
        b'{"category":"a","text":"x","text":"y","links":[{"text":"R","url":"https://r.example/a"}]}',
        b'{"category":"a","text":"x","links":[{"text":"R","text":"S","url":"https://r.example/a"}]}',
        b'{"category":"a","text":"x","links":[{"text":"R","url":"https://r.example/a","url":"https://r.example/b"}]}',
        b'{"category":"a","text":"x","category":"b","links":[{"text":"R","url":"https://r.example/a:/b"}]}',
        b'{"category": "a", "text": "x", "title": null}',  # null is an absent field there, not here
        b'{"category": "a", "text": "x", "source": "someone"}',  # 422 there: the token names the source
        b'{"category": "a", "text": "x", "other": 1}',  # ignored there: a key the record does not name
        b'{"category": "a", "text": "x", "category": "b"}',  # a key written twice: 422 there
        b'{"category": "a", "text": "x", "c\\u0061tegory": "b"}',
        b'{"category": "a", "text": "x", "fields": {"k": "v", "k": "w"}}',
        b'{"category": "a", "text": "x", "severity": "info"}',  # a default given: the count cannot tell
        b'{"category": "a\\n", "text": "x"}',  # Python's "$" would take it
        b'{"category": "", "text": "x"}',
        b'{"category": "a b", "text": "x"}',
        b'{"category": "' + b"c" * 65 + b'", "text": "x"}',
        b'{"category": "a", "text": ""}',
        b'{"category": "a", "text": "' + b"x" * 3001 + b'"}',
        b'{"category": "a", "text": "' + "🚀".encode() * 3001 + b'"}',  # 3,001 characters, not bytes
        b'{"category": "a", "text": "x", "title": "' + b"t" * 151 + b'"}',
        b'{"category": "a", "text": "x", "fields": {' + b",".join(b'"k%d": "v"' % i for i in range(21)) + b"}}",
        b'{"category": "a", "text": "x", "fields": {"": "v"}}',
        b'{"category": "a", "text": "x", "fields": {"' + b"k" * 101 + b'": "v"}}',
        b'{"category": "a", "text": "x", "fields": {"k": "' + b"v" * 1001 + b'"}}',
        b'{"category": "a", "text": "x", "fields": {"k": 5}}',
        b'{"category": "a", "text": "x", "severity": "fatal"}',
        b'{"category": "a", "text": "x", "status": "open"}',
        b'{"category": "a", "text": "x", "dedup_key": ""}',
        b'{"category": "a", "text": "x", "dedup_key": "' + b"k" * 201 + b'"}',
        b'{"category": "a", "text": 5}',
        b'{"category": "a", "text": "\\ud800"}',  # a lone surrogate
        b'{"category": "a", "text": "\xff"}',  # not UTF-8
        b'\xef\xbb\xbf{"category": "a", "text": "x"}',  # a byte order mark
        b'{"category": "a", "text": "x"} trailing',
        b'{"category"\x0c: "a", "text": "x"}',  # a form feed is no JSON blank: a colon count could miss the key
        b'{"category": "a", "text": "x\x01"}',  # a raw control character in a string
        b'[{"category": "a", "text": "x"}]',
    ],
)
def test_anything_else_is_left_to_parse_event(raw):
    assert read_on_sight(raw) is None


# Valid events, then values put in their place: bounds, patterns, names the policy refuses, any JSON.
URLS = ["https://r.example", "http://[::1]/", "https://a", "https://r.example/\n", "ftp://r", "https://", " https://a"]
LINK = st.fixed_dictionaries(
    {"text": st.text(max_size=4) | st.just("t" * 76), "url": st.sampled_from(URLS) | st.text(max_size=12)},
    optional={"style": st.just("primary")},
)
VALID = st.fixed_dictionaries(
    {"category": st.sampled_from(["a", "storm-3", "a.b:c_d-e", "c" * 64]), "text": st.text(min_size=1, max_size=8)},
    optional={
        "title": st.text(max_size=8),
        "severity": st.sampled_from(["warning", "error", "critical"]),
        "fields": st.dictionaries(st.text(min_size=1, max_size=4), st.text(max_size=4), min_size=1, max_size=3),
        "dedup_key": st.text(min_size=1, max_size=8),
        "status": st.just("resolved"),
        "links": st.lists(LINK, max_size=6),
    },
)
STRINGS = ["", "a\n", "a b", "global", "é", "c" * 65, "x" * 3000, "x" * 3001, "🚀" * 3001, "k" * 201, "\x00"]
WORDS = ["info", "firing", "fatal", "open", "\u2028"]
OBJECTS = [{"": "v"}, {"k" * 101: "v"}, {"k": "v" * 1001}, {"k": 5}, {f"k{i}": "v" for i in range(21)}]
EDGES = st.sampled_from([*STRINGS, *WORDS, *OBJECTS, [{"text": "r", "url": "https://r.example"}]]) | st.lists(LINK)
ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=5,
)
KEYS = st.sampled_from([*FACTS, "links", "source", "other"])
CHANGE = st.tuples(st.booleans(), KEYS, EDGES | ANY)  # (written twice?, key, value)


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(VALID, st.lists(CHANGE, max_size=2), st.booleans())
def test_an_event_read_on_sight_is_one_parse_event_reads_alike(event, changes, ascii_only):
    twice = []
    for repeat, key, value in changes:
        if repeat:
            twice.append((key, value))  # a key written twice, as no dict can hold it
        else:
            event[key] = value
    raw = json.dumps(event, ensure_ascii=ascii_only)
    for key, value in twice:
        raw = raw[:-1] + ", " + json.dumps(key) + ": " + json.dumps(value) + "}"
    agrees(raw.encode())


@pytest.mark.parametrize("name", [*FACTS, "fields.k", "links.text", "links.url"])
@pytest.mark.parametrize(
    "value", [None, 5, 10**400, 1.5, True, "", "s", "critical", "k" * 201, [], ["s"], {}, {"k": "v"}]
)
def test_each_key_takes_only_what_parse_event_takes(name, value):
    body: dict = {**ALERT, "title": "t", "status": "firing"}
    if name.startswith("fields."):
        body["fields"] = {**body["fields"], name.removeprefix("fields."): value}
    elif name.startswith("links."):
        body["links"] = [RUNBOOK, {**RUNBOOK, name.removeprefix("links."): value}]
    else:
        body[name] = value
    agrees(json.dumps(body).encode())


async def test_a_storm_is_decided_from_what_was_read_on_sight(aiohttp_client, monkeypatch):
    client = await aiohttp_client(create_app(load_settings(category_limit="1/30m", digest_interval=0)))
    first = [await client.post("/v1/events", json={**ALERT, "dedup_key": key}) for key in ("k1", "k2")]
    assert [answer.status for answer in first] == [202, 429]  # the store says the category is full, k2 refused

    def not_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("an event this replica decides was read by parse_event")

    monkeypatch.setattr("notifier.http.events.parse_event", not_read)
    statuses = []
    linked = {"links": [RUNBOOK]}  # real tools' alerts carry a link: read on sight too
    for body in (
        STORM,
        {**ALERT, "dedup_key": "k2"},
        {**ALERT, "dedup_key": "k1"},
        {**ALERT, **linked, "dedup_key": "k2"},
    ):
        statuses.append((await client.post("/v1/events", json=body)).status)  # refused, refused, duplicate, refused
    assert statuses == [429, 429, 200, 429]
    monkeypatch.undo()
    stats = await (await client.get("/v1/stats")).json()
    assert (stats["accepted"], stats["dropped"]) == (1, 4)
    for wrong in ({**STORM, "category": "a b"}, {**STORM, "source": "me"}, {**STORM, "severity": "fatal"}):
        assert (await client.post("/v1/events", json=wrong)).status == 422
    twice = b'{"category": "storm-3", "text": "x", "text": "y"}'
    assert (await client.post("/v1/events", data=twice, headers={"Content-Type": "application/json"})).status == 422
    assert (await (await client.get("/v1/stats")).json())["dropped"] == 4  # counted nothing


async def test_a_full_level_never_answers_for_a_channel_or_a_category_the_event_may_not_have(aiohttp_client, tmp_path):
    bounded = new_token("bounded", ["send"], ["#alerts"])
    sender = new_token("sender", ["send"], [])
    config = tmp_path / "notifier.yaml"
    routes = '  - {match: {category: "payments"}, channel: "#payments"}\n'
    config.write_text("routes:\n" + routes + "tokens:\n" + bounded.line + "\n" + sender.line + "\n")
    settings = load_settings(
        config=str(config),
        slack_channel="#alerts",
        global_limit="1/30m",
        category_limit="10/1m",  # no category's level could outlast the global one: refused here, whatever its name
        categories="ops,payments",
        digest_interval=0,
    )
    client = await aiohttp_client(create_app(settings, load_config(config)))
    send, bound = ({"Authorization": f"Bearer {each.token}"} for each in (sender, bounded))
    answers = [await client.post("/v1/events", json={"category": "ops", "text": "x"}, headers=send) for _ in range(2)]
    assert [answer.status for answer in answers] == [202, 429]  # the global level is known full here
    full = await client.post("/v1/events", json={"category": "payments", "text": "x"}, headers=send)
    assert full.status == 429
    forbidden = await client.post("/v1/events", json={"category": "payments", "text": "x"}, headers=bound)
    assert forbidden.status == 403, await forbidden.text()
    unknown = await client.post("/v1/events", json={"category": "nope", "text": "x"}, headers=send)
    assert unknown.status == 422 and "unknown category 'nope'" in (await unknown.json())["details"][0]["message"]


async def test_when_room_is_no_longer_believed_the_event_that_asks_reaches_the_store(aiohttp_client):
    """With a reserve at the root, room there is believed a second beside a full category. After it,
    one event asks the store (and its answer renews the belief): it must not be asked of the
    replica a second time on its way and refused there, which would keep the belief forever."""
    app = create_app(load_settings(category_limit="1/30m", critical_reserve="10%", digest_interval=0))
    client = await aiohttp_client(app)
    asked = sent_to_store(app[GATEWAY].admission.limiter)
    assert [(await client.post("/v1/events", json=STORM)).status for _ in range(3)] == [202, 429, 429]
    assert len(asked) == 2  # the third: refused here
    await asyncio.sleep(1.05)  # the root's room is no longer believed
    assert [(await client.post("/v1/events", json=STORM)).status for _ in range(3)] == [429] * 3
    assert len(asked) == 3  # one asked the store; its answer renewed the belief
