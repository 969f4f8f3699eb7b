"""fail_open's local limiter: the configured rules scaled to one replica, fair shares included."""

from __future__ import annotations

from builders import build_limiter

from notifier.admission.fallback import Fallback, LocalWindow, scaled
from notifier.metrics import Metrics
from notifier.models import ANONYMOUS, Decision, Event
from notifier.policy import Policy
from notifier.rules import parse_rules
from notifier.settings import load_settings
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect


def fallback(**overrides: object) -> tuple[Fallback, object]:
    settings = load_settings(digest_interval=0, on_store_error="fail_open", **overrides)
    limiter, store = build_limiter(settings, connect(None))
    return Fallback(settings, store, Scripts(store.redis), Keys("t"), Metrics(), limiter), limiter


async def done(local: Fallback, limiter: object) -> None:
    await limiter.flush()  # the refusals it counted reach the (embedded) store
    await local.close()


def admit(local: Fallback, policy: Policy, event: Event) -> Decision:
    return local.admit(event, policy.route(event, ANONYMOUS), ANONYMOUS, policy)


def outcomes(local: Fallback, policy: Policy, category: str, n: int, severity: str = "info") -> str:
    event = Event(category=category, text="x", severity=severity)
    return "".join(admit(local, policy, event).outcome.value[0] for _ in range(n))


async def test_reserves_hold_while_the_store_is_down():
    local, limiter = fallback(
        global_limit="10/1m", category_limit="100/1m", category_reserves={"payments": "20%"}, critical_reserve="10%"
    )
    policy = limiter.policy
    assert outcomes(local, policy, "noisy", 9) == "a" * 7 + "d" * 2  # 7 shared slots
    assert outcomes(local, policy, "payments", 3) == "aad"  # its 2 reserved slots
    assert outcomes(local, policy, "db", 2, "critical") == "ad"  # critical's 1
    refused = admit(local, policy, Event(category="payments", text="x"))
    assert (refused.level, refused.rule) == ("global", "10/1m") and 59 < refused.retry_after <= 60
    await done(local, limiter)


async def test_rules_are_scaled_to_one_replica_of_the_fleet():
    local, limiter = fallback(global_limit="10/1m", category_limit="3/1m", replicas=3)
    assert outcomes(local, limiter.policy, "a", 2) == "ad"  # per category ceil(3 / 3) = 1
    assert outcomes(local, limiter.policy, "b", 1) + outcomes(local, limiter.policy, "c", 1) == "aa"
    assert outcomes(local, limiter.policy, "d", 2) == "ad"  # 4 of ceil(10 / 3) = 4 global slots
    assert outcomes(local, limiter.policy, "e", 1) == "d"
    await done(local, limiter)


def test_a_muted_level_stays_muted():
    [rule] = scaled(parse_rules("0/1h"), 4)
    assert (rule.limit, rule.text) == (0, "0/1h")
    window = LocalWindow([rule])
    assert window.wait(100.0) == (3600.0, "0/1h")


TREE = """
levels:
  - {name: global, rules: 100/1m}
  - {name: channel, key: channel, rules: 3/1m, reserves: {critical: 34%}}
  - {name: category, key: category, rules: 10/1m}
routes:
  - {match: {category: "db.*"}, channel: "#db"}
"""


async def test_a_tree_holds_while_the_store_is_down_and_every_level_counts_the_hand_over():
    import yaml

    from notifier.config import parse_config

    settings = load_settings(digest_interval=0, on_store_error="fail_open", slack_channel="#alerts")
    limiter, store = build_limiter(settings, connect(None), parse_config(yaml.safe_load(TREE)))
    keys = Keys("notifier")
    local = Fallback(settings, store, Scripts(store.redis), keys, Metrics(), limiter)
    policy = limiter.policy
    assert outcomes(local, policy, "db-1", 3) == "aad"  # #db: 3 - 1 reserved for critical = 2 shared
    refused = admit(local, policy, Event(category="db-2", text="x"))
    assert (refused.level, refused.value, refused.rule) == ("channel", "#db", "3/1m")
    assert outcomes(local, policy, "db-2", 2, "critical") == "ad"  # the critical reserve: 1 slot
    assert outcomes(local, policy, "web", 2) == "aa"  # another channel, its own budget
    assert await local.drain() == 5  # the store answers (it always did, here): handed over
    client = store.redis
    assert await client.zcard(keys.bucket_log("global", "")) == 5
    assert await client.zcard(keys.bucket_log("channel", "#db")) == 3
    assert await client.zcard(keys.class_log("channel", "#db", "critical")) == 1
    assert await client.zcard(keys.bucket_log("category", "db-1")) == 2
    await done(local, limiter)
    stats = await client.hgetall(keys.stats)
    assert int(stats[b"accepted"]) == 5 and int(stats[b"level:channel:accepted:#db"]) == 3
    assert int(stats[b"level:channel:dropped:#db"]) == 3  # the three refusals, counted once the store answers
