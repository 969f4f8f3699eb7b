"""The HTTP API answers exactly as the contract says (in-process app, embedded store)."""

import re

import pytest

from notifier.http import answers
from notifier.http.app import create_app
from notifier.settings import load_settings


@pytest.fixture
def make_client(aiohttp_client):
    async def make(**overrides):
        overrides.setdefault("digest_interval", 0)
        return await aiohttp_client(create_app(load_settings(**overrides)))

    return make


async def post(client, body, **kw):
    response = await client.post("/v1/events", json=body, **kw)
    return response.status, await response.json(), response.headers


async def stats(client):
    return await (await client.get("/v1/stats")).json()


async def test_accepted_dropped_duplicate(make_client):
    client = await make_client(global_limit="3/30m", category_limit="2/30m")
    status, body, _ = await post(client, {"category": "db", "text": "one", "dedup_key": "k"})
    assert status == 202 and body["status"] == "accepted" and len(body["id"]) >= 16
    status, again, _ = await post(client, {"category": "db", "text": "one", "dedup_key": "k"})
    assert (status, again) == (200, {"status": "duplicate", "id": body["id"]})
    assert (await post(client, {"category": "db", "text": "two"}))[0] == 202
    status, dropped, headers = await post(client, {"category": "db", "text": "three"})
    assert status == 429
    assert dropped["status"] == "dropped" and dropped["limit"] == "category" and dropped["rule"] == "2/30m"
    assert 1790 < dropped["retry_after"] <= 1800
    assert headers["Retry-After"] == "1800"
    assert (await post(client, {"category": "web", "text": "four"}))[0] == 202
    status, dropped, _ = await post(client, {"category": "api", "text": "five"})
    assert (status, dropped["limit"], dropped["rule"]) == (429, "global", "3/30m")
    totals = await stats(client)
    assert {k: totals[k] for k in ("accepted", "dropped", "dropped_by_limit", "by_category")} == {
        "accepted": 3,
        "dropped": 2,
        "dropped_by_limit": {"global": 1, "category": 1},
        "by_category": {
            "api": {"accepted": 0, "dropped": 1},
            "db": {"accepted": 2, "dropped": 1},
            "web": {"accepted": 1, "dropped": 0},
        },
    }
    assert (totals["duplicates"], totals["dead_lettered"]) == (1, 0)


async def test_retry_after_header_rounds_up(make_client):
    client = await make_client(global_limit="100/1m", category_limit="1/1500ms")
    await post(client, {"category": "db", "text": "one"})
    status, body, headers = await post(client, {"category": "db", "text": "two"})
    assert status == 429 and 1.0 < body["retry_after"] <= 1.5 and headers["Retry-After"] == "2"


def test_refusal_heads_are_shared_per_second_read_only_and_bounded():
    """A storm's 429s share their head per whole second of Retry-After; clients cannot grow them."""
    first = answers.refusal_response({"status": "dropped"}, 1.2)
    again = answers.refusal_response({"status": "dropped"}, 1.9)
    assert first.headers["Retry-After"] == again.headers["Retry-After"] == "2"
    assert first.headers["Content-Type"] == "application/json; charset=utf-8" and first.status == 429
    with pytest.raises(TypeError):  # an answer's headers are its head's, shared: never changed
        first.headers["Retry-After"] = "changed"
    assert answers.refusal_response({}, 2.0).headers["Retry-After"] == "2"
    for seconds in range(answers.MAX_HEADS * 2):
        assert answers.refusal_response({}, seconds + 0.5).headers["Retry-After"] == str(max(1, seconds + 1))
    assert len(answers._refusal_heads) <= answers.MAX_HEADS
    for seconds in range(answers.MAX_HEADS * 2):
        answers.json_response({}, 503, answers.retry_after_header(seconds))
    assert len(answers._heads) <= answers.MAX_HEADS


