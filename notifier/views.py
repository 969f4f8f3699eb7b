"""Read-only views of the shared state: ``/v1/stats`` and ``/v1/limits``."""

from __future__ import annotations

from .rules import Rule, rule_args
from .settings import Settings
from .store import Keys, Scripts, StoreUnavailable, as_text, run

MAX_CATEGORIES_SHOWN = 1000


async def stats_view(client, keys: Keys) -> dict:
    """Totals shared by all replicas, from the counters the admission script keeps."""
    try:
        raw = await client.hgetall(keys.stats)
    except Exception as exc:
        raise StoreUnavailable(str(exc)) from exc
    counts = {as_text(k): int(v) for k, v in raw.items()}
    by_category: dict[str, dict[str, int]] = {}
    for name, value in counts.items():
        outcome, _, category = name.partition(":")
        if category and outcome in ("accepted", "dropped"):
            by_category.setdefault(category, {"accepted": 0, "dropped": 0})[outcome] = value
    return {
        "accepted": counts.get("accepted", 0),
        "dropped": counts.get("dropped", 0),
        "dropped_by_limit": {"global": counts.get("dropped_global", 0),
                             "category": counts.get("dropped_category", 0)},
        "by_category": dict(sorted(by_category.items())),
        "duplicates": counts.get("duplicate", 0),
        "delivered": counts.get("delivered", 0),
        "delivered_again": counts.get("delivered_again", 0),
        "dead_lettered": counts.get("dead_lettered", 0),
    }


def _rule_view(rule: Rule, reply: list) -> dict:
    used, free_us, oldest_us = (int(v) for v in reply)
    return {"rule": rule.text, "limit": rule.count, "used": used,
            "remaining": max(0, rule.count - used),
            "available_in": round(free_us / 1e6, 3), "next_free_in": round(oldest_us / 1e6, 3)}


async def limits_view(client, scripts: Scripts, keys: Keys, settings: Settings) -> dict:
    """Per level and rule: used, remaining, when a slot is available and when the next one frees.

    ``available_in`` is 0 while the rule has room; ``next_free_in`` is when the
    oldest entry in its window leaves.
    """
    try:
        seen = {as_text(c) for c in await client.smembers(keys.categories)}
    except Exception as exc:
        raise StoreUnavailable(str(exc)) from exc
    categories = sorted(seen | set(settings.categories or ()) | set(settings.category_limits))
    categories = categories[:MAX_CATEGORIES_SHOWN]
    levels = [("global", settings.global_limit)] + [(c, settings.rules_for(c)) for c in categories]
    key_names = [keys.global_log] + [keys.category_log(c) for c in categories]
    args = [a for _, rules in levels for a in rule_args(rules)]
    replies = iter(await run(scripts.limits, key_names, args))
    views = {name: [_rule_view(rule, next(replies)) for rule in rules] for name, rules in levels}
    return {"global": views.pop("global"), "categories": views}
