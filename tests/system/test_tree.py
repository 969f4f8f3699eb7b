"""The limit tree, exact for the fleet: four levels, reserves at two of them, several rules each.

Three gateway processes behind haproxy on one Redis, the last with its clock an hour off
(libfaketime), take waves of events for a few seconds. Then a model written from the
contract's sentences checks what happened, with each admitted event's time read from the
store (its score in the root's sliding log: Redis ``TIME`` inside the admission script):

- no level, value or rule is ever over its count in any window, and under reserves the
  overflow (per class, admissions beyond its reserved slots, plus every event of no class)
  never exceeds the shared slots;
- every refusal names a level, the event's value there and a rule that was full for the
  event's class at some instant between its request and its answer (a reserve with free
  slots would have admitted it: so reserves are honoured);
- ``/v1/stats`` (totals, per category, per level value) and Slack agree with the answers,
  and each admitted event reached its routed channel once.

The model routes events itself (anchored regular expressions, the first route wins) and
knows the tree from the same YAML the gateways read.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction

import redis
import yaml
from fleet import Fleet
from helpers import wait_for
from slack_standin import TOKEN

TREE = """
levels:
  - name: global
    rules: 40/2s,90/20s
    reserves: {critical: 10%, "channel=#deploys": 20%}
  - name: channel
    key: channel
    rules: 16/2s,40/20s
    values: {"#deploys": "20/2s,50/20s"}
    reserves: {critical: 25%}
  - name: team
    key: field:team
    rules: 12/2s,30/20s
  - name: category
    key: category
    rules: 5/2s,12/20s
    values: {error: "8/2s,20/20s"}
routes:
  - match: {category: "deploy.*"}
    channel: "#deploys"
  - match: {"field:team": db}
    channel: "#team-db"
  - match: {severity: critical}
    channel: "#incidents"
"""
DEFAULT_CHANNEL = "#alerts"
CATEGORIES = ["deploy", "deploy-web", "error", "db", "web", "cache", "queue", "auth"]
TEAMS = ["db", "web", "ops", None]
WAVES, WAVE_EVERY, PER_WAVE = 28, 0.25, 24  # about 7 s of traffic: every 2 s window slides
SLACK_US = 20_000  # tolerance between the test's clock and the store's, for refusal instants


@dataclass(frozen=True)
class Rule:
    count: int
    window_us: int


@dataclass
class Sent:
    body: dict
    status: int
    answer: dict
    sent_us: int  # the store's clock, estimated from ours
    answered_us: int


def rules(text: str) -> list[Rule]:
    units = {"s": 1_000_000, "m": 60_000_000}
    out = []
    for part in text.split(","):
        count, duration = part.split("/")
        out.append(Rule(int(count), int(duration[:-1]) * units[duration[-1]]))
    return out


class Model:
    """The contract's tree, routes and reserves, from the YAML alone."""

    def __init__(self, text: str) -> None:
        config = yaml.safe_load(text)
        self.levels = config["levels"]
        self.routes = config["routes"]

    def values(self, event: dict) -> list[str]:
        """The event's value at every level (the root's is empty), routing first."""
        keys = {"category": event["category"], "severity": event.get("severity", "info"), "status": "firing"}
        keys.update({f"field:{k}": v for k, v in event.get("fields", {}).items()})
        channel = next(
            (
                r["channel"]
                for r in self.routes
                if all(re.fullmatch(p, keys.get(k, "-")) for k, p in r["match"].items())
            ),
            DEFAULT_CHANNEL,
        )
        keys["channel"] = channel
        return [keys.get(level.get("key"), "-") if level.get("key") else "" for level in self.levels]

    def rules_of(self, level: int, value: str) -> list[Rule]:
        spec = self.levels[level]
        return rules(str(spec.get("values", {}).get(value, spec["rules"])))

    def reserves_of(self, level: int) -> list[tuple[str, Fraction]]:
        return [(name, Fraction(share.rstrip("%"))) for name, share in self.levels[level].get("reserves", {}).items()]

    def class_of(self, level: int, event: dict, values: list[str]) -> str | None:
        """``critical`` when reserved and critical, else the first LEVEL=VALUE it matches, else none."""
        reserves = [name for name, _ in self.reserves_of(level)]
        if event.get("severity") == "critical" and "critical" in reserves:
            return "critical"
        names = [spec["name"] for spec in self.levels]
        for name in reserves:
            level_name, _, value = name.partition("=")
            if value and values[names.index(level_name)] == value:
                return name
        return None


