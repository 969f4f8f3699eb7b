"""The Lua scripts: found once (installed package or source tree), registered with the client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redis.commands.core import AsyncScript

NAMES = (
    "admit",
    "pace",
    "settle",
    "digest",
    "limits",
    "requeue",
    "restore",
    "override",
    "edits",
    "mark",
    "ack",
    "timers",
    "window",
    "handover",
    "announce",
    "ts",
    "update",
    "note",
)


# Pieces a script starts with (Redis has no modules): lua/buckets.lua holds the sliding logs
# of one level value, lua/counts.lua the stats of outcomes.
PIECES = {"admit": ("buckets", "counts"), "limits": ("buckets",), "restore": ("counts",)}


def script_dir() -> Path:
    """Where the Lua scripts live: inside the installed package, else the source tree."""
    installed = Path(__file__).resolve().parent.parent / "lua"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "lua"


def script_source(name: str, folder: Path | None = None) -> str:
    """The source of script ``name`` as Redis runs it: its pieces, then the script itself."""
    folder = folder or script_dir()
    return "\n".join((folder / f"{part}.lua").read_text() for part in (*PIECES.get(name, ()), name))


class Scripts:
    """The Lua scripts, read once and run through redis-py's EVALSHA/NOSCRIPT handling."""

    admit: AsyncScript
    pace: AsyncScript
    settle: AsyncScript
    digest: AsyncScript
    limits: AsyncScript
    requeue: AsyncScript
    restore: AsyncScript
    override: AsyncScript
    edits: AsyncScript
    mark: AsyncScript
    ack: AsyncScript
    timers: AsyncScript
    window: AsyncScript
    handover: AsyncScript
    announce: AsyncScript
    ts: AsyncScript
    update: AsyncScript
    note: AsyncScript

    def __init__(self, client: Any) -> None:
        folder = script_dir()
        for name in NAMES:
            setattr(self, name, client.register_script(script_source(name, folder)))
