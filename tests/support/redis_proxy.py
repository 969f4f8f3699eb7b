"""A TCP proxy between the gateway and a redis-server that can lose the reply to one request.

The gateway connects to the proxy, the proxy to Redis; bytes pass unchanged. A test arms it
with a marker (bytes, e.g. an event's text) and a mode. The first request whose bytes carry
the marker is forwarded to Redis as usual, so Redis runs it; what happens to its reply is the
mode:

- ``hold``: the reply is kept for ``seconds``, then forwarded (a late reply: a busy host, a slow
  network); the gateway has given up by then;
- ``drop``: the reply and everything after it on that connection is thrown away (a reply lost
  in a failover; the connection stays open and silent);
- ``cut``: the connection is closed as the reply arrives (the request certainly ran).

``seen`` counts the requests that carried the marker, on any connection: a client that sends
one request twice shows here. ``refuse()`` closes every connection and refuses new ones
(``accept()`` lets them in again), for a store that is certainly unreachable.

The proxy runs an event loop of its own in a thread, like the Slack stand-in, so tests of
gateway processes and of in-process apps alike can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field

CHUNK = 65536


@dataclass(eq=False)  # kept in a set: compared by identity
class Link:
    """One client connection and its connection to Redis."""

    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    mode: str = ""  # set once this connection carried the marked request
    seconds: float = 0.0


class ReplyProxy:
    """``127.0.0.1:port`` -> ``127.0.0.1:target``, with :meth:`arm` to lose one reply."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.seen = 0
        self._marker = b""
        self._mode, self._seconds = "", 0.0
        self._refusing = False
        self._links: set[Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, port: int = 0) -> ReplyProxy:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._serve, "127.0.0.1", port))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._run(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def arm(self, marker: bytes, mode: str, seconds: float = 0.0) -> None:
        """Lose the reply to the next request that carries ``marker`` (``hold``, ``drop`` or ``cut``)."""
        assert mode in ("hold", "drop", "cut"), mode
        self._loop.call_soon_threadsafe(self._set, marker, mode, seconds)

    def count(self, marker: bytes) -> None:
        """Count the requests carrying ``marker`` in ``seen``, without losing any reply."""
        self._loop.call_soon_threadsafe(self._set, marker, "", 0.0)

    def refuse(self) -> None:
        """Close every connection and refuse new ones: the store is certainly unreachable."""
        self._refusing = True
        self._run(self._close_all())

    def accept(self) -> None:
        self._refusing = False

    def _set(self, marker: bytes, mode: str, seconds: float) -> None:
        self._marker, self._mode, self._seconds, self.seen = marker, mode, seconds, 0

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _close_all(self) -> None:
        for link in list(self._links):
            for writer in link.writers:
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.close()
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        link = Link([writer, upstream])
        self._links.add(link)
        pumps = [
            asyncio.ensure_future(self._requests(reader, upstream, link)),
            asyncio.ensure_future(self._replies(upstream_reader, writer, link)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for each in link.writers:
                each.close()
            self._links.discard(link)

    async def _requests(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter, link: Link) -> None:
        tail = b""
        while chunk := await reader.read(CHUNK):
            if self._marker and self._marker in tail + chunk:
                self.seen += 1
                if self._mode and not link.mode:
                    link.mode, link.seconds, self._mode = self._mode, self._seconds, ""
            tail = chunk[-len(self._marker) :] if self._marker else b""
            upstream.write(chunk)
            await upstream.drain()

    async def _replies(self, upstream: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link) -> None:
        while chunk := await upstream.read(CHUNK):
            if link.mode == "cut":
                return
            if link.mode == "drop":
                continue
            if link.mode == "hold":
                link.mode = ""
                await asyncio.sleep(link.seconds)
            with contextlib.suppress(ConnectionError):
                writer.write(chunk)
                await writer.drain()
