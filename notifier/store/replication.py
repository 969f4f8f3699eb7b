"""Writes that count only once N replicas hold them: commands, then ``WAIT`` on the same connection.

``WAIT N ms`` waits for the replication offset of the *connection's own last
write*. So every call here sends, in one pipeline (not a transaction, which
could not block): the commands, then a write of a marker key, then ``WAIT``.
The marker makes the guarantee independent of what the commands wrote:

* a script that wrote nothing (a ``duplicate`` that only read the alert's
  record) would leave the connection's offset wherever its previous write left
  it; after the marker, the offset is past everything the primary had when the
  script ran, the first event of that alert included (replication is one ordered
  stream), so a ``WAIT`` that reaches N covers it;
* an ``XREADGROUP`` that blocked and was served by another client's ``XADD``
  sets no offset of its own; the marker, queued behind it on the same
  connection, runs after it was served.

``WAITAOF 0 N ms`` (Redis 7.2+, Valkey) replaces ``WAIT`` where the server has it
and the primary itself keeps an append-only file (detected once per store): then
the replicas are taken to keep one too, and an acknowledgement means on disk.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

MARKER_VALUE = "1"


class Written(NamedTuple):
    """The replies of the commands, and how many replicas acknowledged them."""

    replies: list[Any]
    replicas: int


async def supports_waitaof(client: Any) -> bool:
    """True when the server has ``WAITAOF`` and keeps an append-only file itself."""
    try:
        await client.execute_command("WAITAOF", 0, 0, 0)  # met at once: nothing to wait for
    except ResponseError:  # unknown command (Redis before 7.2)
        return False
    persistence = await client.info("persistence")
    return bool(int(persistence.get("aof_enabled", 0)))


def wait_command(replicas: int, wait_ms: int, aof: bool) -> tuple[Any, ...]:
    """``WAIT`` (or ``WAITAOF``) for ``replicas``, at most ``wait_ms`` (never 0: that waits forever)."""
    wait_ms = max(1, wait_ms)
    return ("WAITAOF", 0, replicas, wait_ms) if aof else ("WAIT", replicas, wait_ms)


def acknowledged(reply: Any) -> int:
    """Replicas that acknowledged, from a ``WAIT`` (a count) or ``WAITAOF`` (local, replicas) reply."""
    return int(reply[1]) if isinstance(reply, list) else int(reply)


async def then_wait(client: Any, commands: list[tuple[Any, ...]], marker: str, wait: tuple[Any, ...]) -> Written:
    """Send ``commands``, the marker write and ``wait`` in one pipeline on one connection."""
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    pipe.execute_command("SET", marker, MARKER_VALUE)
    pipe.execute_command(*wait)
    replies = await pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return Written(replies[: len(commands)], acknowledged(replies[-1]))


async def script_then_wait(
    client: Any, script: AsyncScript, keys: list[str], args: list[Any], marker: str, wait: tuple[Any, ...]
) -> Written:
    """Run ``script`` (EVALSHA), then the marker and ``wait``; a server without the script gets it loaded.

    Scripts are not replicated: a restarted Redis, or a replica just promoted,
    answers NOSCRIPT, and the script did not run, so running it again is safe.
    """
    for _ in range(2):
        try:
            return await then_wait(client, [("EVALSHA", script.sha, len(keys), *keys, *args)], marker, wait)
        except NoScriptError:
            script.sha = await client.script_load(script.script)
    raise NoScriptError("the script could not be loaded")
