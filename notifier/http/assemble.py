"""What a configuration makes of a running replica: its admission and its destinations.

Built once at start (``app.gateway_ctx``) and again by every reload (``reload.py``),
from the same functions, so a reloaded replica is one that started with the new file.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import aiohttp

from ..admission.admit import Admission
from ..admission.fallback import Fallback
from ..admission.limiter import Limiter
from ..admission.overrides import Overrides
from ..config import Config
from ..destinations.registry import Sinks, build
from ..destinations.spec import Destination, destinations_of
from ..errors import StoreUnavailable
from ..metrics import Metrics
from ..policy import Policy
from ..settings import Settings
from ..store.audit import Audit
from ..store.client import Store
from ..store.keys import Keys
from ..store.scripts import Scripts


class Deciding(NamedTuple):
    """A configuration's admission: the limiter of its tree, the overrides on it, the fallback."""

    admission: Admission
    overrides: Overrides
    fallback: Fallback | None


class Sending(NamedTuple):
    """A configuration's destinations, and the sinks that post to them."""

    destinations: list[Destination]
    sinks: Sinks

    @property
    def clicks(self) -> bool:
        """True when a Slack workspace takes clicks (a signing secret, or Socket Mode)."""
        return any(d.signing_secret or d.app_token for d in self.destinations if d.kind == "slack")


class Parts(NamedTuple):
    """What every configuration's admission is built on: the store, the settings, the metrics, the audit."""

    store: Store
    scripts: Scripts
    keys: Keys
    settings: Settings
    metrics: Metrics
    audit: Audit


def sending(config: Config, settings: Settings, session: aiohttp.ClientSession) -> Sending:
    """The destinations of ``config`` (else the settings' one), their secrets read, and their sinks."""
    found = destinations_of(config.destinations, settings)
    return Sending(found, build(found, session, settings.channel_rate))


async def deciding(parts: Parts, config: Config, edits: bool) -> Deciding:
    """A limiter for the tree of ``config``, the overrides in force on it (read now if the store answers)."""
    store, scripts, keys, settings, metrics, audit = parts
    defaults = Policy.from_settings(settings, config)
    limiter = Limiter(store, scripts, keys, settings, defaults, edits=edits)
    overrides = Overrides(store, scripts, keys, defaults, limiter, metrics.overrides, audit)
    with contextlib.suppress(StoreUnavailable):  # else the watch reads them once the store answers
        await overrides.refresh()
    fail_open = settings.on_store_error == "fail_open"
    fallback = Fallback(settings, store, scripts, keys, metrics, limiter) if fail_open else None
    return Deciding(Admission(limiter, fallback, metrics.decisions), overrides, fallback)
