"""Every key name of one deployment, and the fields of its stats hash.

Every key carries the hash tag ``{<prefix>}``, so all keys of a deployment live in
one Redis Cluster slot and each Lua call touches a single slot.
"""

from __future__ import annotations

import hashlib


class Keys:
    """Names of every key of one deployment, all in the slot of ``{prefix}``."""

    def __init__(self, prefix: str) -> None:
        self.base = base = f"{prefix}:{{{prefix}}}:"
        self.global_log = base + "log:global"
        self.outbox = base + "outbox"
        self.dead = base + "dead"
        self.stats = base + "stats"
        self.categories = base + "categories"
        self.digest_due = base + "digest:due"
        self.attempts = base + "attempts"
        self.cooldown_all = base + "cooldown:*"
        self.overrides = base + "overrides"
        self.overrides_version = base + "overrides:version"
        self.override_keys = [self.overrides, self.overrides_version]
        self.edits = base + "edits"
        self.edits_claimed = base + "edits:claimed"
        self.update_pace = base + "pace:*update"
        self.update_cooldown = base + "cooldown:*update"
        self.replicated = base + "replicated"  # written before each WAIT (store/replication.py)

    def category_log(self, category: str) -> str:
        return f"{self.base}log:cat:{category}"

    def class_log(self, class_id: str) -> str:
        """The log of one class of the global level (``none`` for events of no class)."""
        return f"{self.base}log:class:{class_id}"

    def record(self, category: str, dedup_key: str) -> str:
        """An alert's record: its first event, repeats, state and Slack message identity."""
        digest = hashlib.sha256(dedup_key.encode()).hexdigest()[:32]
        return f"{self.base}alert:{category}:{digest}"

    def message(self, channel_id: str, ts: str) -> str:
        """The record of a plain event message edited from Slack (a mute or unmute)."""
        return f"{self.base}msg:{channel_id}:{ts}"

    def suppressed(self, channel: str) -> str:
        return f"{self.base}digest:sup:{channel}"

    def pace(self, channel: str) -> str:
        return f"{self.base}pace:{channel}"

    def cooldown(self, channel: str) -> str:
        return f"{self.base}cooldown:{channel}"


class Stat:
    """Fields of the stats hash, shared by the fleet.

    The Lua scripts write them (``admit.lua``: accepted, dropped, duplicate,
    resolved and the per-category fields; ``settle.lua``: delivered,
    delivered_again, dead_lettered; ``requeue.lua``: requeued); the gateway
    reads them here only.
    """

    ACCEPTED = "accepted"
    DROPPED = "dropped"
    DUPLICATE = "duplicate"
    RESOLVED = "resolved"
    DELIVERED = "delivered"
    DELIVERED_AGAIN = "delivered_again"
    DEAD_LETTERED = "dead_lettered"
    REQUEUED = "requeued"
    PER_CATEGORY = (ACCEPTED, DROPPED)  # written as "<outcome>:<category>"

    @staticmethod
    def dropped_by(level: str) -> str:
        """Drops refused by ``level`` (``global`` or ``category``)."""
        return f"dropped_{level}"
