"""Every key name of one deployment, and the fields of its stats hash.

Every key carries the hash tag ``{<prefix>}``, so all keys of a deployment live in
one Redis Cluster slot and each Lua call touches a single slot.
"""

from __future__ import annotations

import functools
import hashlib


def key_digest(dedup_key: str) -> str:
    """The last part of an alert's record key: 32 hex digits, whatever the key holds."""
    return hashlib.sha256(dedup_key.encode()).hexdigest()[:32]


class Keys:
    """Names of every key of one deployment, all in the slot of ``{prefix}``."""

    def __init__(self, prefix: str) -> None:
        self.base = base = f"{prefix}:{{{prefix}}}:"
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
        self.windows = base + "windows"  # maintenance windows; they share the overrides' version
        self.window_keys = [self.windows, self.overrides_version]
        self.edits = base + "edits"
        self.edits_claimed = base + "edits:claimed"
        self.update_pace = base + "slots:*update"
        self.update_cooldown = base + "cooldown:*update"
        # Open alerts: record key -> first seen (us), -> end of its window (us), and
        # dedup_key digest -> record key, for GET /v1/alerts and acknowledgements.
        self.alerts_open = base + "alerts:open"
        self.alerts_ends = base + "alerts:ends"
        self.alerts_index = base + "alerts:index"
        self.alert_keys = [self.alerts_open, self.alerts_ends, self.alerts_index]
        # Bumped by every resolution: replicas that answer repeats themselves read it with every call.
        self.alert_epoch = base + "alerts:epoch"
        self.timers = base + "timers"  # escalations due: record key -> due time (us)
        self.replicated = base + "replicated"  # written before each WAIT (store/replication.py)
        self.held_pairs = base + "held"  # (channel, window) pairs holding anything, by pair id
        self.ready = base + "ready"  # /readyz writes it: a store over maxmemory refuses the write
        self.control_key = base + "control-key"  # the secret that seals messages' controls (store/secret.py)
        self.sent_last = base + "sent:last"  # the last gateway ts given to a front-door client (us)
        self.audit = base + "audit"  # the audit log (stream, store/audit.py)

    @staticmethod
    @functools.lru_cache(maxsize=1024)  # per event of a held channel: the same few pairs
    def held_pair(channel: str, window: str, start_us: int) -> str:
        """The id of one (channel, window) pair: a window's stretch from ``start_us`` in one channel."""
        return hashlib.sha1(f"{channel}\n{window}\n{start_us}".encode()).hexdigest()[:24]

    def held(self, pair: str) -> list[str]:
        """The held store of one (channel, window) pair: summary, counts per category, latest, alerts.

        ``admit.lua`` names them the same way (``held_in``).
        """
        return [f"{self.held_pairs}:{pair}:{part}" for part in ("sum", "cats", "latest", "alerts")]

    def bucket_log(self, level: str, value: str) -> str:
        """The sliding log of one value of one level (the root's value is empty: ``log:global``)."""
        return f"{self.base}log:{level}:{_safe(value)}" if value else f"{self.base}log:{level}"

    def restored(self, event_id: str) -> str:
        """The mark of an event admitted in ``fail_open`` and handed over (``restore.lua``): once only."""
        return f"{self.base}restored:{event_id}"

    def class_log(self, level: str, value: str, class_id: str) -> str:
        """The log of one class (``none`` for events of no class) of one level value with reserves."""
        return f"{self.bucket_log(level, value)}|{_safe(class_id)}"

    def level_values(self, level: str) -> str:
        """The values of a level that stats name one by one (capped like categories)."""
        return f"{self.base}values:{level}"

    def record(self, category: str, dedup_key: str) -> str:
        """An alert's record: its first event, repeats, state and Slack message identity."""
        return self.record_of(category, key_digest(dedup_key))

    def record_of(self, category: str, digest: str) -> str:
        """An alert's record by its category and the digest of its key (as a control names it)."""
        return f"{self.base}alert:{category}:{digest}"

    def message(self, channel_id: str, ts: str) -> str:
        """The record of a plain event message edited from Slack (a mute or unmute)."""
        return f"{self.base}msg:{channel_id}:{ts}"

    def sent(self, ts: str) -> str:
        """The record of a front-door message by the gateway ts its client knows it by: who sent it,
        what became of it, where Slack put it, its latest update."""
        return f"{self.base}sent:{_safe(ts)}"

    def history(self, minute: int) -> str:
        """The snapshot of the outcome counters at the start of one minute (unix minutes; store/history.py)."""
        return f"{self.base}history:{minute}"

    def name(self, slack_id: str) -> str:
        """A Slack user's or channel's name, as Slack gave it, kept a while (slack/names.py)."""
        return f"{self.base}name:{slack_id}"

    def names_asked(self, minute: int) -> str:
        """How many names the fleet asked of Slack in one minute (unix minutes; slack/names.py)."""
        return f"{self.base}names:asked:{minute}"

    def suppressed(self, channel: str) -> str:
        return f"{self.base}digest:sup:{channel}"

    def pace(self, channel: str) -> str:
        """The last send slots of a channel (a channel value, or its Slack id: pacing.py)."""
        return f"{self.base}slots:{channel}"

    def update_pace_of(self, destination: str) -> str:
        """The edit budget's last slots of one destination (a Slack workspace) among several."""
        return f"{self.update_pace}:{destination}"

    def cooldown_of(self, destination: str) -> str:
        """A pause of a whole destination (several destinations; one: ``cooldown_all``)."""
        return f"{self.cooldown_all}:{destination}"

    def channel_ids(self) -> str:
        """Slack channel name -> id, learnt from Slack's answers to posts (pacing.py), per destination."""
        return f"{self.base}channel-ids"

    def cooldown(self, channel: str) -> str:
        return f"{self.base}cooldown:{channel}"


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:#@+-=")


def _safe(value: str) -> str:
    """A value as part of a key name: itself when short and plain, else ``~`` and a digest
    (values come from clients: a field may hold 1,000 characters, a newline, a ``|``)."""
    if len(value) <= 64 and _PLAIN.issuperset(value):
        return value
    return "~" + hashlib.sha256(value.encode()).hexdigest()[:32]


class Stat:
    """Fields of the stats hash, shared by the fleet.

    The Lua scripts write them (``admit.lua``: accepted, dropped, duplicate,
    resolved, reopened and the per-category fields; ``settle.lua``: delivered,
    delivered_again, dead_lettered, folded; ``requeue.lua``: requeued; ``timers.lua``:
    escalated); the gateway
    reads them here only.
    """

    ACCEPTED = "accepted"
    DROPPED = "dropped"
    DUPLICATE = "duplicate"
    RESOLVED = "resolved"
    REOPENED = "reopened"
    ESCALATED = "escalated"
    DELIVERED = "delivered"
    DELIVERED_AGAIN = "delivered_again"
    DEAD_LETTERED = "dead_lettered"
    FOLDED = "folded"
    REQUEUED = "requeued"
    PER_CATEGORY = (ACCEPTED, DROPPED)  # written as "<outcome>:<category>"
    PER_LEVEL = "level"  # written as "level:<level>:<outcome>:<value>"

    @staticmethod
    def dropped_by(level: str) -> str:
        """Drops refused by the level called ``level``."""
        return f"dropped_{level}"
