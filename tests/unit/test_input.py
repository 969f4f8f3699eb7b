"""Hostile and malformed bodies: the contract's 4xx, a message naming the field, no count changed.

The gateway runs in-process against the session's real redis-server.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from notifier.http import input as gateway_app
from notifier.http.app import create_app
from notifier.settings import load_settings

JSON = "application/json"
OK = {"category": "db", "text": "x"}


def body(**changes) -> bytes:
    return json.dumps({**OK, **changes}).encode()


# (case name, raw body, content type, status, words the error message or details must contain)
CASES = [
    ("not json", b"{not json", JSON, 400, ["JSON"]),
    ("empty body", b"", JSON, 400, ["JSON"]),
    ("truncated", b'{"category": "db", "text": "x"', JSON, 400, ["JSON"]),
    ("invalid utf-8", b"\xff\xfe{}", JSON, 400, ["UTF-8"]),
    ("invalid utf-8 in a string", b'{"category": "db", "text": "\xc3\x28"}', JSON, 400, ["UTF-8"]),
    ("NaN literal", b'{"category": "db", "text": "x", "extra": NaN}', JSON, 400, ["NaN"]),
    ("Infinity literal", b'{"category": "db", "text": "x", "n": -Infinity}', JSON, 400, ["Infinity"]),
    ("huge exponent", b'{"category": "db", "text": "x", "n": 1e999999}', JSON, 400, ["number"]),
    ("huge integer", b'{"category": "db", "text": "x", "n": ' + b"9" * 5000 + b"}", JSON, 400, ["JSON"]),
    (
        "nesting bomb",
        b'{"category": "db", "text": "x", "n": ' + b"[" * 30000 + b"]" * 30000 + b"}",
        JSON,
        400,
        ["nest"],
    ),
    ("duplicate key", b'{"category": "db", "text": "x", "text": "y"}', JSON, 422, ["text", "duplicate"]),
    ("duplicate key, no blanks", b'{"category":"db","text":"x","text":"y"}', JSON, 422, ["text", "duplicate"]),
    ("duplicate key, colons in text", b'{"category":"db","text":"a:b","text":"c"}', JSON, 422, ["text", "duplicate"]),
    ("duplicate key in fields", b'{"category":"db","text":"x","fields":{"a":"1","a":"2"}}', JSON, 422, ["duplicate"]),
    ("text/plain", body(), "text/plain", 415, ["Content-Type"]),
    ("no content type", body(), None, 415, ["Content-Type"]),
    ("form", b"category=db&text=x", "application/x-www-form-urlencoded", 415, ["Content-Type"]),
    ("array", b"[1, 2]", JSON, 422, ["body"]),
    ("string", b'"hello"', JSON, 422, ["body"]),
    ("null", b"null", JSON, 422, ["body"]),
    ("number", b"42", JSON, 422, ["body"]),
    ("missing text", json.dumps({"category": "db"}).encode(), JSON, 422, ["text"]),
    ("missing category", json.dumps({"text": "x"}).encode(), JSON, 422, ["category"]),
    ("empty text", body(text=""), JSON, 422, ["text"]),
    ("text too long", body(text="x" * 3001), JSON, 422, ["text"]),
    ("text a number", body(text=5), JSON, 422, ["text"]),
    ("text an object", body(text={"a": "b"}), JSON, 422, ["text"]),
    ("text null", body(text=None), JSON, 422, ["text"]),
    ("title too long", body(title="t" * 151), JSON, 422, ["title"]),
    ("title a list", body(title=["a"]), JSON, 422, ["title"]),
    ("category empty", body(category=""), JSON, 422, ["category"]),
    ("category too long", body(category="c" * 65), JSON, 422, ["category"]),
    ("category with space", body(category="no spaces"), JSON, 422, ["category"]),
    ("category with hash tag", body(category="{other}"), JSON, 422, ["category"]),
    ("category with newline", body(category="db\n"), JSON, 422, ["category"]),
    ("category with star", body(category="db*"), JSON, 422, ["category"]),
    ("category with slash", body(category="../db"), JSON, 422, ["category"]),
    ("category a number", body(category=7), JSON, 422, ["category"]),
    ("unknown severity", body(severity="panic"), JSON, 422, ["severity"]),
    ("severity wrong case", body(severity="ERROR"), JSON, 422, ["severity"]),
    ("fields a list", body(fields=["a"]), JSON, 422, ["fields"]),
    ("fields value a number", body(fields={"a": 1}), JSON, 422, ["fields"]),
    ("fields nested", body(fields={"a": {"b": "c"}}), JSON, 422, ["fields"]),
    ("too many fields", body(fields={str(i): "v" for i in range(21)}), JSON, 422, ["fields"]),
    ("field value too long", body(fields={"a": "v" * 1001}), JSON, 422, ["fields"]),
    ("field name empty", body(fields={"": "v"}), JSON, 422, ["fields"]),
    ("dedup_key too long", body(dedup_key="k" * 201), JSON, 422, ["dedup_key"]),
    ("dedup_key a number", body(dedup_key=1), JSON, 422, ["dedup_key"]),
    ("category global", body(category="global"), JSON, 422, ["category", "global level"]),
    ("links not a list", body(links={"text": "a", "url": "https://a.example"}), JSON, 422, ["links"]),
    ("six links", body(links=[{"text": "a", "url": "https://a.example"}] * 6), JSON, 422, ["links"]),
    ("link without url", body(links=[{"text": "a"}]), JSON, 422, ["links", "url"]),
    ("link text empty", body(links=[{"text": "", "url": "https://a.example"}]), JSON, 422, ["links", "text"]),
    ("link text too long", body(links=[{"text": "t" * 76, "url": "https://a.example"}]), JSON, 422, ["links", "text"]),
    ("link url javascript", body(links=[{"text": "a", "url": "javascript:alert(1)"}]), JSON, 422, ["links", "url"]),
    ("link url relative", body(links=[{"text": "a", "url": "/runbook"}]), JSON, 422, ["links", "url"]),
    ("link url no host", body(links=[{"text": "a", "url": "https:///x"}]), JSON, 422, ["links", "url"]),
    ("link url with space", body(links=[{"text": "a", "url": "https://a.example/a b"}]), JSON, 422, ["links", "url"]),
    (
        "link url too long",
        body(links=[{"text": "a", "url": "https://a.example/" + "x" * 2983}]),
        JSON,
        422,
        ["links", "url"],
    ),
    ("link unknown key", body(links=[{"text": "a", "url": "https://a.example", "x": 1}]), JSON, 422, ["links"]),
    (
        "duplicate key in a link",
        b'{"category":"db","text":"x","links":[{"text":"a","url":"https://a.example","url":"https://b.example"}]}',
        JSON,
        422,
        ["url", "duplicate"],
    ),
    ("over 64 KiB", b'{"category": "db", "text": "' + b"x" * 70_000 + b'"}', JSON, 413, ["64"]),
]


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(create_app(load_settings(digest_interval=0)))


async def stats(client) -> dict:
    return await (await client.get("/v1/stats")).json()


def mentions(answer: dict, words: list[str]) -> bool:
    text = json.dumps(answer)
    return all(word.lower() in text.lower() for word in words)


@pytest.mark.parametrize("name,raw,content_type,status,words", CASES, ids=[c[0] for c in CASES])
async def test_bad_body(client, name, raw, content_type, status, words):
    before = await stats(client)
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post("/v1/events", data=raw, headers=headers)
    answer = await response.json()
    assert response.status == status, answer
    assert response.content_type == JSON
    assert isinstance(answer.get("error"), str) and mentions(answer, words), answer
    if status == 422 and name not in ("array", "string", "null", "number", "duplicate key in fields"):
        named = {d["field"].split(".")[0] for d in answer["details"]}
        assert named & set(words), answer
    assert await stats(client) == before


async def test_bad_cases_change_no_count_together(client):
    """All cases in a row, then one good event: exactly one accepted."""
    for _, raw, content_type, _, _ in CASES:
        headers = {"Content-Type": content_type} if content_type else {}
        assert (await client.post("/v1/events", data=raw, headers=headers)).status < 500
    assert (await client.post("/v1/events", json=OK)).status == 202
    counts = await stats(client)
    assert (counts["accepted"], counts["dropped"], counts["duplicates"]) == (1, 0, 0)


async def test_chunked_body_over_64_kib_is_413(client):
    """No Content-Length: the body is refused once 64 KiB have arrived, not read whole."""

    async def chunks():
        yield b'{"category": "db", "text": "'
        for _ in range(1024):  # 1 MiB in all
            yield b"x" * 1024
        yield b'"}'

    response = await client.post("/v1/events", data=chunks(), headers={"Content-Type": JSON})
    assert response.status == 413 and "64" in (await response.json())["error"]
    assert (await stats(client))["accepted"] == 0


async def test_declared_huge_body_is_413_without_waiting_for_it(client):
    """A Content-Length of 1 GB: 413 once 64 KiB have arrived, while the rest is never sent."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(
        b"POST /v1/events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000000\r\n\r\n" + b"x" * 70_000
    )
    status_line = await asyncio.wait_for(reader.readline(), 30)
    writer.close()
    assert status_line.split()[1] == b"413"
    assert (await stats(client))["accepted"] == 0


