"""The fleet's Slack workspaces: which one a click comes from, and what it is signed with.

Each ``slack`` destination is one workspace (a bot token is one workspace's). At
start each replica asks Slack ``auth.test`` for every workspace's ``team.id``
(again until it answers, so a gateway starts with Slack down); a click's payload
names its team, and so its destination: it is verified with that workspace's
signing secret and applied there (the edit of the clicked message goes through
that workspace's token). A team the replica does not know yet is tried against
every signing secret: the one that verifies is the workspace.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from ..destinations.spec import Destination

log = logging.getLogger(__name__)
WAIT = 10  # seconds for one auth.test


class Workspace(NamedTuple):
    """One workspace: its destination's name, signing secret and app token (``""``: none)."""

    name: str
    signing_secret: str
    app_token: str
    bot_token: str
    api_url: str


class Workspaces:
    """Every ``slack`` destination's workspace, and the team id each answered."""

    def __init__(self, destinations: list[Destination], named: bool) -> None:
        self.named = named
        self.all = [_workspace(d) for d in destinations if d.kind == "slack" and d.bot_token]
        self._teams: dict[str, str] = {}  # team id -> destination name

    @property
    def known(self) -> bool:
        """True once every workspace's team id is known."""
        return len(set(self._teams.values())) >= len(self.all)

    def signers(self, team_id: str) -> list[Workspace]:
        """The workspaces a click from ``team_id`` may be signed by: its own, else every one with a secret."""
        signing = [w for w in self.all if w.signing_secret]
        own = [w for w in signing if self._teams.get(team_id) == w.name]
        return own or [w for w in signing if w.name not in self._teams.values()] or signing

    def channel(self, name: str, channel_id: str) -> str:
        """The channel id as the gateway keeps it: with its destination's name among several."""
        return f"{name}:{channel_id}" if self.named and name else channel_id

    async def learn(self, session: aiohttp.ClientSession) -> None:
        """Ask ``auth.test`` of each workspace whose team id is not known yet."""
        named = set(self._teams.values())
        for workspace in self.all:
            if workspace.name not in named:
                team = await _team_id(workspace, session)
                if team:
                    self._teams[team] = workspace.name


async def _team_id(workspace: Workspace, session: aiohttp.ClientSession) -> str:
    client = AsyncWebClient(
        token=workspace.bot_token,
        base_url=workspace.api_url.rstrip("/") + "/",
        session=session,
        timeout=WAIT,
        retry_handlers=[],
    )
    try:
        answer = await client.auth_test()
    except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError) as exc:
        log.warning(
            "Slack did not answer auth.test for %s (%s); asking again later", workspace.name, type(exc).__name__
        )
        return ""
    return str(answer.get("team_id") or "")


def _workspace(destination: Destination) -> Workspace:
    def reveal(secret: object) -> str:
        return str(secret.get_secret_value()) if hasattr(secret, "get_secret_value") else ""

    return Workspace(
        destination.name,
        reveal(destination.signing_secret),
        reveal(destination.app_token),
        reveal(destination.bot_token),
        destination.api_url,
    )
