"""Slack's ``users.info`` and ``conversations.info`` for the Slack stand-in: who a user id is, and the
name of a channel id, as slack-sdk asks them (``GET`` with the id in the query, the bot token in
``Authorization``).

Users are the ones a test adds (``standin.directory.add_user("U0DANA0001", "dana")``); any other is
``user_not_found``. A channel's name is known once the stand-in has answered its id for a name (a
message posted to ``#ops``), or once a test adds it; any other is ``channel_not_found``. Each call is
recorded in ``asked``, so a test sees that the gateway asks once for the fleet.

Answers follow https://docs.slack.dev/reference/methods/users.info and
https://docs.slack.dev/reference/methods/conversations.info (the fields the gateway reads and a few
beside them).
"""

from __future__ import annotations

import threading

from aiohttp import web


class Directory:
    """The workspace's users and channels by id, served under the stand-in's ``/api/``."""

    def __init__(self, token: str) -> None:
        self.token = token  # the bot token the stand-in takes
        self.users: dict[str, dict] = {}
        self.channels: dict[str, str] = {}  # id -> name, without the '#'
        self.asked: list[tuple[str, str]] = []  # (method, id) of every call
        self._lock = threading.Lock()

    def add_user(self, user_id: str, display_name: str, real_name: str = "") -> None:
        """A user of the workspace; Slack shows the display name, else the real name."""
        profile = {"display_name": display_name, "real_name": real_name or display_name}
        with self._lock:
            self.users[user_id] = {
                "id": user_id,
                "name": display_name.lower(),
                "real_name": real_name,
                "profile": profile,
            }

    def add_channel(self, channel_id: str, name: str) -> None:
        with self._lock:
            self.channels[channel_id] = name.removeprefix("#")

    def add_routes(self, app: web.Application) -> None:
        """Answer both methods (before the stand-in's catch-all for unknown methods)."""
        for method, handler in (("users.info", self._user), ("conversations.info", self._channel)):
            app.router.add_route("*", f"/api/{method}", handler)

    async def _user(self, request: web.Request) -> web.Response:
        wanted = await self._asked(request, "users.info", "user")
        if not isinstance(wanted, str):
            return wanted
        with self._lock:
            user = self.users.get(wanted)
        if user is None:
            return web.json_response({"ok": False, "error": "user_not_found"})
        return web.json_response({"ok": True, "user": user})

    async def _channel(self, request: web.Request) -> web.Response:
        wanted = await self._asked(request, "conversations.info", "channel")
        if not isinstance(wanted, str):
            return wanted
        with self._lock:
            name = self.channels.get(wanted)
        if name is None:
            return web.json_response({"ok": False, "error": "channel_not_found"})
        return web.json_response({"ok": True, "channel": {"id": wanted, "name": name, "is_channel": True}})

    async def _asked(self, request: web.Request, method: str, field: str) -> str | web.Response:
        """The id asked for, or Slack's answer to a call without the token or the id."""
        form = dict(await request.post()) if request.method == "POST" else {}
        given = request.headers.get("Authorization", "").removeprefix("Bearer ") or form.get("token")
        if given != self.token:
            return web.json_response({"ok": False, "error": "not_authed" if not given else "invalid_auth"})
        wanted = request.query.get(field) or form.get(field)
        if not wanted:
            return web.json_response({"ok": False, "error": f"{field}_not_found"})
        with self._lock:
            self.asked.append((method, str(wanted)))
        return str(wanted)
