"""``/openapi.json`` and a schemathesis run against a live gateway: no 5xx, answers match the schema."""

from __future__ import annotations

import json

import pytest
import schemathesis
from helpers import Gateway
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from notifier.http.answers import MAX_BODY
from notifier.http.openapi import spec

EXAMPLES = 60  # per operation; bounded so the run stays well under 40 s
SCHEMA = schemathesis.openapi.from_dict(spec())


@pytest.fixture(scope="module")
def gateway(redis_server):
    process = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_server.url,
            "NOTIFIER_KEY_PREFIX": "openapi",
            "NOTIFIER_DIGEST_INTERVAL": "0",
            "NOTIFIER_GLOBAL_LIMIT": "100000/1m",
            "NOTIFIER_CATEGORY_LIMIT": "5/1m",
        }
    ).start()
    yield process
    process.stop()


def test_served_document_is_the_models_schema(gateway):
    status, served, _ = gateway.get("/openapi.json")
    assert status == 200 and served == spec()
    event = served["components"]["schemas"]["Event"]
    assert event["required"] == ["category", "text"]
    assert event["properties"]["category"]["pattern"] == r"^[A-Za-z0-9_.:\-]{1,64}$"
    assert set(served["paths"]["/v1/events"]["post"]["responses"]) >= {
        "200",
        "202",
        "429",
        "400",
        "401",
        "413",
        "415",
        "422",
        "503",
    }


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms(case, gateway):
    # Rules and durations have a grammar a JSON Schema pattern cannot hold whole (a window must
    # round to at least 1 ms): a schema-valid override may still be refused with a 422, which is
    # not a failure there. Every other check still applies (no 5xx, answers match the schema).
    # Likewise a cursor of /v1/alerts is opaque: any string fits its schema, only the gateway's own read.
    # A window's times are checked against each other and the store's clock, which no schema says.
    # A level must be one of the tree's, which the configuration decides, not the schema; the history's
    # level and value come together or not at all, which no schema of two query parameters says.
    # A reload's answer is the file's: with none (as here), or a file with problems, a 422.
    grammar = case.operation.path in (
        "/v1/reload",
        "/v1/limits/{level}",
        "/v1/limits/{level}/{value}",
        "/v1/alerts",
        "/v1/windows/{name}",
        "/v1/stats/history",
    )
    excluded = [positive_data_acceptance] if grammar else []
    # The front doors answer as Slack does: the Web API's errors are HTTP 200 with ok false, and no
    # schema holds Block Kit's rules (a schema-valid block may be one Slack refuses, a 400 there).
    if case.operation.path.startswith(("/services/", "/api/")):
        excluded = [positive_data_acceptance, negative_data_rejection]
    # A body over 64 KiB is refused for its size (413, documented) before anything in it is read,
    # so a schema-violating one that large is refused with 413, not with the 4xx of its content.
    if len(json.dumps(case.body, ensure_ascii=False, default=str).encode()) > MAX_BODY:
        excluded.append(negative_data_rejection)
    case.call_and_validate(base_url=gateway.url, timeout=10, excluded_checks=excluded)