async def test_chunked_small_body_is_fine(client):
    async def chunks():
        yield b'{"category": "db", '
        yield b'"text": "x"}'

    response = await client.post("/v1/events", data=chunks(), headers={"Content-Type": JSON})
    assert response.status == 202


async def test_charset_parameter_is_accepted(client):
    for content_type in ("application/json; charset=utf-8", "Application/JSON ;charset=UTF-8"):
        response = await client.post("/v1/events", data=body(), headers={"Content-Type": content_type})
        assert response.status == 202, content_type


async def test_other_json_like_types_are_415(client):
    for content_type in ("application/json-seq", "application/jsonx; a=b", "text/json", "json"):
        response = await client.post("/v1/events", data=body(), headers={"Content-Type": content_type})
        assert response.status == 415, content_type


async def test_alertmanager_bad_payloads(client):
    for raw, status in [
        (b"{x", 400),
        (b"[]", 422),
        (b'{"alerts": "no"}', 422),
        (b'{"alerts": [{"labels": {"a": 1}}]}', 422),
    ]:
        response = await client.post("/v1/alertmanager", data=raw, headers={"Content-Type": JSON})
        assert response.status == status and "error" in await response.json()
    assert (await stats(client))["accepted"] == 0


async def test_not_found_and_wrong_method_are_json(client):
    response = await client.get("/v1/nope")
    assert response.status == 404 and "error" in await response.json()
    response = await client.get("/v1/events")
    assert response.status == 405 and "error" in await response.json()
    assert "POST" in response.headers.get("Allow", "")
    response = await client.delete("/v1/stats")
    assert response.status == 405 and "error" in await response.json()


