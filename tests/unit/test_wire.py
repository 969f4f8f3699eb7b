"""Answers written in one piece (``notifier.http.wire``): the bytes aiohttp writes, every way asked.

Each test serves the same answer twice from one application, once as a ``wire.Answer`` and once as
aiohttp's own ``web.Response``, and compares what a raw socket reads (the ``Date`` line aside when
the second turned between them).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
import zlib
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.test_utils import TestServer

from notifier.http import wire
from notifier.http.serving import make_runner
from notifier.http.wire import Answer, head

JSON = {"Content-Type": "application/json; charset=utf-8"}
KINDS = {
    "accepted": (202, JSON, b'{"status":"accepted","id":"abc"}'),
    "refused": (429, {**JSON, "Retry-After": "1800"}, b'{"status":"dropped","limit":"global"}'),
    "webhook": (200, {"Content-Type": "text/plain; charset=utf-8", "X-Notifier-Outcome": "dropped"}, b"ok"),
    "empty": (200, JSON, b""),
}
REQUESTS = {
    "1.1": "{method} /{who}/{kind} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}",
    "1.1 close": "{method} /{who}/{kind} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
    "1.0": "{method} /{who}/{kind} HTTP/1.0\r\nContent-Length: 2\r\n\r\n{{}}",
    "1.0 keep-alive": "{method} /{who}/{kind} HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{{}}",
}
HEADS = {name: head(status, headers) for name, (status, headers, _) in KINDS.items()}


def app_of(change: str = "") -> web.Application:
    """``/ours/{kind}`` answers with ``wire.Answer``, ``/theirs/{kind}`` with ``web.Response``; ``change``
    asks both for a cookie or compression."""

    async def ours(request: web.Request) -> web.StreamResponse:
        return changed(Answer(HEADS[request.match_info["kind"]], KINDS[request.match_info["kind"]][2]))

    async def theirs(request: web.Request) -> web.StreamResponse:
        status, headers, body = KINDS[request.match_info["kind"]]
        return changed(web.Response(status=status, headers=headers, body=body))

    def changed(response: web.Response) -> web.Response:
        if change == "cookie":
            response.set_cookie("seen", "1")
        elif change == "compression":
            response.enable_compression(force=web.ContentCoding.deflate)
        return response

    app = web.Application()
    for who, handler in (("ours", ours), ("theirs", theirs)):
        app.router.add_post(f"/{who}/{{kind}}", handler)
        app.router.add_get(f"/{who}/{{kind}}", handler)  # and HEAD
    return app


async def exchange(port: int, raw: str, until_closed: bool = True) -> bytes:
    """What the server answers ``raw``: everything until it closes, else the first answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw.encode())
    if until_closed:
        data = await asyncio.wait_for(reader.read(), 5)
    else:
        data = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = re.search(rb"Content-Length: (\d+)", data)
        data += await reader.readexactly(int(length.group(1)) if length else 0)
    writer.close()
    return data


def undated(answer: bytes) -> bytes:
    return re.sub(rb"Date: [^\r]+\r\n", b"Date: -\r\n", answer)


async def both(
    server: TestServer | SimpleNamespace, template: str, kind: str, method: str = "POST"
) -> tuple[bytes, bytes]:
    """The answers of ``/ours/kind`` and ``/theirs/kind`` to one kind of request."""
    closes = "close" in template or template.endswith("HTTP/1.0\r\nContent-Length: 2\r\n\r\n{{}}")
    answers = []
    for who in ("ours", "theirs"):
        raw = template.format(method=method, who=who, kind=kind)
        answers.append(undated(await exchange(server.port, raw, until_closed=closes)))
    return answers[0], answers[1]


@pytest.mark.parametrize("request_kind", list(REQUESTS))
@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_answer_is_the_bytes_aiohttp_writes(kind, request_kind):
    async with TestServer(app_of()) as server:
        ours, theirs = await both(server, REQUESTS[request_kind], kind)
    assert ours == theirs and ours.startswith(b"HTTP/1.")
    assert b"Date: -\r\nServer: " in ours  # both dated, and named


