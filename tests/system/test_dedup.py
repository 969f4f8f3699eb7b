"""dedup_key: a repeat within the category's longest window is 200 duplicate and counts nowhere."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import Gateway, wait_for


@pytest.fixture
def gateway(redis_url, tmp_path):
    gw = Gateway(
        {
            "NOTIFIER_REDIS_URL": redis_url,
            "NOTIFIER_GLOBAL_LIMIT": "1000/1h",
            "NOTIFIER_CATEGORY_LIMIT": "5/2s",
            "NOTIFIER_CATEGORY_LIMITS": json.dumps({"tight": "1/1h", "burst": "100/1h"}),
        },
        log_dir=str(tmp_path),
    ).start()
    yield gw
    gw.stop()


def _event(category: str, key: str, text: str = "x") -> dict:
    return {"category": category, "text": text, "dedup_key": key}


def test_repeat_is_duplicate_with_first_id_and_not_counted(gateway):
    status, first, _ = gateway.post(_event("db", "k1"))
    assert status == 202
    for _ in range(3):
        status, body, _ = gateway.post(_event("db", "k1", "again"))
        assert (status, body) == (200, {"status": "duplicate", "id": first["id"]})
    stats = gateway.get("/v1/stats")[1]
    assert stats["accepted"] == 1 and stats["dropped"] == 0 and stats["duplicates"] == 3
    assert gateway.get("/v1/limits")[1]["categories"]["db"][0]["used"] == 1

    # The same key in another category is another event.
    status, other, _ = gateway.post(_event("web", "k1"))
    assert status == 202 and other["id"] != first["id"]

    # After the category's longest window (2 s) the key is free again.
    again = wait_for(
        lambda: (lambda r: r if r[0] == 202 else None)(gateway.post(_event("db", "k1"))),
        15,
        interval=0.3,
        what="dedup key to expire",
    )
    assert again[1]["id"] != first["id"]


def test_dropped_event_does_not_register_its_key(gateway):
    assert gateway.post({"category": "tight", "text": "fills the level"})[0] == 202
    assert gateway.post(_event("tight", "k2"))[0] == 429
    status, body, _ = gateway.post(_event("tight", "k2"))
    assert status == 429 and body["status"] == "dropped"
    assert gateway.get("/v1/stats")[1]["by_category"]["tight"] == {"accepted": 1, "dropped": 2}


def test_concurrent_duplicates_admit_exactly_one(gateway):
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: gateway.post(_event("burst", "same", f"#{i}")), range(32)))
    accepted = [body["id"] for status, body, _ in answers if status == 202]
    assert len(accepted) == 1
    assert all(status == 200 and body["id"] == accepted[0] for status, body, _ in answers if status != 202)
    assert gateway.get("/v1/stats")[1]["by_category"]["burst"]["accepted"] == 1
