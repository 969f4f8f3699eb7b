"""Each Slack workspace's links to this replica: its Socket Mode connection, and its team id."""

from __future__ import annotations

import asyncio
from functools import partial

import aiohttp

from ..slack.socket_mode import SocketMode
from ..slack.workspaces import Workspaces
from .actions import socket_click
from .state import Gateway


def socket_modes(gateway: Gateway, session: aiohttp.ClientSession) -> list[SocketMode]:
    """This replica's Socket Mode connections: one per workspace with an app token (clicks edit messages)."""
    clients = []
    for workspace in gateway.workspaces.all:
        if workspace.app_token:
            click = partial(socket_click, gateway, destination=workspace.name)
            clients.append(SocketMode(workspace.app_token, workspace.api_url, click, session))
    if clients:
        gateway.metrics.watch_socket_mode(lambda: all(client.connected for client in clients))
    return clients


async def learn_teams(workspaces: Workspaces, session: aiohttp.ClientSession) -> None:
    """Ask each workspace's team id until all answered (a click names its team: workspaces.py)."""
    pause = 1.0
    while not workspaces.known:
        await workspaces.learn(session)
        await asyncio.sleep(pause)
        pause = min(pause * 2, 60.0)


async def relink(gateway: Gateway, before: Workspaces, session: aiohttp.ClientSession) -> None:
    """After a reload: Socket Mode connections for the workspaces' app tokens now; the old ones are
    closed only when those changed (a click in flight is not cut for nothing). New teams are learnt."""
    if _links(gateway.workspaces) != _links(before):
        for client in gateway.socket_modes:
            await client.stop()
        gateway.socket_modes = socket_modes(gateway, session)
        for client in gateway.socket_modes:
            await client.start()
    asyncio.get_running_loop().create_task(learn_teams(gateway.workspaces, session))


def _links(workspaces: Workspaces) -> set[tuple[str, str, str]]:
    return {(w.name, w.app_token, w.api_url) for w in workspaces.all if w.app_token}
