"""Every key the gateway writes has a bound (CONTRACT.md, "After an outage": Redis full).

Two gateway processes on one store go through a broad workload: plain events, alerts (repeats,
resolution, a reopening, an escalation, an acknowledgement), refusals with digests, the
front doors (webhook, chat.postMessage, chat.update of its own ts), an override, maintenance
windows (one handed over, one holding at the end), a dead letter. Then every key in Redis is
classified by the table below, which says how each kind of key is bounded. A key no pattern
matches is a kind nobody thought about; a key whose bound is a TTL but has none lives forever.

The table was built from lua/*.lua and notifier/store/keys.py. A kind with no bound at all would
be listed in UNBOUNDED, and the last test fails while it has one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis
from helpers import Gateway, RedisServer, http, slack_env, wait_for
from slack_standin import SlackStandin

TOKEN = "keys-Secret-4c2d"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PREFIX = "notifier:{notifier}:"

TTL = "TTL"  # PTTL > 0
STREAM_TRIMMED = "trimmed stream"  # XADD MAXLEN / XTRIM MINID where it is written
DRAINED = "drained stream"  # entries are XDEL'd once settled: at most the backlog
TIME_TRIMMED = "sorted set trimmed by time"  # every member leaves when its time comes
FIXED = "fixed"  # one key (or a fixed few) whose contents are capped or written by people only
CLAIMED = "drained by its claim"  # no TTL: emptied by the script that claims it, named in a due set


@dataclass(frozen=True)
class Kind:
    pattern: str
    bound: str
    how: str  # the script or module that bounds it


TABLE = [
    # The sliding logs of the limit tree: trimmed and PEXPIREd with every admission (buckets.lua add).
    Kind(r"log:[^|]+(\|.+)?", TTL, "buckets.lua add: ZREMRANGEBYSCORE + PEXPIRE the longest window"),
    # An alert's record: PEXPIRE its window (admit.lua record_admitted, reopen); a held one is
    # PERSISTed until its hand-over, which PEXPIREs it (handover.lua).
    Kind(r"alert:[^:]+:[0-9a-f]{32}", TTL, "admit.lua record_admitted/reopen, handover.lua"),
    Kind(r"sent:(?!last$).+", TTL, "admit.lua note_sent, note.lua, update.lua: PEXPIRE"),
    Kind(r"msg:[^:]+:.+", TTL, "mark.lua: PEXPIRE when created"),
    Kind(r"slots:.+", TTL, "pace.lua: PEXPIRE"),
    Kind(r"cooldown:.+", TTL, "delivery/pacing.py: SET PX"),
    Kind(r"ready", TTL, "http/ops.py: SET PX READY_LIFE_MS"),
    Kind(r"restored:.+", TTL, "restore.lua: SET NX PX"),
    Kind(r"history:[0-9]+", TTL, "history.lua: PEXPIRE 65 minutes when the minute is recorded"),
    Kind(r"name:[A-Z0-9]+", TTL, "slack/names.py: SET PX a day (an id Slack does not know: an hour)"),
    Kind(r"names:asked:[0-9]+", TTL, "slack/names.py: SET NX PX 2 minutes, then INCRBY"),
    Kind(r"outbox", DRAINED, "settle.lua: XACK + XDEL of each entry settled; consumers gone: group.prune"),
    Kind(r"audit", STREAM_TRIMMED, "store/audit.py: XADD MAXLEN + XTRIM MINID"),
    Kind(r"dead", STREAM_TRIMMED, "settle.lua: XADD MAXLEN NOTIFIER_DEAD_LETTERS_MAX; requeue.lua XDELs"),
    Kind(r"digest:due", TIME_TRIMMED, "digest.lua: ZREM when claimed (one member per channel)"),
    Kind(r"digest:sup:.+", CLAIMED, "digest.lua: DEL when its channel's digest is claimed"),
    Kind(r"edits", TIME_TRIMMED, "edits.lua: ZREM when claimed; a claim drops entries whose record expired"),
    Kind(r"edits:claimed", TIME_TRIMMED, "edits.lua: ZREM when done, back to edits when lapsed"),
    Kind(r"alerts:open", TIME_TRIMMED, "timers.lua sweep: ZREM once alerts:ends passes"),
    Kind(r"alerts:ends", TIME_TRIMMED, "timers.lua sweep"),
    Kind(r"alerts:index", TIME_TRIMMED, "timers.lua sweep, admit.lua closed: HDEL with alerts:ends"),
    Kind(r"timers", TIME_TRIMMED, "timers.lua: ZREM after the last step or once the record is gone"),
    Kind(r"attempts", FIXED, "settle.lua: HDEL of each settled entry's field"),
    Kind(r"channel-ids", FIXED, "delivery/channels.py: HSET only while under MAX_IDS fields"),
    Kind(r"stats", FIXED, "counts.lua: fields per category/value capped by NOTIFIER_MAX_CATEGORIES"),
    Kind(r"categories", FIXED, "counts.lua: SADD up to the cap"),
    Kind(r"values:.+", FIXED, "counts.lua: SADD up to the cap, one set per level"),
    Kind(r"overrides", FIXED, "override.lua: written by people; lapsed ones HDEL'd on the next put"),
    Kind(r"overrides:version", FIXED, "a counter"),
    Kind(r"windows", FIXED, "window.lua: written by people; ended ones forgotten after a day"),
    Kind(r"alerts:epoch", FIXED, "a counter"),
    Kind(r"held", FIXED, "handover.lua: SREM of each pair handed over"),
    Kind(r"held:[0-9a-f]{24}:(sum|cats|latest|alerts)", CLAIMED, "handover.lua: DEL when its window ends"),
    Kind(r"replicated", FIXED, "store/replication.py: one marker"),
    Kind(r"control-key", FIXED, "store/secret.py: SET NX once"),
    Kind(r"sent:last", FIXED, "ts.lua: one counter"),
]

# Kinds with no bound: they grow with traffic and never expire nor are trimmed. (The dead letters
# were one, until settle.lua trimmed them.)
UNBOUNDED: list[Kind] = []


def kind_of(key: str, table: list[Kind]) -> Kind | None:
    name = key.removeprefix(PREFIX)
    if name == key:
        return None
    return next((kind for kind in table if re.fullmatch(kind.pattern, name)), None)


@dataclass
class Scan:
    keys: dict[str, int] = field(default_factory=dict)  # key -> PTTL
    sizes: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # a stream -> entries its groups read, not settled
    unclaimed: list[str] = field(default_factory=list)  # kept for a claim, but nothing names them to claim
    held: set[str] = field(default_factory=set)  # alert records held by a window (no TTL until handed over)


SIZE = {"stream": "xlen", "zset": "zcard", "hash": "hlen", "set": "scard", "list": "llen", "string": "strlen"}


def scan(store: redis.Redis) -> Scan:
    found = Scan()
    for raw in store.scan_iter(count=1000):
        key = raw.decode()
        found.keys[key] = store.pttl(key)
        kind = store.type(key).decode()
        if kind == "none":  # gone since SCAN named it (expired, or a digest sent): as if never named
            del found.keys[key]
            continue
        found.sizes[key] = getattr(store, SIZE[kind])(key)
        if kind == "stream":
            found.pending[key] = sum(group["pending"] for group in store.xinfo_groups(key))
        name = key.removeprefix(PREFIX)
        if name.startswith("digest:sup:") and store.zscore(PREFIX + "digest:due", name[11:]) is None:
            found.unclaimed.append(key)
        if name.startswith("held:") and not store.sismember(PREFIX + "held", name.split(":")[1]):
            found.unclaimed.append(key)
        if name.startswith("held:") and name.endswith(":alerts"):
            found.held |= {member.decode() for member in store.smembers(key)}
    return found


def send(gateway: Gateway, body: dict) -> dict:
    status, answer, _ = gateway.post(body, headers=AUTH)
    assert status in (200, 202, 429), (status, answer)
    return answer


def workload(a: Gateway, b: Gateway, slack: SlackStandin) -> None:
    """Everything that writes a kind of key, across two replicas."""
    for i in range(12):  # plain events, and refusals: the category allows 5 a minute
        send((a, b)[i % 2], {"category": "ops", "text": f"plain {i}"})
    send(a, {"category": "db", "text": "disk", "dedup_key": "disk-1", "severity": "critical"})
    send(b, {"category": "db", "text": "disk again", "dedup_key": "disk-1", "severity": "critical"})
    send(a, {"category": "db", "text": "cpu", "dedup_key": "cpu-1", "severity": "warning"})
    wait_for(lambda: len(slack.received()) >= 7, 20, what="the first posts")
    send(b, {"category": "db", "text": "cpu ok", "dedup_key": "cpu-1", "status": "resolved"})
    send(a, {"category": "db", "text": "cpu again", "dedup_key": "cpu-1"})  # reopened
    assert http("POST", a.url + "/v1/alerts/disk-1/ack", {"by": "ann"}, AUTH)[0] == 200
    assert http("GET", b.url + "/v1/names?ids=U0ONCALL1,U0LEAD", headers=AUTH)[0] == 200  # asked of Slack, kept
    hook = http("POST", b.url + f"/services/T0/B0/{TOKEN}", {"text": "from a webhook"})
    assert hook[0] == 200, hook
    status, posted, _ = http("POST", a.url + "/api/chat.postMessage", {"channel": "#deploys", "text": "v1"}, AUTH)
    assert status == 200 and posted["ok"], posted
    wait_for(lambda: any(m.text == "v1" for m in slack.received()), 20, what="the front-door post")
    body = {"channel": posted["channel"], "ts": posted["ts"], "text": "v2"}
    status, updated, _ = http("POST", b.url + "/api/chat.update", body, AUTH)
    assert status == 200 and updated["ok"], updated
    mute = {"rules": "0/1h", "for": "1h"}
    assert http("PUT", a.url + "/v1/limits/category/noisy", mute, AUTH)[0] == 200
    time.sleep(1.5)  # the fleet reads overrides and windows within 1 s
    send(b, {"category": "noisy", "text": "muted"})
    slack.script(("error", "channel_not_found"))  # a permanent error: a dead letter
    send(a, {"category": "lost", "text": "never arrives"})
    windows(a, b)


def windows(a: Gateway, b: Gateway) -> None:
    """A window that ends (its held store handed over) and one still holding at the scan."""
    assert http("PUT", a.url + "/v1/windows/short", {"for": "3s", "categories": ["maint"]}, AUTH)[0] == 200
    assert http("PUT", a.url + "/v1/windows/long", {"for": "1h", "categories": ["held"]}, AUTH)[0] == 200
    time.sleep(1.5)
    send(b, {"category": "maint", "text": "held, then handed over"})
    send(a, {"category": "maint", "text": "an alert held", "dedup_key": "maint-1"})
    send(b, {"category": "held", "text": "held at the scan"})
    send(a, {"category": "held", "text": "an alert held at the scan", "dedup_key": "held-1"})


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> Iterator[list[Scan]]:
    """The keys right after the workload (digests and paces pending) and once it settled."""
    server, slack = RedisServer().start(), SlackStandin().start()
    env = slack_env(
        server.url,
        slack,
        NOTIFIER_API_TOKENS=TOKEN,
        NOTIFIER_GLOBAL_LIMIT="100/1m",
        NOTIFIER_CATEGORY_LIMIT="5/1m",
        NOTIFIER_DIGEST_INTERVAL="2s",
        NOTIFIER_CHANNEL_RATE="50/1s",
        NOTIFIER_ESCALATION='{"critical": ["1s <@U0ONCALL1>", "1h <@U0LEAD>"]}',
    )
    folder = str(tmp_path_factory.mktemp("keys"))
    gateways = [Gateway({**env, "NOTIFIER_REPLICA_ID": name}, log_dir=folder) for name in "ab"]
    store = redis.Redis.from_url(server.url)
    try:
        for gateway in gateways:
            gateway.start()
        workload(*gateways, slack)
        for i in range(3):  # refusals just before the first scan: their digest is still due then
            send(gateways[i % 2], {"category": "ops", "text": f"refused {i}"})
        during = scan(store)
        time.sleep(6)  # digests (2 s), the first escalation step (1 s), the short window's end (3 s)
        outputs = "".join(gateway.output() for gateway in gateways)
        assert "Traceback" not in outputs, outputs
        yield [during, scan(store)]
    finally:
        for gateway in gateways:
            gateway.stop()
        store.close()
        slack.stop()
        server.stop()


def test_every_key_has_a_known_bound(scans):
    for found in scans:
        unknown = [key for key in found.keys if not kind_of(key, TABLE + UNBOUNDED)]
        assert unknown == [], f"keys of no known kind: say how they are bounded in TABLE: {unknown}"
        ttl = [key for key in found.keys if (kind := kind_of(key, TABLE)) and kind.bound == TTL]
        no_ttl = [key for key in ttl if found.keys[key] <= 0 and key not in found.held]
        assert no_ttl == [], f"keys whose bound is a TTL but have none: {no_ttl}"


def test_streams_are_drained_and_claims_named(scans):
    for found in scans:
        for key in found.keys:
            kind = kind_of(key, TABLE)
            if kind and kind.bound == DRAINED:  # settled: nothing left but what is in flight
                assert found.sizes[key] <= found.pending[key] + 10, (key, found.sizes[key], found.pending[key])
        assert found.unclaimed == [], "kept for a claim, but no due set names them"


def test_the_workload_wrote_every_kind_it_should(scans):
    """A table nobody exercises proves nothing: the workload reaches these kinds."""
    seen = {kind.pattern for found in scans for key in found.keys if (kind := kind_of(key, TABLE + UNBOUNDED))}
    expected = [r"log:[^|]+(\|.+)?", r"alert:[^:]+:[0-9a-f]{32}", r"sent:(?!last$).+", r"slots:.+", r"outbox"]
    expected += [r"stats", r"categories", r"overrides", r"windows", r"held", r"timers", r"dead", r"ready"]
    expected += [r"held:[0-9a-f]{24}:(sum|cats|latest|alerts)", r"alerts:open", r"alerts:index", r"sent:last"]
    expected += [r"digest:due", r"digest:sup:.+", r"values:.+", r"alerts:ends", r"audit"]
    expected += [r"history:[0-9]+", r"name:[A-Z0-9]+", r"names:asked:[0-9]+"]
    assert [pattern for pattern in expected if pattern not in seen] == []


def test_no_key_without_a_bound(scans):
    assert [key for found in scans for key in found.keys if kind_of(key, UNBOUNDED)] == []
