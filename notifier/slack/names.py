"""Slack users and channels by name: asked of Slack once, kept for the whole fleet a day.

The console shows ``U0123ABCD`` as ``dana (U0123ABCD)``. A name is asked of Slack
(``users.info``, ``conversations.info``) the first time any replica needs it and kept in the
store (``name:<id>``, a key that expires), so the fleet asks once a day per id, whoever
looks. An id Slack does not know is kept as unknown for an hour, so asking for it again
costs Slack nothing.

Ids come from clients, and every client is hostile: they are checked against Slack's id
shapes, and the fleet asks Slack at most :data:`ASKS_PER_MINUTE` names a minute (a counter
per minute in the store), so no reader can spend the bot token's rate limits, which the
messages need. A request waits at most :data:`WAIT` seconds for Slack; a name not back by
then is asked for again with a later request. None of this is on the admission path.

:class:`Names` asks the clients it is given (any :class:`Directory`), one per Slack workspace,
each in turn: ids are unique across workspaces, so the first that names an id names it, and an
id is kept as unknown only when every workspace refused it. The clients are asked for when a
name is missing, so a reload's workspaces are asked from then on.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from ..store.client import Store, as_text
from ..store.keys import Keys
from .workspaces import Workspace

SLACK_ID = re.compile(r"[UWCGD][A-Z0-9]{2,24}")  # users (U, W) and conversations (C, G, D)
KEEP_MS = 24 * 3600 * 1000  # a name is asked of Slack again after a day (people rename)
UNKNOWN_KEEP_MS = 3600 * 1000  # an id Slack refused: asked again after an hour
ASKS_PER_MINUTE = 30  # names the fleet asks of Slack a minute at most (users.info allows 100+)
WAIT = 2.0  # seconds a request waits for Slack's answers
UNKNOWN = ""  # kept for an id Slack does not name


class Directory(Protocol):
    """What :class:`Names` asks of Slack: slack-sdk's ``AsyncWebClient`` is one."""

    async def users_info(self, *, user: str) -> Any: ...

    async def conversations_info(self, *, channel: str) -> Any: ...


def directories(workspaces: Iterable[Workspace], session: aiohttp.ClientSession) -> list[Directory]:
    """A Web API client per Slack workspace, with its bot token ([] without one: ids shown alone)."""
    return [
        AsyncWebClient(
            token=w.bot_token,
            base_url=w.api_url.rstrip("/") + "/",
            session=session,
            timeout=int(WAIT),
            retry_handlers=[],
        )
        for w in workspaces
    ]


class Names:
    """Names of Slack ids, from the store or else from Slack (see the module's notes)."""

    def __init__(self, clients: Callable[[], Sequence[Directory]], store: Store, keys: Keys) -> None:
        self._clients, self._store, self._keys = clients, store, keys

    async def of(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The name of each id (``#name`` for a channel); None where it is not known (yet)."""
        wanted = [i for i in dict.fromkeys(ids) if SLACK_ID.fullmatch(i)]
        if not wanted:
            return {}
        raw = await self._store.call(self._store.redis.mget, [self._keys.name(i) for i in wanted])
        kept = {i: as_text(v) for i, v in zip(wanted, raw, strict=True) if v is not None}
        missing = [i for i in wanted if i not in kept]
        clients = self._clients() if missing else ()
        if clients:
            kept.update(await self._ask(clients, missing[: await self._allowed(len(missing))]))
        return {i: kept.get(i) or None for i in wanted}

    async def _allowed(self, wanted: int) -> int:
        """How many of ``wanted`` lookups this minute's fleet-wide budget leaves (taken from it)."""
        key = self._keys.names_asked(int(time.time() // 60))
        # Created with its expiry, then counted (INCRBY keeps it): the counter never lives on. A key
        # serves one minute and lives two, so it cannot expire between the two commands.
        pipe = self._store.redis.pipeline(transaction=False)
        pipe.set(key, 0, px=120_000, nx=True)
        pipe.incrby(key, wanted)
        _, total = await self._store.call(pipe.execute)
        return max(0, min(wanted, ASKS_PER_MINUTE - (int(total) - wanted)))

    async def _ask(self, clients: Sequence[Directory], ids: Sequence[str]) -> dict[str, str]:
        """Ask Slack for ``ids`` at once, keep what it answered within :data:`WAIT` seconds."""
        if not ids:
            return {}
        tasks = {asyncio.ensure_future(_first(clients, i)): i for i in ids}
        done, pending = await asyncio.wait(tasks, timeout=WAIT)
        for task in pending:
            task.cancel()  # asked again with a later request
        answered = {tasks[t]: t.result() for t in done if t.exception() is None}
        found = {slack_id: name for slack_id, name in answered.items() if name is not None}
        if found:
            await self._keep(found)
        return {i: name for i, name in found.items() if name}

    async def _keep(self, found: Mapping[str, str]) -> None:
        pipe = self._store.redis.pipeline(transaction=False)
        for slack_id, name in found.items():
            pipe.set(self._keys.name(slack_id), name, px=KEEP_MS if name else UNKNOWN_KEEP_MS)
        await self._store.call(pipe.execute)


async def _first(clients: Sequence[Directory], slack_id: str) -> str | None:
    """The first workspace's name for ``slack_id``; :data:`UNKNOWN` when every one refuses it; None
    when one did not answer and none named it (asked again later, not kept as unknown)."""
    answers = []
    for client in clients:
        answers.append(await _one(client, slack_id))
        if answers[-1]:
            return answers[-1]
    return None if None in answers else UNKNOWN


async def _one(client: Directory, slack_id: str) -> str | None:
    """Slack's name for one id; :data:`UNKNOWN` when Slack refuses it; None when Slack did not answer."""
    try:
        if slack_id[0] in "UW":
            return _user_name((await client.users_info(user=slack_id)).get("user") or {})
        channel = (await client.conversations_info(channel=slack_id)).get("channel") or {}
        return f"#{channel['name']}" if isinstance(channel.get("name"), str) and channel["name"] else UNKNOWN
    except SlackApiError as exc:  # user_not_found, channel_not_found, missing_scope: Slack names none
        busy = exc.response.status_code in (429, 500, 502, 503, 504) or exc.response.get("error") == "ratelimited"
        return None if busy else UNKNOWN  # busy: asked again later, not kept as unknown
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return None


def _user_name(user: Mapping[str, Any]) -> str:
    """The name Slack shows for a user: the display name, else the real name, else the handle."""
    profile = user.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    for name in (profile.get("display_name"), user.get("real_name"), profile.get("real_name"), user.get("name")):
        if isinstance(name, str) and name.strip():
            return name.strip()[:80]
    return UNKNOWN
