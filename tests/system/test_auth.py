"""Bearer tokens: POST needs one, health and read-only GETs stay open, tokens never reach the log."""

from __future__ import annotations

import socket

import pytest
import redis
from helpers import Gateway

TOKENS = "first-Secret-7f3a,second-Secret-91bc"
EVENT = {"category": "auth", "text": "hello"}
ALERT = {"version": "4", "alerts": [{"labels": {"alertname": "A"}, "fingerprint": "f1"}]}


@pytest.fixture(scope="module")
def gateway(redis_server):
    redis.Redis.from_url(redis_server.url).flushall()
    process = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_server.url,
            "NOTIFIER_API_TOKENS": TOKENS,
            "NOTIFIER_DIGEST_INTERVAL": "0",
            "NOTIFIER_KEY_PREFIX": "authtest",
            "NOTIFIER_LOG_LEVEL": "DEBUG",
        }
    ).start()
    yield process
    process.stop()


def accepted(gateway) -> int:
    return gateway.get("/v1/stats")[1]["accepted"]


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        "Bearer first-Secret-7f3",
        "Bearer first-Secret-7f3aX",
        "Basic Zmlyc3QtU2VjcmV0LTdmM2E=",
        "first-Secret-7f3a",
        "Token first-Secret-7f3a",
        "Bearer first-Secret-7f3a,second-Secret-91bc",
    ],
)
def test_missing_or_wrong_token_is_401(gateway, header):
    before = accepted(gateway)
    headers = {"Authorization": header} if header is not None else {}
    for path, body in (("/v1/events", EVENT), ("/v1/alertmanager", ALERT)):
        status, answer, head = gateway.post(body, path=path, headers=headers)
        assert status == 401 and "token" in answer["error"]
        assert head.get("WWW-Authenticate", "").startswith("Bearer ")
        assert "Secret" not in str(answer)
    assert accepted(gateway) == before


def test_401_comes_before_anything_about_the_body(gateway):
    status, _, _ = gateway.post(b"{not json", headers={"Content-Type": "text/plain"})
    assert status == 401


@pytest.mark.parametrize(
    "header", ["Bearer first-Secret-7f3a", "bearer second-Secret-91bc", "Bearer   second-Secret-91bc  "]
)
def test_each_configured_token_works(gateway, header):
    before = accepted(gateway)
    status, _, _ = gateway.post(EVENT, headers={"Authorization": header})
    assert status == 202
    assert accepted(gateway) == before + 1


def test_non_ascii_authorization_header_is_401_not_500(gateway):
    raw = (
        b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer \xff\xfe\xc3\x28\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as sock:
        sock.sendall(raw)
        reply = sock.recv(4096)
    assert reply.split(b" ")[1] in (b"400", b"401"), reply


def test_open_endpoints_need_no_token(gateway):
    for path in ("/healthz", "/readyz", "/v1/stats", "/v1/limits", "/metrics"):
        assert gateway.get(path)[0] == 200, path


def test_event_content_needs_a_token(gateway):
    """What failed and why (dead letters) is event content: counts stay open, content does not."""
    status, answer, head = gateway.get("/v1/dead")
    assert status == 401 and "token" in answer["error"] and head.get("WWW-Authenticate", "").startswith("Bearer ")
    status, answer, _ = gateway.get("/v1/dead", headers={"Authorization": "Bearer wrong"})
    assert status == 401, answer
    status, answer, _ = gateway.get("/v1/dead", headers={"Authorization": "Bearer second-Secret-91bc"})
    assert status == 200 and answer["count"] == 0, answer


def test_tokens_never_logged(gateway):
    gateway.post(EVENT, headers={"Authorization": "Bearer first-Secret-7f3a"})
    gateway.post(EVENT, headers={"Authorization": "Bearer guessed-Secret-0000"})
    log = gateway.output()
    assert "Secret" not in log and "Authorization" not in log
