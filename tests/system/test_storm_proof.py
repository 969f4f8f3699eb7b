"""The storm the gateway exists for, tried as a hostile and as a merely unlucky client would.

Random categories must not grow the metrics, the stats or Redis without bound, and every drop
reaches exactly one digest Slack accepts; a hung store (SIGSTOP) is answered in bounded time,
a 503 changes nothing, and memory stays bounded; a dead replica's entries go before newer ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import aiohttp
import redis
from helpers import Gateway, RedisServer, slack_env, wait_for
from slack_standin import SlackStandin


async def _post_many(url: str, bodies: list[dict], in_flight: int = 32) -> list[tuple[int, float, float]]:
    """POST every body (``in_flight`` at a time); (status, sent, answered) per body, in order."""
    results: list[tuple[int, float, float]] = [(0, 0.0, 0.0)] * len(bodies)
    queue = list(enumerate(bodies))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def worker() -> None:
            while queue:
                index, body = queue.pop()
                sent = time.monotonic()
                async with session.post(url + "/v1/events", json=body) as response:
                    await response.read()
                    results[index] = (response.status, sent, time.monotonic())

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    return results


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _suppressed(slack: SlackStandin) -> int:
    return sum(int(m.group(1)) for m in (re.search(r"Suppressed (\d+) notification", t) for t in slack.texts()) if m)


def test_random_categories_stay_bounded_and_every_drop_reaches_one_digest(redis_url, slack):
    env = slack_env(
        redis_url,
        slack,
        NOTIFIER_GLOBAL_LIMIT="20/1h",
        NOTIFIER_CATEGORY_LIMIT="5/1h",
        NOTIFIER_MAX_CATEGORIES="50",
        NOTIFIER_DIGEST_INTERVAL="2s",
        NOTIFIER_CHANNEL_RATE="100/1s",
    )
    gateway = Gateway(env).start()
    try:
        bodies = [{"category": uuid.uuid4().hex, "text": f"storm {i}"} for i in range(3000)]
        statuses = [s for s, _, _ in asyncio.run(_post_many(gateway.url, bodies))]
        assert statuses.count(202) == 20 and statuses.count(429) == 2980
        wait_for(lambda: _suppressed(slack) >= 2980, 30, what="digests of all 2980 drops")
        time.sleep(3)  # a digest too many, if any, would arrive now
        metrics = gateway.get("/metrics")[1]["_raw"]
        stats = gateway.get("/v1/stats")[1]
    finally:
        gateway.stop()
    assert slack.refusals == [] and _suppressed(slack) == 2980  # every drop in exactly one digest
    series = re.findall(r'^notifier_events_total\{category="([^"]*)",outcome="[^"]*"\} (\S+)$', metrics, re.M)
    assert len({c for c, _ in series}) <= 51 and "(other)" in {c for c, _ in series}
    assert sum(float(v) for _, v in series) == 3000  # totals stay exact
    assert len(stats["by_category"]) == 51 and "(other)" in stats["by_category"]
    assert (stats["accepted"], stats["dropped"]) == (20, 2980)
    assert sum(c["accepted"] + c["dropped"] for c in stats["by_category"].values()) == 3000
    store = redis.Redis.from_url(redis_url)
    assert store.scard("notifier:{notifier}:categories") == 50
    assert store.hlen("notifier:{notifier}:stats") <= 2 * 51 + 10
    store.close()


class OpenLoad(threading.Thread):
    """Sends ``rate`` events a second without waiting for answers, recording each answer."""

    def __init__(self, url: str, rate: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.url, self.rate, self.seconds = url, rate, seconds
        self.answers: list[tuple[str, int, float, float]] = []  # (text, status, sent, answered)
        self.in_doubt: set[str] = set()  # answered 503 outcome unknown (or not replicated): may be delivered

    def run(self) -> None:
        asyncio.run(self._load())

    async def _load(self) -> None:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=20)) as session:
            started, tasks = time.monotonic(), []
            for n in range(int(self.rate * self.seconds)):
                await asyncio.sleep(max(0.0, started + n / self.rate - time.monotonic()))
                tasks.append(asyncio.create_task(self._one(session, f"hung-{n}")))
            await asyncio.gather(*tasks)

    async def _one(self, session: aiohttp.ClientSession, text: str) -> None:
        sent = time.monotonic()
        try:
            async with session.post(self.url + "/v1/events", json={"category": "load", "text": text}) as response:
                body = await response.read()
                status = response.status
            if status == 503 and json.loads(body).get("id"):
                self.in_doubt.add(text)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            status = 0
        self.answers.append((text, status, sent, time.monotonic()))


def test_a_hung_store_is_answered_in_bounded_time_and_a_503_changes_nothing(tmp_path):
    server = RedisServer().start()
    env = {
        "NOTIFIER_REDIS_URL": server.url,
        "NOTIFIER_REDIS_TIMEOUT": "1s",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_GLOBAL_LIMIT": "1000000/1h",
        "NOTIFIER_CATEGORY_LIMIT": "1000000/1h",
    }
    gateway = Gateway(env, log_dir=str(tmp_path)).start()  # the console sink prints what it delivers
    try:
        idle = _rss_mib(gateway.proc.pid)
        load = OpenLoad(gateway.url, rate=300, seconds=9)
        load.start()
        time.sleep(2)
        os.kill(server.proc.pid, signal.SIGSTOP)
        stopped, peak = time.monotonic(), idle
        while time.monotonic() < stopped + 4:
            peak = max(peak, _rss_mib(gateway.proc.pid))
            time.sleep(0.1)
        os.kill(server.proc.pid, signal.SIGCONT)
        resumed = time.monotonic()
        load.join(30)
        wait_for(lambda: _printed(gateway) >= sum(1 for a in load.answers if a[1] == 202), 30, what="deliveries")
        time.sleep(2)  # anything admitted late would be printed by now
        output = gateway.output()
    finally:
        gateway.stop()
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
    statuses = [a[1] for a in load.answers]
    assert set(statuses) <= {202, 503} and statuses.count(503) > 0, set(statuses)
    # NOTIFIER_REDIS_TIMEOUT plus 0.5 s at the most, as the client sees it: its own loop, sending 300 a
    # second on the same two cores, reads the answers late on a loaded machine (2.08 s seen with a soak
    # running beside the suite). The hang lasts 4 s: an answer that waited for the store would be >= 4 s.
    assert max(answered - sent for _, _, sent, answered in load.answers) < 1.5 + 1.0
    delivered = set(re.findall(r"\[notifier -> [^\]]+\] .* (hung-\d+)$", output, re.M))
    plain = {t for t, s, _, _ in load.answers if s == 503 and t not in load.in_doubt}
    slowest = max(answered - sent for _, _, sent, answered in load.answers)
    print(
        f"hung store: {statuses.count(202)} answered 202, {len(plain)} plain 503 ({len(plain & delivered)} delivered), "
        f"{len(load.in_doubt)} in doubt ({len(load.in_doubt & delivered)} delivered), slowest {slowest:.2f} s"
    )
    assert plain.isdisjoint(delivered)  # a plain 503 changed nothing
    assert {t for t, s, _, _ in load.answers if s == 202} <= delivered  # and every 202 was delivered
    first = min(answered for _, s, sent, answered in load.answers if s == 202 and sent > resumed)
    assert first - resumed < 1.0 + 0.5  # the first 202 within a second after the store answers again
    assert peak - idle < 30  # MiB, while the store hangs


def _printed(gateway: Gateway) -> int:
    return len(re.findall(r"hung-\d+$", gateway.output(), re.M))


def test_reclaimed_entries_go_before_newer_ones(redis_url, slack):
    env = slack_env(
        redis_url,
        slack,
        NOTIFIER_CLAIM_IDLE="2s",
        NOTIFIER_CHANNEL_RATE="1/1s",
        NOTIFIER_DIGEST_INTERVAL="0",
        NOTIFIER_GLOBAL_LIMIT="1000/1h",
        NOTIFIER_CATEGORY_LIMIT="1000/1h",
    )
    dead = Gateway({**env, "NOTIFIER_REPLICA_ID": "dead"}).start()
    for i in range(8):
        assert dead.post({"category": "ops", "text": f"held-{i}"})[0] == 202
    time.sleep(0.3)  # it read them all, and can post one a second
    dead.stop(kill=True)
    survivor = Gateway({**env, "NOTIFIER_REPLICA_ID": "survivor"}).start()  # it holds none of them
    try:
        for i in range(16):  # the survivor builds a backlog of newer events meanwhile
            assert survivor.post({"category": "ops", "text": f"newer-{i}"})[0] == 202
            time.sleep(0.3)
        wait_for(lambda: len(slack.texts()) >= 24, 60, what="all 24 delivered")
        log = survivor.output()
    finally:
        survivor.stop()
    arrivals = [(m.at, re.search(r"(held|newer)-\d+", m.text).group()) for m in slack.received()]
    assert sorted(t for _, t in arrivals) == sorted({t for _, t in arrivals}) and len(arrivals) == 24  # each once
    stamp = re.search(r"^(\S+ \S+) INFO \S+: reclaimed ", log, re.M).group(1)
    reclaimed_at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    first_held = min(at for at, text in arrivals if text.startswith("held") and at > reclaimed_at)
    # Once reclaimed, the older entries go first: at most the send already in flight comes between.
    overtaking = [text for at, text in arrivals if text.startswith("newer") and reclaimed_at < at < first_held]
    assert len(overtaking) <= 1, (overtaking, arrivals)
    assert [t for _, t in arrivals if t.startswith("held")] == [f"held-{i}" for i in range(8)]
