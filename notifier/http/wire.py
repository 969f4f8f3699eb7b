"""Answers written in one piece: every JSON answer, and a storm's 202s, 200s and 429s among them.

aiohttp writes a ``web.Response`` through a chain of Python steps: its headers are copied when it is
made, then checked one by one for cookies, compression, chunking, an empty body, ``Date``, ``Server``
and ``Connection``, serialised, buffered, and sent with the body. On a storm's request that chain is
more than all the gateway's own work, and beside the bare app on one core it was the largest
difference (``bench/RESULTS.md``, "Answers written in one piece": the storms at 0.83-0.93 of its
rate with it, 1.05-1.30 without, in the same hour).

An :class:`Answer` is a ``web.Response`` whose status line and fixed headers are bytes built once
per kind (a :class:`Head`, shared by every answer of that kind). To an HTTP/1.1 request it writes
them, ``Content-Length``, ``Date``, ``Server``, ``Connection: close`` when the client closes, and
the body, in one call of the request's writer: the bytes aiohttp writes, in its order
(``tests/unit/test_wire.py`` compares them). Anything else (HTTP/1.0, ``HEAD``, an application with
``on_response_prepare`` handlers, a cookie, compression or chunking asked for) takes aiohttp's own
way. An answer's headers are its head's, read-only: a handler that needs other headers makes
another head.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from aiohttp import hdrs, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import SERVER_SOFTWARE, HttpVersion11
from multidict import CIMultiDict, CIMultiDictProxy

_SERVER = f"Server: {SERVER_SOFTWARE}\r\n".encode()
_CLOSE = b"Connection: close\r\n"


@dataclass(frozen=True, slots=True)
class Head:
    """A kind of answer: its status, its fixed headers, and both as HTTP/1.1 bytes."""

    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    line: bytes  # the status line and the fixed headers, each ended by CRLF


def head(status: int, headers: Mapping[str, str]) -> Head:
    """The head of answers of ``status`` with ``headers`` (build it once and share it)."""
    if status < 200 or status in (204, 304):  # answers without a body: not written here
        raise ValueError(f"an answer of status {status} has no body")
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value or ":" in name:
            raise ValueError(f"header {name!r} cannot be written")
    reason = HTTPStatus(status).phrase
    fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    line = f"HTTP/1.1 {status} {reason}\r\n{fields}".encode()
    return Head(status, reason, CIMultiDictProxy(CIMultiDict(headers)), line)


class _Clock:
    """The whole second of the last ``Date`` line, and that line."""

    second, line = 0, b""


def _date() -> bytes:
    """The ``Date`` header's line, formatted once a second (as aiohttp does)."""
    now = int(time.time())
    if now != _Clock.second:
        _Clock.second, _Clock.line = now, f"Date: {formatdate(now, usegmt=True)}\r\n".encode()
    return _Clock.line


class Answer(web.Response):
    """An answer of ``head`` with ``body``, written in one piece (see the module's docstring)."""

    _zlib_executor_size = 4096  # web.Response's defaults, for compression (aiohttp's way)
    _zlib_executor = None

    def __init__(self, head: Head, body: bytes) -> None:
        # Not web.Response.__init__: it copies and checks the headers of every answer, which
        # the head has done once. What it would set is set here.
        self._state: dict[Any, Any] = {}
        self._head = head
        self._headers = head.headers  # type: ignore[assignment]  # read-only: the head's
        self._status, self._reason = head.status, head.reason
        self._body = body

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._eof_sent or self._payload_writer is not None or not self._in_one_piece(request):
            if self._headers is self._head.headers:  # aiohttp's way adds its own: a copy of the head's
                self._headers = CIMultiDict(self._head.headers)
            return await super().prepare(request)
        keep_alive = request.keep_alive if self._keep_alive is None else self._keep_alive
        self._keep_alive = keep_alive
        body = self._body
        assert isinstance(body, bytes)  # set by __init__
        length = b"Content-Length: %d\r\n" % len(body)
        ending = b"\r\n" if keep_alive else _CLOSE + b"\r\n"
        writer = request.writer
        await writer.write_eof(b"".join((self._head.line, length, _date(), _SERVER, ending, body)))
        self._eof_sent = True  # web.Response.write_eof, which the server calls next, then does nothing
        self._body_length = writer.output_size
        return writer

    def _in_one_piece(self, request: web.BaseRequest) -> bool:
        """Whether this answer to ``request`` is the one aiohttp would write from the head's bytes."""
        if request.version != HttpVersion11 or request.method == hdrs.METH_HEAD:
            return False
        if self._cookies or self._compression or self._chunked:
            return False
        return not (isinstance(request, web.Request) and request.app.on_response_prepare)