class Checker:
    """Each admitted event with its time and path; the level values' windows at any instant."""

    def __init__(self, model: Model, admitted: list[tuple[int, dict]]) -> None:
        self.model = model
        self.admitted = sorted(admitted, key=lambda item: item[0])
        self.paths = [model.values(event) for _, event in self.admitted]

    def in_window(self, level: int, value: str, rule: Rule, at: int) -> list[int]:
        """Indices of the admitted events of that level value in the window ending at ``at``."""
        return [
            i
            for i, (t, _) in enumerate(self.admitted)
            if at - rule.window_us < t <= at and self.paths[i][level] == value
        ]

    def state(self, level: int, value: str, rule: Rule, at: int) -> tuple[Counter, int, int]:
        """Per class the events in the window, the overflow beyond the reserves, and the shared slots."""
        reserves = self.model.reserves_of(level)
        slots = {name: int(share * rule.count // 100) for name, share in reserves}
        used: Counter = Counter()
        for i in self.in_window(level, value, rule, at):
            used[self.model.class_of(level, self.admitted[i][1], self.paths[i])] += 1
        overflow = used[None] + sum(max(0, n - slots[c]) for c, n in used.items() if c is not None)
        return used, overflow, rule.count - sum(slots.values())

    def refuses(self, level: int, value: str, rule: Rule, cls: str | None, at: int) -> bool:
        """True when the rule refuses an event of class ``cls`` at ``at`` (before any admission then)."""
        used, overflow, shared = self.state(level, value, rule, at)
        slots = {name: int(share * rule.count // 100) for name, share in self.model.reserves_of(level)}
        if cls is not None and used[cls] < slots[cls]:
            return False
        return overflow >= shared

    def check_windows(self) -> int:
        """No rule over its count, no overflow over the shared slots, at any admission instant."""
        checked = 0
        for level in range(len(self.model.levels)):
            for value in {path[level] for path in self.paths}:
                for rule in self.model.rules_of(level, value):
                    for t, _ in self.admitted:
                        used, overflow, shared = self.state(level, value, rule, t)
                        assert sum(used.values()) <= rule.count, (level, value, rule, t, used)
                        assert overflow <= shared, (level, value, rule, t, used, overflow, shared)
                        checked += 1
        return checked

    def justified(self, sent: Sent) -> bool:
        """The refusal names a level, the event's value there and a rule that refused its class at
        some instant between the request and its answer."""
        names = [spec["name"] for spec in self.model.levels]
        answer, event = sent.answer, sent.body
        level = names.index(answer["limit"])
        values = self.model.values(event)
        assert answer.get("value") == (values[level] if level else None), (answer, values)
        texts = self._texts(level, values[level])
        rule = self.model.rules_of(level, values[level])[texts.index(answer["rule"])]
        cls = self.model.class_of(level, event, values)
        lo, hi = sent.sent_us - SLACK_US, sent.answered_us + SLACK_US
        moments = {lo, hi} | {t for t, _ in self.admitted if lo <= t <= hi}
        moments |= {t + rule.window_us for t, _ in self.admitted if lo <= t + rule.window_us <= hi}
        moments |= {t + rule.window_us - 1 for t, _ in self.admitted if lo <= t + rule.window_us - 1 <= hi}
        return any(self.refuses(level, values[level], rule, cls, at) for at in sorted(moments))

    def _texts(self, level: int, value: str) -> list[str]:
        spec = self.model.levels[level]
        return str(spec.get("values", {}).get(value, spec["rules"])).split(",")


def events(rng: random.Random, wave: int) -> list[dict]:
    """One wave: mixed categories, teams and severities, some critical, some deploys."""
    out = []
    for i in range(PER_WAVE):
        event = {"category": rng.choice(CATEGORIES), "text": f"tree-{wave}-{i} happened"}
        team = rng.choice(TEAMS)
        if team:
            event["fields"] = {"team": team}
        if rng.random() < 0.2:
            event["severity"] = "critical"
        out.append(event)
    return out


def store_offset_us(client: redis.Redis) -> int:
    """The store's clock minus ours (us), from the fastest of a few samples."""
    best = None
    for _ in range(5):
        before = time.time()
        seconds, micros = client.time()
        after = time.time()
        sample = (after - before, seconds * 1_000_000 + micros - (before + after) / 2 * 1e6)
        best = sample if best is None or sample < best else best
    return int(best[1])


def fire(fleet: Fleet, batch: list[dict], offset_us: int) -> list[Sent]:
    def send(body: dict) -> Sent:
        sent = time.time()
        status, answer = fleet.post(body)
        return Sent(body, status, answer, int(sent * 1e6) + offset_us, int(time.time() * 1e6) + offset_us)

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(send, batch))


def test_a_four_level_tree_is_exact_for_a_skewed_fleet(redis_url, slack, tmp_path):
    config = tmp_path / "tree.yaml"
    config.write_text(TREE)
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": DEFAULT_CHANNEL,
        "NOTIFIER_CHANNEL_RATE": "1000/1s",
        "NOTIFIER_DIGEST_INTERVAL": "0",
        "NOTIFIER_CONFIG": str(config),
    }
    client = redis.Redis.from_url(redis_url)
    fleet = Fleet(env).start()
    try:
        offset = store_offset_us(client)
        rng, answers = random.Random(31), []
        started = time.monotonic()
        for wave in range(WAVES):
            answers += fire(fleet, events(rng, wave), offset)
            time.sleep(max(0.0, started + (wave + 1) * WAVE_EVERY - time.monotonic()))
        _check(fleet, client, slack, answers)
    finally:
        fleet.stop()
        client.close()


def _check(fleet: Fleet, client: redis.Redis, slack, answers: list[Sent]) -> None:
    model = Model(TREE)
    statuses = Counter(a.status for a in answers)
    assert set(statuses) == {202, 429}, statuses
    by_id = {a.answer["id"]: a.body for a in answers if a.status == 202}
    scores = dict(client.zrange("notifier:{notifier}:log:global", 0, -1, withscores=True))
    admitted = [(int(scores[event_id.encode()]), body) for event_id, body in by_id.items()]
    checker = Checker(model, admitted)
    windows_checked = checker.check_windows()
    refused = [a for a in answers if a.status == 429]
    unjustified = [(a.body, a.answer) for a in refused if not checker.justified(a)]
    assert unjustified == [], unjustified[:5]
    limits = Counter((a.answer["limit"], a.answer["rule"]) for a in refused)
    classes = Counter(model.class_of(0, e, model.values(e)) for _, e in admitted)
    print(
        f"tree: {len(answers)} sent, {len(admitted)} admitted {dict(classes)}, {len(refused)} refused "
        f"{dict(limits)}; {windows_checked} window checks"
    )
    assert {name for name, _ in limits} >= {"global", "channel", "category"}  # the test reached several levels
    _check_stats(fleet, model, answers)
    _check_slack(slack, model, checker)


def _check_stats(fleet: Fleet, model: Model, answers: list[Sent]) -> None:
    per_value: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for a in answers:
        values = model.values(a.body)
        outcome = "accepted" if a.status == 202 else "dropped"
        for spec, value in zip(model.levels[1:], values[1:], strict=True):
            per_value[(spec["name"], value)][outcome] += 1
    accepted = sum(a.status == 202 for a in answers)

    def settled() -> dict | None:
        stats = fleet.get("/v1/stats")
        return stats if stats["accepted"] + stats["dropped"] == len(answers) else None

    stats = wait_for(settled, 5, what="every decision in /v1/stats")
    assert (stats["accepted"], stats["dropped"]) == (accepted, len(answers) - accepted)
    got = {
        (level, value): Counter({k: n for k, n in counts.items() if n})
        for level, values in stats["by_level"].items()
        for value, counts in values.items()
    }
    assert got == {key: Counter({k: n for k, n in c.items() if n}) for key, c in per_value.items()}
    by_limit = Counter(a.answer["limit"] for a in answers if a.status == 429)
    assert {k: v for k, v in stats["dropped_by_limit"].items() if v} == dict(by_limit)


def _check_slack(slack, model: Model, checker: Checker) -> None:
    wanted = {event["text"].split()[0]: model.values(event)[1] for _, event in checker.admitted}
    marker = re.compile(r"tree-\d+-\d+")

    def arrived() -> list:
        found = [r for r in slack.received() if marker.search(r.text)]
        return found if len(found) >= len(wanted) else None

    received = wait_for(arrived, 30, what="every admitted event in Slack")
    time.sleep(0.5)  # a second delivery, if there were one, would arrive by now
    got = Counter(marker.search(r.text).group() for r in slack.received() if marker.search(r.text))
    assert got == Counter(wanted.keys()), "each admitted event once, and nothing else"
    for message in received:
        name = marker.search(message.text).group()
        assert message.channel == wanted[name], (name, message.channel, wanted[name])


def test_the_model_reads_the_tree_as_the_gateway_does():
    """The routes and classes of the model, checked by hand on a few events."""
    model = Model(TREE)
    deploy = {"category": "deploy-web", "severity": "critical", "fields": {"team": "db"}}
    assert model.values(deploy) == ["", "#deploys", "db", "deploy-web"]
    assert model.class_of(0, deploy, model.values(deploy)) == "critical"  # critical wins over channel=#deploys
    plain = {"category": "deploy", "fields": {"team": "web"}}
    assert model.class_of(0, plain, model.values(plain)) == "channel=#deploys"
    assert model.values({"category": "db", "fields": {"team": "db"}})[1] == "#team-db"
    assert model.values({"category": "db", "severity": "critical"}) == ["", "#incidents", "-", "db"]
    assert model.values({"category": "web"})[1] == DEFAULT_CHANNEL
    assert [r.count for r in model.rules_of(1, "#deploys")] == [20, 50]
