"""A fleet for the run-time override tests (test_overrides*.py), and talking to its replicas.

Three ``notifier serve`` processes share one real Redis; the last one runs with its clock an
hour behind (libfaketime), since ``until`` and lapses use the store's clock. Every replica is
polled on its own.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import Gateway, http, need

TOKEN = "ops-7b1e52d9c4a0f3"  # one of NOTIFIER_API_TOKENS
OTHER_TOKEN = "ci-0d93aa71e6b2"
AUTHOR = "env-1"  # the name of the first of NOTIFIER_API_TOKENS, never a hash
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CATEGORIES = "db,web,cache,jobs,trap"
BOUND = 1.0  # the contract's figure: in force on every replica within 1 s of the answer
HOUR = 3600.0


def base_env(redis_url: str) -> dict[str, str]:
    return {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_API_TOKENS": f"{TOKEN},{OTHER_TOKEN}",
        "NOTIFIER_CATEGORIES": CATEGORIES,
        # Windows shorter than an hour: a replica that learns a category is muted for an
        # hour refuses its events by itself (no round trip), as in a storm.
        "NOTIFIER_GLOBAL_LIMIT": "100000/10m",
        "NOTIFIER_CATEGORY_LIMIT": "100000/10m",
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }


def skewed_clock() -> dict[str, str]:
    """A process environment with the clock an hour behind (as in test_fleet)."""
    need("faketime")
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not found:
        need("libfaketime.so.1")
    return {"LD_PRELOAD": found[0], "FAKETIME": "-1h"}


class Fleet:
    """Replicas of the gateway on one Redis; the last one's clock is an hour off."""

    def __init__(self, env: dict[str, str], log_dir: Path, replicas: int = 3, skew: bool = True) -> None:
        self.gateways = []
        for index in range(replicas):
            extra = {"NOTIFIER_REPLICA_ID": f"replica-{index}"}
            if skew and index == replicas - 1:
                extra |= skewed_clock()
            self.gateways.append(Gateway({**env, **extra}, log_dir=str(log_dir)))

    def start(self) -> Fleet:
        with ThreadPoolExecutor(len(self.gateways)) as pool:
            list(pool.map(lambda g: g.start(), self.gateways))
        return self

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.gateways)) as pool:
            list(pool.map(lambda g: g.stop(), self.gateways))

    def output(self) -> str:
        return "\n".join(f"--- {g.url}\n{g.output()}" for g in self.gateways)


@pytest.fixture
def make_fleet(redis_url, tmp_path):
    fleets: list[Fleet] = []

    def make(replicas: int = 3, skew: bool = True, **env: str) -> Fleet:
        fleet = Fleet(base_env(redis_url) | env, tmp_path, replicas, skew).start()
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop()


# ---------------------------------------------------------------- talking to replicas


@dataclass
class Answer:
    replica: int
    sent: float  # time.time() before the request
    received: float  # time.time() after the answer
    status: int
    body: dict
    headers: dict


def send(gateway: Gateway, category: str, replica: int = 0, text: str = "ping") -> Answer:
    sent = time.time()
    status, body, headers = gateway.post({"category": category, "text": text}, headers=AUTH)
    return Answer(replica, sent, time.time(), status, body, headers)


def change(method: str, gateway: Gateway, level: str, body: object = None, headers: dict | None = None):
    """PUT or DELETE /v1/limits/{level}: (status, answer, time the answer arrived)."""
    status, answer, _ = http(method, f"{gateway.url}/v1/limits/{level}", body, AUTH if headers is None else headers)
    return status, answer, time.time()


def overrides(gateway: Gateway) -> dict:
    status, body, _ = gateway.get("/v1/limits")
    assert status == 200, body
    return body["overrides"]


def refused_by(limit: str, rule: str):
    return lambda a: a.status == 429 and a.body.get("limit") == limit and a.body.get("rule") == rule


def admitted(a: Answer) -> bool:
    return a.status == 202 and a.body.get("status") == "accepted"


def until_every_replica(fleet: Fleet, category: str, wanted, since: float, timeout: float = 10.0) -> list[float]:
    """Poll every replica (each in its own thread) until it answers ``wanted``; then 3 more must too.

    Returns, per replica, the seconds from ``since`` until its first such answer arrived.
    """

    def poll(index: int) -> float:
        gateway, deadline, seen = fleet.gateways[index], time.monotonic() + timeout, []
        while True:
            answer = send(gateway, category, index)
            seen.append(answer)
            if wanted(answer):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"replica {index} never answered as wanted in {timeout} s ({len(seen)} tries), "
                    f"last: {answer.status} {answer.body}"
                )
        for _ in range(3):
            again = send(gateway, category, index)
            assert wanted(again), f"replica {index} went back: {again}"
        return answer.received - since

    with ThreadPoolExecutor(len(fleet.gateways)) as pool:
        return list(pool.map(poll, range(len(fleet.gateways))))


def check_mute_refusal(answer: Answer, rule: str, until: float) -> None:
    """A muted category's refusal: names the rule, retry_after within the mute and one window."""
    body = answer.body
    assert answer.status == 429 and body["limit"] == "category" and body["rule"] == rule, answer
    window = {"h": HOUR, "m": 60.0, "s": 1.0}[rule[-1]] * float(rule[2:-1])
    assert 0 < body["retry_after"] <= window, answer
    # the store's clock is this host's clock; retry_after is rounded up to the millisecond
    assert body["retry_after"] <= until - answer.sent + 0.002, (answer, until)
    assert int(answer.headers["Retry-After"]) >= body["retry_after"], answer


def cli(*args: str) -> subprocess.CompletedProcess:
    command = shutil.which("notifier")
    argv = [command] if command else [sys.executable, "-m", "notifier"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)
