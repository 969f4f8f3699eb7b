"""The storm's route answered before the router (``notifier/http/serving.py``): the same answers as
through the router, taken only for exactly ``POST /v1/events``, never with middlewares."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from notifier.http.answers import MAX_BODY
from notifier.http.app import create_app
from notifier.http.serving import KEEPALIVE, make_runner, shortcut
from notifier.settings import load_settings

JSON = {"Content-Type": "application/json"}
EVENT = b'{"category":"db","text":"disk full"}'

# What a client may send to the storm's route, each to be answered as the router's way answers it.
REQUESTS = [
    {"data": EVENT, "headers": JSON},  # accepted
    {"data": EVENT, "headers": JSON},  # dropped: the category's limit is 1
    {"data": b'{"category":"web","text":"x","dedup_key":"k"}', "headers": JSON},
    {"data": b'{"category":"web","text":"x","dedup_key":"k"}', "headers": JSON},
    {"data": b'{"category":"db"', "headers": JSON},
    {"data": b'{"text":"no category"}', "headers": JSON},
    {"data": b'{"category":"db","text":"x","text":"y"}', "headers": JSON},
    {"data": EVENT, "headers": {"Content-Type": "text/plain"}},
    {"data": EVENT, "headers": {}},
    {"data": b"x" * (MAX_BODY + 1), "headers": JSON},
    {"data": EVENT, "headers": {**JSON, "Host": "attacker.example"}},
    {"data": EVENT, "headers": {**JSON, "Content-Encoding": "gzip"}},
]


async def answers(client: TestClient, credential: dict[str, str]) -> list[tuple[int, dict[str, object]]]:
    seen = []
    for request in REQUESTS:
        headers = {**request["headers"], **credential}  # type: ignore[dict-item]
        response = await client.post("/v1/events", data=request["data"], headers=headers)
        body = json.loads(await response.read())
        body.pop("id", None)  # each app makes its own
        body.pop("retry_after", None)  # a second apart at most
        seen.append((response.status, body))
    return seen


async def served(shortcut_taken: bool, **settings: object) -> TestClient:
    app = create_app(load_settings(category_limit="1/30m", digest_interval=0, **settings))
    client = TestClient(TestServer(app))
    await client.start_server()
    if shortcut_taken:
        shortcut(client.server.runner.server, app)  # type: ignore[union-attr]
    return client


@pytest.mark.parametrize("settings", [{}, {"api_tokens": "s3cret"}])
async def test_the_shortcut_answers_as_the_router_does(settings):
    routed, short = await served(False, **settings), await served(True, **settings)
    statuses: set[int] = set()
    try:
        for credential in ({"Authorization": "Bearer s3cret"}, {}, {"Authorization": "Bearer wrong"}):
            through_router, before_router = await answers(routed, credential), await answers(short, credential)
            assert before_router == through_router, credential
            statuses |= {status for status, _ in through_router}
        assert statuses >= {202, 200, 429, 422, 415, 413, 400, 401 if settings else 403}
    finally:
        await routed.close()
        await short.close()


async def test_only_exactly_the_storms_route_passes_the_router_by(aiohttp_client, monkeypatch):
    app = create_app(load_settings(digest_interval=0))
    client = await aiohttp_client(app)  # the suite's client takes the shortcut (tests/conftest.py)
    resolved: list[str] = []
    resolve = app.router.resolve

    async def counted(request: web.Request) -> object:
        resolved.append(f"{request.method} {request.raw_path}")
        return await resolve(request)

    monkeypatch.setattr(app.router, "resolve", counted)
    assert (await client.post("/v1/events", data=EVENT, headers=JSON)).status == 202
    assert resolved == []
    assert (await client.post("/v1/events?x=1", data=EVENT, headers=JSON)).status == 202
    assert (await client.get("/v1/events")).status == 405
    assert (await client.get("/healthz")).status == 200
    assert (await client.post("/v1/events/", data=EVENT, headers=JSON)).status == 404
    assert resolved == ["POST /v1/events?x=1", "GET /v1/events", "GET /healthz", "POST /v1/events/"]


async def test_a_client_that_expects_100_continue_gets_it(aiohttp_client):
    """The router's way sends ``100 Continue``; the shortcut leaves such a request to it."""
    client = await aiohttp_client(create_app(load_settings(digest_interval=0)))
    answer = await asyncio.wait_for(client.post("/v1/events", data=EVENT, headers=JSON, expect100=True), 5)
    assert answer.status == 202


async def test_an_application_with_middlewares_is_refused():
    @web.middleware
    async def passing(request: web.Request, handler: object) -> web.StreamResponse:
        return await handler(request)  # type: ignore[operator]

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response()

    app = web.Application(middlewares=[passing])
    app.router.add_post("/v1/events", answer)
    with pytest.raises(RuntimeError, match="middlewares"):
        shortcut(web.Server(app._handle), app)


WEBHOOK_PATHS = [
    "/services/T0/B0/s3cret",
    "/services/T0/B0/wrong",
    "/services/T0/B0/s3cre%74",  # unquoted by the router: the token
    "/services/T0/./B0/s3cret",
    "/services/T0/B0/s3cret/",
    "/services/T0/B0",
    "/services/T0/B0/s3cret?x=1",
    "/services/T%2F0/B0/s3cret",
    "/services/T0/B0/s3cret%0A",
]
MESSAGES = [b'{"text":"hi"}', b'{"text":', b'{"blocks":[{"type":"nope"}]}', b"payload=%7B%22text%22%3A%22hi%22%7D"]


async def webhook_answers(client: TestClient) -> list[tuple[str, int, str]]:
    seen = []
    for path in WEBHOOK_PATHS:
        for body in MESSAGES:
            form = body.startswith(b"payload=")
            headers = {"Content-Type": "application/x-www-form-urlencoded" if form else "application/json"}
            url = URL(str(client.make_url("/")).rstrip("/") + path, encoded=True)  # sent as written
            response = await client.session.post(url, data=body, headers=headers)
            seen.append((path, response.status, await response.text()))
    return seen


async def test_the_webhook_is_answered_as_the_router_does(monkeypatch):
    routed, short = await served(False, api_tokens="s3cret"), await served(True, api_tokens="s3cret")
    resolved: list[str] = []
    resolve = short.server.app.router.resolve  # type: ignore[union-attr]

    async def counted(request: web.Request) -> object:
        resolved.append(request.raw_path)
        return await resolve(request)

    monkeypatch.setattr(short.server.app.router, "resolve", counted)  # type: ignore[union-attr]
    try:
        through_router, before_router = await webhook_answers(routed), await webhook_answers(short)
        assert before_router == through_router
        assert {status for _, status, _ in through_router} == {200, 400, 404}
        assert ("/services/T0/B0/s3cre%74", 200, "ok") in through_router  # the router unquotes it
        assert set(resolved) == set(WEBHOOK_PATHS) - {"/services/T0/B0/s3cret", "/services/T0/B0/wrong"}
    finally:
        await routed.close()
        await short.close()


async def test_the_runner_keeps_an_idle_connection_as_run_app_did():
    """75 s, as ``web.run_app`` set it: aiohttp's server alone keeps an idle connection an hour."""
    app = create_app(load_settings(digest_interval=0))
    runner = make_runner(app, signals=False)
    await runner.setup()
    try:
        site = web.SockSite(runner, listening())
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        assert [c.keepalive_timeout for c in runner.server.connections] == [KEEPALIVE] == [75.0]  # type: ignore[union-attr]
        writer.close()
    finally:
        await runner.cleanup()


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock
