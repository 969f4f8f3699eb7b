"""Run-time overrides: put and removed for the whole fleet, in force on every replica within a second.

An override lives in the shared store (``lua/override.lua``), so it holds for
every replica and survives their restarts. Each replica keeps a policy snapshot
with the overrides in force and reads it again when the store's override
version changes (checked every ``WATCH_EVERY``) or an override lapses. The
admission script also checks the version and the first lapse of the snapshot a
call was built under, and decides nothing under an old one: so once a change is
answered, no event anywhere is decided under the old rules, and a replica's
"level is full" knowledge never outlives the override it was learned under.

Every change is recorded in the audit log here, where it is applied, so no face (HTTP, CLI,
console, Slack) can forget it; the scripts hand back what was there before.

An override addresses one value of one level: in the store's hash its field is
``policy.override_field`` (a category's at the level named ``category`` keeps the
name it had before the tree, so timers.lua and stored overrides read it as before).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from prometheus_client import Counter

from ..errors import StoreUnavailable
from ..policy import CATEGORY, Override, Policy, Target, override_field, override_target
from ..rules import Rules, parse_rules, rules_text
from ..store.audit import Audit, Change
from ..store.client import Store, as_text
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..windows import MaintenanceWindow
from .limiter import Limiter

log = logging.getLogger(__name__)

WATCH_EVERY = 0.25  # seconds between two reads of the override version
CLOCK_EVERY = 5.0  # seconds between two samples of the store's clock


class Overrides:
    """The fleet's overrides, and this replica's policy snapshot kept in step with them."""

    def __init__(
        self,
        store: Store,
        scripts: Scripts,
        keys: Keys,
        defaults: Policy,
        limiter: Limiter,
        changes: Counter,
        audit: Audit,
    ) -> None:
        self._store, self._scripts, self._keys, self._audit = store, scripts, keys, audit
        self._defaults, self._limiter = defaults, limiter
        self._changes = changes  # notifier_override_changes_total{action, source}
        self._clock_at = 0.0
        limiter.reload = self.refresh

    async def load(self) -> Policy:
        """The defaults with the overrides in force now, as the store has them."""
        # The version first: a change landing between the two reads then pairs the older version
        # with the newer overrides, which admit.lua refuses as stale (so they are read again at
        # once); the other order would pair the newer version with the older overrides, which
        # admit.lua would accept until the next change.
        redis = self._store.redis
        version = await self._store.call(redis.get, self._keys.overrides_version)
        raw = await self._store.call(redis.hgetall, self._keys.overrides)
        raw_windows = await self._store.call(redis.hgetall, self._keys.windows)
        now_us = await self._store.server_time_us(self._keys.overrides)
        overrides = {}
        root = self._defaults.root.name
        for name, value in raw.items():
            override = _read(override_target(as_text(name), root), as_text(value))
            if override is not None and (override.until_us is None or override.until_us > now_us):
                overrides[override.target] = override
        windows = [read_window(as_text(name), as_text(value)) for name, value in raw_windows.items()]
        maintenance = {w.name: w for w in windows if w is not None and w.end_us > now_us}
        return self._defaults.with_overrides(overrides, int(version or 0), maintenance)

    async def refresh(self) -> None:
        """Read the overrides again and swap the snapshot if anything changed."""
        policy = await self.load()
        current = self._limiter.policy
        if policy.version != current.version or policy.overrides != current.overrides:
            self._limiter.policy = policy
            log.info("limits now in force: %s", _describe(policy.overrides) or "the settings' own")

    async def watch(self) -> None:
        """One step of the watch: the version changed, or an override lapsed, means read again."""
        monotonic = time.monotonic()
        if monotonic - self._clock_at > CLOCK_EVERY:
            await self._store.sync_clock(self._keys.overrides)
            self._clock_at = monotonic
        version = await self._store.call(self._store.redis.get, self._keys.overrides_version)
        policy = self._limiter.policy
        lapse = policy.earliest_until_us
        if int(version or 0) != policy.version or (lapse and self._store.store_time_us(monotonic) >= lapse):
            await self.refresh()

    async def put(self, target: Target, rules: Rules, for_ms: int | None, by: str, via: str = "api") -> Override:
        """Override a level value with ``rules`` (for ``for_ms``, else until removed); in force at once here."""
        field = override_field(target, self._defaults.root.name)
        until, _, before = await self._store.run(
            self._scripts.override, self._keys.override_keys, ["put", field, rules_text(rules), for_ms or 0, by]
        )
        override = Override(*target, rules, int(as_text(until)) if as_text(until) else None, by)
        after = {"rules": rules_text(rules), "until": iso_us(override.until_us)}
        await self._audit.record(
            Change("override.put", _audited(target), author(by), via, _override_audited(as_text(before)), after)
        )
        self._changes.labels("put", _source(by)).inc()
        log.info(
            "override of %s by %s: %s%s",
            describe(target),
            by,
            rules_text(rules),
            f" until {_when(override.until_us)}" if override.until_us else " until removed",
        )
        await self._refresh_now()
        return override

    async def delete(self, target: Target, by: str, via: str = "api") -> bool:
        """Remove the override of a level value; False when none was in force."""
        field = override_field(target, self._defaults.root.name)
        removed, _, before = await self._store.run(self._scripts.override, self._keys.override_keys, ["delete", field])
        if int(removed):
            change = Change("override.delete", _audited(target), author(by), via, _override_audited(as_text(before)))
            await self._audit.record(change)
            self._changes.labels("delete", _source(by)).inc()
            log.info("override of %s removed by %s", describe(target), by)
            await self._refresh_now()
        return bool(int(removed))

    async def put_window(self, window: MaintenanceWindow, for_us: int = 0, via: str = "api") -> MaintenanceWindow:
        """Open (or change) a maintenance window; a ``start_us`` of 0 is the store's now, an
        ``end_us`` of 0 is its start plus ``for_us``.

        ``ValueError`` (nothing changed) when its end is not after its start, or has passed.
        """
        args = [window.start_us, window.end_us, json.dumps(window.categories), json.dumps(window.channels)]
        reply = await self._store.run(
            self._scripts.window, self._keys.window_keys, ["put", window.name, *args, window.note, window.by, for_us]
        )
        if as_text(reply[0]) == "bad":
            raise ValueError(as_text(reply[1]))
        opened = replace(window, start_us=int(as_text(reply[1])), end_us=int(as_text(reply[2])))
        before = read_window(window.name, as_text(reply[4])) if as_text(reply[4]) else None
        target = {"window": window.name}
        change = Change("window.open", target, author(window.by), via, _window_audited(before), _window_audited(opened))
        await self._audit.record(change)
        log.info(
            "maintenance window %s by %s: %s to %s",
            opened.name,
            opened.by,
            _when(opened.start_us),
            _when(opened.end_us),
        )
        await self._refresh_now()
        return opened

    async def end_window(self, name: str, by: str, via: str = "api") -> int | None:
        """End a maintenance window now; when it ended (store clock, us), or None when none was open."""
        ended, end_us, *was = await self._store.run(self._scripts.window, self._keys.window_keys, ["end", name])
        if not int(ended):
            return None
        before = _window_audited(read_window(name, as_text(was[0])))
        after = {**before, "end": iso_us(int(as_text(end_us)))} if before else None
        await self._audit.record(Change("window.end", {"window": name}, author(by), via, before, after))
        log.info("maintenance window %s ended by %s", name, by)
        await self._refresh_now()
        return int(as_text(end_us))

    async def _refresh_now(self) -> None:
        try:
            await self.refresh()
        except StoreUnavailable as exc:  # the watch will read it within a second
            log.warning("could not read the overrides again: %s", exc)


def _source(by: str) -> str:
    """Where a change came from, for the metric: a Slack click, or the API (a token, or anyone)."""
    return "slack" if by.startswith("slack:") else "api"


def author(by: str) -> str:
    """An audit entry's author: the token's name, or ``slack:<user id>`` for a click (``slack:<@U1>``)."""
    if by.startswith("slack:<@") and by.endswith(">"):
        return "slack:" + by[len("slack:<@") : -1]
    return by


def iso_us(at_us: int | None) -> str | None:
    """A store time (us) as ISO 8601 UTC, for the audit log; None stays None (never)."""
    if at_us is None:
        return None
    return datetime.fromtimestamp(at_us / 1e6, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _audited(target: Target) -> dict[str, str]:
    return {"level": target[0], "value": target[1]}


def _override_audited(raw: str) -> dict[str, Any] | None:
    """An override as the store held it, for the audit log (rules, until, who made it); None: none."""
    if not raw:
        return None
    try:
        body = json.loads(raw)
        until = str(body.get("until") or "")
        return {
            "rules": str(body["rules"]),
            "until": iso_us(int(until) if until else None),
            "by": author(str(body.get("by", ""))),
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return {"unreadable": True}


def _window_audited(window: MaintenanceWindow | None) -> dict[str, Any] | None:
    """A window for the audit log: its span, what it holds, and the operator's note."""
    if window is None:
        return None
    return {
        "start": iso_us(window.start_us),
        "end": iso_us(window.end_us),
        "categories": list(window.categories),
        "channels": list(window.channels),
        "note": window.note,
    }


def describe(target: Target) -> str:
    """``global``, ``db`` (a category) or ``channel #incidents``, for log lines."""
    level, value = target
    if not value or level == CATEGORY:
        return value or level
    return f"{level} {value}"


def _read(target: Target, value: str) -> Override | None:
    try:
        body: Mapping[str, Any] = json.loads(value)
        until = str(body.get("until") or "")
        rules = parse_rules(str(body["rules"]))
        return Override(*target, rules, int(until) if until else None, str(body.get("by", "")))
    except (ValueError, KeyError, TypeError):
        log.error("override of %s cannot be read, ignored: %r", describe(target), value[:200])
        return None


def read_window(name: str, value: str) -> MaintenanceWindow | None:
    """A maintenance window as ``lua/window.lua`` stores it (None, logged, when it cannot be read)."""
    try:
        body: Mapping[str, Any] = json.loads(value)
        # Lua's JSON writer turns an empty list into {}: either is "none".
        return MaintenanceWindow(
            name,
            int(body["start"]),
            int(body["end"]),
            tuple(str(c) for c in body.get("categories") or ()),
            tuple(str(c) for c in body.get("channels") or ()),
            str(body.get("note", "")),
            str(body.get("by", "")),
        )
    except (ValueError, KeyError, TypeError):
        log.error("maintenance window %s cannot be read, ignored: %r", name, value[:200])
        return None


def _when(until_us: int | None) -> str:
    return "never" if until_us is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until_us / 1e6))


def _describe(overrides: Mapping[Target, Override]) -> str:
    return ", ".join(f"{describe(t)}={rules_text(o.rules)} until {_when(o.until_us)}" for t, o in overrides.items())