@pytest.mark.parametrize(
    "raw,content_type,status",
    [
        (b"{not json", "application/json", 400),
        (b"\xff\xfe{}", "application/json", 400),
        (b'{"category": "db", "text": "x"}', "text/plain", 415),
        (b'{"category": "db", "text": "x"}', None, 415),
        (b"[1, 2]", "application/json", 422),
        (b'{"category": "db"}', "application/json", 422),
        (b'{"category": "no spaces", "text": "x"}', "application/json", 422),
        (b'{"category": "db", "text": ""}', "application/json", 422),
        (b'{"category": "db", "text": 5}', "application/json", 422),
        (b'{"category": "db", "text": "x", "severity": "panic"}', "application/json", 422),
        (b'{"category": "db", "text": "x", "fields": {"a": 1}}', "application/json", 422),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(make_client, raw, content_type, status):
    client = await make_client()
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post("/v1/events", data=raw, headers=headers)
    assert response.status == status
    assert "error" in await response.json()
    assert (await stats(client))["accepted"] == 0 and (await stats(client))["dropped"] == 0


async def test_422_names_the_fields(make_client):
    client = await make_client()
    status, body, _ = await post(
        client, {"category": "a b", "text": "x" * 3001, "title": "t" * 151, "fields": {str(i): "v" for i in range(21)}}
    )
    assert status == 422
    assert {d["field"] for d in body["details"]} == {"category", "text", "title", "fields"}


async def test_body_over_64_kib_is_413(make_client):
    client = await make_client()
    response = await client.post(
        "/v1/events", data=b"{" + b" " * 70_000 + b"}", headers={"Content-Type": "application/json"}
    )
    assert response.status == 413


async def test_category_allowlist(make_client):
    client = await make_client(categories="db,web")
    assert (await post(client, {"category": "db", "text": "x"}))[0] == 202
    status, body, _ = await post(client, {"category": "other", "text": "x"})
    assert status == 422 and body["details"][0]["field"] == "category"


async def test_category_allowlist_refuses_alerts_one_by_one(make_client):
    # One alert of an unknown category must not fail the others: Alertmanager would count them failed.
    client = await make_client(categories="db,web")
    payload = {
        "version": "4",
        "alerts": [
            {"labels": {"alertname": "db"}, "fingerprint": "1"},
            {"labels": {"alertname": "HighCPU"}, "fingerprint": "2"},
        ],
    }
    response = await client.post("/v1/alertmanager", json=payload)
    results = (await response.json())["results"]
    assert response.status == 200
    assert [(r["status"], r["category"]) for r in results] == [("accepted", "db"), ("rejected", "HighCPU")]
    assert "HighCPU" in results[1]["error"]
    counts = await stats(client)
    assert (counts["accepted"], counts["dropped"], list(counts["by_category"])) == (1, 0, ["db"])
    assert 'notifier_requests_rejected_total{status="422"} 1.0' in await (await client.get("/metrics")).text()


async def test_an_alert_whose_link_ends_in_a_newline_is_posted_without_that_link(make_client):
    # A YAML block scalar (`runbook_url: |`) ends in a newline. Python's "$" matched before it, the
    # link's own check did not: the whole webhook was 422, and Alertmanager counted it failed.
    client = await make_client()
    annotations = {"runbook_url": "https://runbooks.example/disk\n", "dashboard_url": "https://grafana.example/d"}
    alert = {"labels": {"alertname": "DiskFull"}, "annotations": annotations, "fingerprint": "1"}
    response = await client.post("/v1/alertmanager", json={"version": "4", "alerts": [alert]})
    assert response.status == 200, await response.text()
    assert [result["status"] for result in (await response.json())["results"]] == ["accepted"]


async def test_a_name_ending_in_a_newline_is_no_category_and_no_window(make_client):
    client = await make_client()
    assert (await client.put("/v1/limits/category/db%0A", json={"rules": "1/1m"})).status == 422
    window = {"start": 2_000_000_000, "end": 2_000_003_600, "categories": ["db"]}
    assert (await client.put("/v1/windows/night%0A", json=window)).status == 422
    assert (await client.put("/v1/windows/night", json=window)).status == 200


async def test_bearer_tokens(make_client):
    client = await make_client(api_tokens="s3cret,other")
    assert (await post(client, {"category": "db", "text": "x"}))[0] == 401
    wrong = {"Authorization": "Bearer nope"}
    assert (await post(client, {"category": "db", "text": "x"}, headers=wrong))[0] == 401
    right = {"Authorization": "Bearer other"}
    assert (await post(client, {"category": "db", "text": "x"}, headers=right))[0] == 202
    assert (await client.get("/healthz")).status == 200 and (await client.get("/readyz")).status == 200
    assert (await stats(client))["accepted"] == 1


async def test_limits_view(make_client):
    client = await make_client(global_limit="5/1m,50/1h", category_limit="2/1m")
    for _ in range(3):
        await post(client, {"category": "db", "text": "x"})
    view = await (await client.get("/v1/limits")).json()
    first, second = view["global"]
    assert (first["rule"], first["used"], first["remaining"], first["available_in"]) == ("5/1m", 2, 3, 0)
    assert second["rule"] == "50/1h" and second["remaining"] == 48
    (db,) = view["categories"]["db"]
    assert (db["used"], db["remaining"]) == (2, 0) and 0 < db["available_in"] <= 60


async def test_a_zero_rule_mutes_a_category(make_client):
    client = await make_client(category_limits={"debug": "0/1h"})
    status, body, headers = await post(client, {"category": "debug", "text": "x"})
    assert (status, body["limit"], body["rule"], headers["Retry-After"]) == (429, "category", "0/1h", "3600")
    assert (await post(client, {"category": "db", "text": "x"}))[0] == 202
    view = await (await client.get("/v1/limits")).json()
    (debug,) = view["categories"]["debug"]
    assert (debug["used"], debug["remaining"], debug["available_in"]) == (0, 0, 3600)


async def test_metrics_count_outcomes(make_client):
    client = await make_client(global_limit="2/1m", category_limit="1/1m")
    for category in ("a", "a", "b", "c"):
        await post(client, {"category": category, "text": "x"})
    text = await (await client.get("/metrics")).text()
    assert 'notifier_events_total{category="a",outcome="accepted"} 1.0' in text
    assert 'notifier_events_total{category="a",outcome="dropped_category"} 1.0' in text
    assert 'notifier_events_total{category="c",outcome="dropped_global"} 1.0' in text


async def test_metrics_keep_duplicates_apart(make_client):
    # notifier_events_total's outcomes are exactly accepted, dropped_global and dropped_category.
    client = await make_client()
    for _ in range(3):
        await post(client, {"category": "a", "text": "x", "dedup_key": "k"})
    text = await (await client.get("/metrics")).text()
    outcomes = set(re.findall(r'^notifier_events_total{[^}]*outcome="(\w+)"}', text, re.M))
    assert outcomes == {"accepted"}
    assert 'notifier_duplicates_total{category="a"} 2.0' in text


async def test_store_unreachable_is_503(make_client):
    from helpers import free_port

    client = await make_client(redis_url=f"redis://127.0.0.1:{free_port()}/0", redis_timeout="300ms")
    status, _body, headers = await post(client, {"category": "db", "text": "x"})
    assert status == 503 and "Retry-After" in headers
    assert (await client.get("/readyz")).status == 503
    assert (await client.get("/healthz")).status == 200


async def test_unknown_route_is_json_404(make_client):
    client = await make_client()
    response = await client.get("/nope")
    assert response.status == 404 and "error" in await response.json()
    response = await client.post("/v1/dead")
    assert (response.status, response.headers["Allow"]) == (405, "GET,HEAD")
    assert (await client.head("/healthz")).status == 200
    metrics = await (await client.get("/metrics")).text()
    assert 'notifier_requests_rejected_total{status="404"} 1.0' in metrics
    assert 'notifier_requests_rejected_total{status="405"} 1.0' in metrics


async def test_unexpected_error_is_json_500_without_traceback(make_client, monkeypatch):
    import notifier.http.admin

    async def broken(*args):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(notifier.http.admin, "stats_view", broken)
    client = await make_client()
    response = await client.get("/v1/stats")
    assert (response.status, await response.json()) == (500, {"error": "internal error"})


async def test_the_events_handler_answers_its_own_errors(make_client, monkeypatch):
    """``POST /v1/events`` is not wrapped like the other handlers: its answers come out the same."""
    from notifier.admission.admit import Admission

    def broken(*args):
        raise RuntimeError("secret detail")

    client = await make_client()
    response = await client.post("/v1/events", data=b"{}", headers={"Content-Type": "text/plain"})
    assert (response.status, (await response.json())["error"]) == (415, "Content-Type must be application/json")
    monkeypatch.setattr(Admission, "decide_here", broken)
    response = await client.post("/v1/events", json={"category": "db", "text": "x"})
    assert (response.status, await response.json()) == (500, {"error": "internal error"})
