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
    "history",
)


# Redis 7's script flags (the "#!lua flags=" line), so that the store's maxmemory holds for the
# gateway: a script without the line is never refused for memory, and wrote past the limit. With it,
# a script that may grow the store is refused (OOM) while the store is over maxmemory: admissions and
# changes answer "store full", nothing written. Delivery's scripts may run (allow-oom): they write a
# few bytes and settle frees whole outbox entries, so delivery goes on and frees memory. The
# embedded store (fakeredis) reads no such line and has no maxmemory: it gets none.
FLAGS = {
    "limits": "no-writes",
    **dict.fromkeys(("pace", "settle", "digest", "edits", "timers", "handover", "announce"), "allow-oom"),
}


# Pieces a script starts with (Redis has no modules): lua/buckets.lua holds the sliding logs
# of one level value, lua/counts.lua the stats of outcomes.
PIECES = {"admit": ("buckets", "counts"), "limits": ("buckets",), "restore": ("counts",)}


def script_dir() -> Path:
    """Where the Lua scripts live: inside the installed package, else the source tree."""
    installed = Path(__file__).resolve().parent.parent / "lua"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "lua"


def script_source(name: str, folder: Path | None = None, flags: bool = False) -> str:
    """The source of script ``name`` as Redis runs it: its flags' line (``flags``), its pieces, then the script."""
    folder = folder or script_dir()
    body = "\n".join((folder / f"{part}.lua").read_text() for part in (*PIECES.get(name, ()), name))
    return f"#!lua flags={FLAGS.get(name, '')}\n{body}" if flags else body


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
    history: AsyncScript

    def __init__(self, client: Any, flags: bool = False) -> None:
        """``flags``: declare each script's flags (Redis 7 and later; not the embedded store)."""
        folder = script_dir()
        for name in NAMES:
            setattr(self, name, client.register_script(script_source(name, folder, flags)))
