"""The Slack stand-in's identities (token, team, app, bot, the webhook's channel), channel ids and ``ts`` values.

A channel name (``#alerts`` or ``alerts``) is answered with a stable id (``C`` and 10 uppercase
alphanumerics derived from the name); an id (``C``/``G``/``D`` + 8 or more uppercase alphanumerics)
is kept. ``ts`` values are ``"%d.%06d"``. Used by ``slack_standin.py`` and the modules it is split into.
"""

from __future__ import annotations

import hashlib
import re

TOKEN = "xoxb-test-token"
TEAM_ID = "T0STANDIN0"
APP_ID = "A0STANDIN0"
BOT_ID = "B0STANDIN0"
BOT_USER_ID = "U0STANDIN0"
WEBHOOK_CHANNEL_ID = "C0WEBHOOK00"  # the channel Slack fixed for the incoming webhook

CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{8,}")
CHANNEL_NAME = re.compile(r"[a-z0-9_-]{1,80}")
TS = re.compile(r"\d+\.\d{6}")


def channel_id_for(channel: str) -> str:
    """The channel id Slack answers for ``channel`` (a name or an id); ``ValueError`` if neither."""
    if CHANNEL_ID.fullmatch(channel):
        return channel
    name = channel.removeprefix("#").lower()
    if not CHANNEL_NAME.fullmatch(name):
        raise ValueError(f"not a channel name or id: {channel!r}")
    number = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % 36**10
    digits = ""
    for _ in range(10):
        number, digit = divmod(number, 36)
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[digit] + digits
    return "C" + digits


def _ts(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds}.{fraction:06d}"