@pytest.mark.parametrize("change", ["cookie", "compression"])
async def test_a_cookie_or_compression_is_written_as_aiohttp_writes_it(change):
    async with TestServer(app_of(change)) as server:
        ours, theirs = await both(server, REQUESTS["1.1 close"], "refused")
    assert ours == theirs
    if change == "cookie":
        assert b"Set-Cookie: seen=1" in ours
    else:
        assert zlib.decompress(ours.split(b"\r\n\r\n", 1)[1]) == KINDS["refused"][2]


async def test_a_head_request_gets_no_body_as_from_aiohttp():
    async with TestServer(app_of()) as server:
        ours, theirs = await both(
            server, REQUESTS["1.1 close"].replace("Content-Length: 2\r\n\r\n{{}}", "\r\n"), "refused", "HEAD"
        )
    assert ours == theirs and ours.endswith(b"\r\n\r\n")


async def test_on_response_prepare_runs_for_an_answer():
    app = app_of()

    async def stamp(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["X-Stamped"] = "yes"

    app.on_response_prepare.append(stamp)
    async with TestServer(app) as server:
        ours, theirs = await both(server, REQUESTS["1.1 close"], "accepted")
    assert ours == theirs and b"X-Stamped: yes" in ours


async def test_pipelined_requests_are_answered_in_order_on_one_connection():
    async with TestServer(app_of()) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"".join(REQUESTS["1.1"].format(method="POST", who="ours", kind=k).encode() for k in KINDS))
        writer.write(REQUESTS["1.1 close"].format(method="POST", who="ours", kind="accepted").encode())
        data = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    statuses = re.findall(rb"HTTP/1.1 (\d+)", data)
    assert statuses == [b"202", b"429", b"200", b"200", b"202"]
    assert data.endswith(KINDS["accepted"][2])


async def test_a_client_gone_before_its_answer_leaves_the_server_serving():
    started, answered = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        started.set()
        await asyncio.sleep(0.2)  # the client closes meanwhile
        try:
            return Answer(HEADS["accepted"], KINDS["accepted"][2])
        finally:
            answered.set()

    app = app_of()
    app.router.add_post("/slow", slow)
    runner = make_runner(app, signals=False)  # as notifier serve: a handler finishes when its client is gone
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    server = SimpleNamespace(port=sock.getsockname()[1])
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        await asyncio.wait_for(started.wait(), 5)
        writer.close()
        await asyncio.wait_for(answered.wait(), 5)
        await asyncio.sleep(0.05)
        ours, theirs = await both(server, REQUESTS["1.1 close"], "accepted")
    finally:
        await runner.cleanup()
    assert ours == theirs and ours.startswith(b"HTTP/1.1 202")


def test_an_answer_keeps_its_heads_headers_read_only():
    answer = Answer(HEADS["refused"], b"{}")
    assert (answer.status, answer.reason, answer.headers["Retry-After"]) == (429, "Too Many Requests", "1800")
    assert answer.body == b"{}" and answer.content_type == "application/json"
    with pytest.raises(TypeError):
        answer.headers["Retry-After"] = "1"
    key = web.ResponseKey("state", int)
    answer[key] = 1  # a response's own mapping, as aiohttp's
    assert answer[key] == 1


@pytest.mark.parametrize(
    "status,headers",
    [
        (204, {}),
        (304, {}),
        (101, {}),
        (200, {"X-A": "1\r\nSet-Cookie: x=1"}),
        (200, {"X-A\n": "1"}),
        (200, {"X-A: b": "1"}),
    ],
)
def test_a_head_refuses_what_it_cannot_write(status, headers):
    with pytest.raises(ValueError):
        head(status, headers)


def test_the_date_is_the_one_aiohttp_writes():
    """The answers' comparisons above leave the Date aside (a second may turn between two answers)."""
    for _ in range(5):
        second = int(time.time())
        ours, theirs = wire._date(), rfc822_formatted_time()
        if int(time.time()) == second:
            break
    assert ours == f"Date: {theirs}\r\n".encode()
