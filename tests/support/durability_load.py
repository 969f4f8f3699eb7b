"""The load, the checks and the settings the durability tests (test_durability*.py) share."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from typing import NamedTuple

import aiohttp
from helpers import slack_env, wait_for

CHANNELS = 32  # one sender per channel: many posts (and settles) in flight at each kill
IN_DOUBT = ("outcome unknown", "not replicated")  # the 503s that may have admitted their event


class Answer(NamedTuple):
    text: str
    status: int  # 0: no answer
    sent: float
    answered: float
    error: str = ""  # a 503's error


class Load(threading.Thread):
    """Posts events with unique texts, ``in_flight`` at a time, until stopped; records each answer."""

    def __init__(self, url: str, prefix: str, in_flight: int = 8) -> None:
        super().__init__(daemon=True)
        self.url, self.prefix, self.in_flight = url, prefix, in_flight
        self.answers: list[Answer] = []
        self.stopping = threading.Event()
        self._n = 0

    def run(self) -> None:
        asyncio.run(self._load())

    async def _load(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            await asyncio.gather(*(self._worker(session) for _ in range(self.in_flight)))

    async def _worker(self, session: aiohttp.ClientSession) -> None:
        while not self.stopping.is_set():
            self._n += 1
            n, text = self._n, f"{self.prefix}-{self._n}"
            body = {"category": f"c{n % CHANNELS}", "text": text}
            sent, error = time.monotonic(), ""
            try:
                async with session.post(self.url + "/v1/events", json=body) as response:
                    answer = json.loads(await response.read())
                    status = response.status
                    error = answer.get("error", "") if status == 503 else ""
            except (aiohttp.ClientError, asyncio.TimeoutError):
                status = 0
            self.answers.append(Answer(text, status, sent, time.monotonic(), error))
            # A steady load the stand-in keeps up with, and no busy loop against a store that is down.
            await asyncio.sleep(0.02)


def delivered(slack) -> Counter[str]:
    """How many times each event text of the loads reached Slack."""
    return Counter(m.group() for m in (re.search(r"\br\d+-\d+\b", t) for t in slack.texts()) if m)


def truth(answers: list[Answer], sent: Counter[str]) -> dict:
    """What the 503s said, against what reached Slack: a plain 503 delivered is a lie."""
    doubted = [a for a in answers if a.error in IN_DOUBT]
    plain = [a for a in answers if a.status == 503 and a.error not in IN_DOUBT]
    return {
        "plain_503": len(plain),
        "plain_503_delivered": sorted(a.text for a in plain if a.text in sent),
        "outcome_unknown": sum(1 for a in doubted if a.error == "outcome unknown"),
        "not_replicated": sum(1 for a in doubted if a.error == "not replicated"),
        "in_doubt_delivered": sum(1 for a in doubted if a.text in sent),
    }


def until_delivered(answers, slack, timeout: float) -> set[str]:
    """The texts answered 202, once Slack has each of them (or after ``timeout`` seconds)."""
    accepted = {a.text for a in answers if a.status == 202}
    deadline = time.monotonic() + timeout
    while not accepted <= set(delivered(slack)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return accepted


def stop_after_a_202(load) -> float:
    """Now (the new primary replicates): wait for a 202 after it, let the load run 1 s more, stop it."""
    replicating = time.monotonic()
    wait_for(lambda: any(a.status == 202 and a.sent > replicating for a in load.answers), 10, what="202 again")
    time.sleep(1.0)
    load.stopping.set()
    load.join(20)
    return replicating


def crash_env(redis_url: str, slack, **extra: str) -> dict[str, str]:
    channels = {f"c{i}": f"#ch{i}" for i in range(CHANNELS)}
    return slack_env(
        redis_url,
        slack,
        NOTIFIER_REDIS_TIMEOUT="500ms",
        NOTIFIER_CHANNEL_RATE="1000/1s",
        NOTIFIER_GLOBAL_LIMIT="1000000/1h",
        NOTIFIER_CATEGORY_LIMIT="1000000/1h",
        NOTIFIER_CATEGORY_CHANNELS=json.dumps(channels),
        **extra,
    )


def summary(seen: dict) -> dict:
    """``seen`` with the lists counted, for the test's printed line."""
    return seen | {k: len(v) for k, v in seen.items() if isinstance(v, list)}