# Keys and values that make the fast and the strict parsing paths disagree if either is wrong:
# repeated keys, unknown keys, colons and quotes inside strings, wrong types, blanks around ":".
KEYS = st.sampled_from(["category", "text", "title", "severity", "dedup_key", "links", "extra", "a:b", 'q"'])
STRINGS = st.sampled_from(["db", "x", "a:b", '"q":', "error", "\\u00e9", "", "c" * 70])
VALUES = st.one_of(
    STRINGS.map(lambda s: f'"{s}"'),
    st.sampled_from(["1", "null", "[]", "1e999"]),
    st.dictionaries(STRINGS, STRINGS, max_size=3).map(
        lambda d: "{" + ",".join(f'"{k}":"{v}"' for k, v in d.items()) + "}"
    ),
)
LINK_PAIRS = st.sampled_from(
    ['"text":"a"', '"url":"https://a.example/x:y"', '"text":"b"', '"url":"ftp://a"', '"x":"1"']
)
VALUES = VALUES | st.lists(st.lists(LINK_PAIRS, max_size=3), max_size=6).map(
    lambda links: "[" + ",".join("{" + ",".join(pairs) + "}" for pairs in links) + "]"
)
BLANKS = st.sampled_from(["", " ", "\n  ", "\t", "\r\n"])


@st.composite
def event_texts(draw) -> bytes:
    """A JSON-like object text, keys possibly repeated, with ``fields`` sometimes holding pairs."""
    pairs = draw(st.lists(st.tuples(KEYS | st.just("fields"), VALUES), max_size=7))
    pairs = [("category", '"db"'), ("text", '"x"')] * draw(st.booleans()) + pairs
    blanks = [draw(BLANKS) for _ in pairs]  # per pair: a repeat may end in other blanks than the first
    return ("{" + ",".join(f'{b}"{k}"{b}:{b}{v}' for (k, v), b in zip(pairs, blanks, strict=True)) + "}").encode()


@given(event_texts())
@example(b'{"category":"db","text":"x","text"\t:"y"}')  # a repeat whose blank is not the first's
@example(b'{"category":"db","text":"x","links":[{"text":"a","url":"https://a.example/x:y"}]}')
def test_fast_parsing_accepts_only_what_strict_parsing_accepts_the_same(raw):
    """The storm's fast path (pydantic from bytes) never admits a body the strict path refuses."""
    fast = gateway_app._plain_event(raw)
    if fast is None:
        return
    # The reference is the stdlib parser that refuses repeated keys itself (decode_json's own
    # fast path shares the key count with the path under test).
    assert fast == gateway_app._validated_event(gateway_app._decode_strictly(raw))


async def test_an_alert_with_an_odd_starts_at_still_fits_a_dedup_key(client):
    """Whatever Alertmanager's payload holds, a readable alert is decided, never refused for its key."""
    alert = {"labels": {"alertname": "A"}, "fingerprint": "f" * 150, "startsAt": "x" * 500}
    response = await client.post("/v1/alertmanager", json={"alerts": [alert, {**alert, "startsAt": "y" * 500}]})
    answer = await response.json()
    assert response.status == 200, answer
    assert [r["status"] for r in answer["results"]] == ["accepted", "accepted"], "two keys, not one"
