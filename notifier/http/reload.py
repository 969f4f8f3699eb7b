"""Reload: the configuration file read again without a restart, and swapped in whole.

On ``SIGHUP``, on ``POST /v1/reload`` and within seconds of the file changing on disk
(its content is compared, so a Kubernetes ConfigMap's swap of a symlink counts), the
file is read and checked as at start (templates compiled too). A file with problems
changes nothing: each problem is logged as ``check-config`` prints it, counted in
``notifier_config_reload_failures_total`` and shown as ``config_error`` in ``/healthz``
until a good file is read.

A good file is built into a new admission (limiter, overrides, fallback: ``assemble``)
and new destinations, then swapped in: a request in flight keeps the admission it
started with, so it is decided under one configuration, never half of each; the old
limiter finishes its queue under its own tree. Tokens, templates, destinations and
Slack's Socket Mode connections follow. Buckets live in the store by level name and
value: a level that keeps its name keeps its counts. One reload at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from pathlib import Path

import aiohttp
from aiohttp import web

from ..admission.fallback import Fallback
from ..config import Config, fingerprint, load_config
from ..delivery.worker import Delivery
from ..errors import ConfigError
from ..slack.templates import Templates
from ..slack.workspaces import Workspaces
from ..store.audit import Change
from .answers import ApiError, json_response
from .assemble import Parts, deciding, sending
from .auth import CALLER, Tokens
from .slack_links import relink
from .state import Gateway

log = logging.getLogger(__name__)

WATCH_EVERY = 2.0  # seconds between two looks at the file: a change is in force within 10 s


class Reloader:
    """Reads the configuration file again and swaps what it makes into the running replica."""

    def __init__(
        self,
        gateway: Gateway,
        parts: Parts,
        session: aiohttp.ClientSession,
        delivery: Delivery,
        templates: Templates,
        tokens: Tokens,
        config: Config,
    ) -> None:
        self._gateway, self._parts, self._session = gateway, parts, session
        self._delivery, self._templates, self._tokens = delivery, templates, tokens
        self.config = config
        self.path = parts.settings.config
        self._seen = _content(self.path)
        self._lock = asyncio.Lock()
        self._retired: list[Fallback] = []  # their held events are still handed over when the store answers

    async def reload(self, by: str, via: str, request_id: str = "") -> str:
        """Read the file and swap it in; its fingerprint. :class:`ConfigError` (nothing changed) for problems."""
        async with self._lock:
            self._seen = _content(self.path)
            try:
                config = await self._read()
            except ConfigError as exc:
                self._failed(exc.problems)
                raise
            before = self._parts.metrics.config
            await self._swap(config)
            after = fingerprint(config, self._parts.settings)
            self._parts.metrics.running(after)
            self.config, self._gateway.config_error = config, []
            change = Change("reload", {"file": self.path or ""}, by, via, before, after)
            await self._parts.audit.record(change)
            log.info("configuration reloaded from %s (%s, by %s): %s", self.path, via, by, after)
            return after

    async def watch(self) -> None:
        """One look at the file: read it again when its content changed since it was last read."""
        if self.path and _content(self.path) != self._seen:
            await self.quietly("file", "file")

    async def quietly(self, by: str, via: str) -> None:
        """:meth:`reload`, its problems logged and counted (a signal or the file's change: nobody to answer)."""
        with contextlib.suppress(ConfigError):  # logged and counted by reload
            await self.reload(by, via)

    async def close(self) -> None:
        """Hand over what the retired fallbacks still hold (at shutdown)."""
        for fallback in self._retired:
            await fallback.close()

    async def _read(self) -> Config:
        if not self.path:
            raise ConfigError(["no configuration file to read (NOTIFIER_CONFIG is not set)"])
        config = await asyncio.to_thread(load_config, self.path, self._parts.settings)
        for warning in await Templates(config.templates).check(self.path) if config.templates else []:
            log.warning("%s", warning)
        return config

    def _failed(self, problems: list[str]) -> None:
        self._gateway.config_error = problems
        self._parts.metrics.reload_failures.inc()
        for problem in problems:
            log.error("reload: %s (the configuration in force is kept)", problem)

    async def _swap(self, config: Config) -> None:
        gateway, settings = self._gateway, self._parts.settings
        outlets = sending(config, settings, self._session)
        decided = await deciding(self._parts, config, outlets.sinks.any_edits)
        old = gateway.admission
        gateway.admission, gateway.overrides = decided.admission, decided.overrides
        if old.fallback is not None:
            self._retired.append(old.fallback)
        asyncio.get_running_loop().create_task(old.limiter.flush())  # its queue, under its own tree
        before, gateway.workspaces = gateway.workspaces, Workspaces(outlets.destinations, outlets.sinks.named)
        gateway.destinations = tuple(d.name for d in outlets.destinations)
        self._templates.reload(config.templates)
        self._delivery.reconfigure(outlets.sinks, outlets.clicks)
        self._tokens.reload(settings, config)
        await relink(gateway, before, self._session)


async def post_reload(request: web.Request) -> web.StreamResponse:
    """``POST /v1/reload`` (scope ``admin``): ``{"status": "reloaded", "config": SHA-256}``, or ``422``
    with the problems (nothing changed)."""
    reloader = request.app[RELOAD]
    await _empty(request)
    try:
        config = await reloader.reload(request[CALLER].name, "api", request.get("id", ""))
    except ConfigError as exc:
        raise ApiError(422, "the configuration file has problems; nothing changed", exc.problems) from exc
    return json_response({"status": "reloaded", "config": config})


async def _empty(request: web.Request) -> None:
    """A 422 for a body that is not empty or ``{}``: nothing is taken from it."""
    raw = await request.read()
    if raw.strip() not in (b"", b"{}"):
        raise ApiError(422, "POST /v1/reload takes no body (or {}): the configuration is the file's")


def _content(path: str | None) -> str:
    """The SHA-256 of the file's content ("" when there is none, or it cannot be read now)."""
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


RELOAD = web.AppKey("reload", Reloader)
