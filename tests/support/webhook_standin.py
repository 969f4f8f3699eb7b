"""What the stand-ins of chats' webhooks share: a server in a thread of its own, a log, scripted answers, a pace.

Each stand-in (``teams_standin.py``, ``google_chat_standin.py``) runs an aiohttp server on
127.0.0.1 in a thread and event loop of its own, as ``slack_standin.py`` does, so in-process tests
and gateway processes alike can post to it. It keeps:

- ``calls``: ``(time, status)`` of every request, refused ones too;
- ``received``: every accepted message (:class:`Received`), with its time and its body;
- ``refusals``: what the service would refuse on its own (over a size limit, malformed), with the
  reason (a test of a well-behaved sender asserts ``standin.refusals == []``);
- ``throttled``: ``(time, retry_after)`` of each 429 the pace answered (not in ``refusals``).

Answers can be scripted (:meth:`WebhookStandin.script`): ``(429, retry_after)`` (``retry_after``
None: no ``Retry-After``), ``(500,)``, ``(404,)``, any status; served in order before the
stand-in goes back to answering like the service. Content is checked before the pace, so a refused
message is recorded even when throttled; only accepted calls count against the pace, whose windows
slide (``rates``: ``(count, seconds)`` pairs, all enforced).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from served import Served
from slack_rates import max_in_window, wait


@dataclass
class Received:
    """One accepted message: when, its body as sent, and where the chat put it."""

    at: float
    body: dict
    name: str = ""  # the chat's id for it, where it gives one
    thread: str = ""  # the thread it is in, where the chat threads
    query: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """A message the stand-in refused on its own, as the service would."""

    at: float
    status: int
    reason: str
    body: Any = field(default=None, repr=False)


class Refused(Exception):
    """The service would answer ``status`` with ``answer`` (JSON) for this message."""

    def __init__(self, status: int, reason: str, answer: Any = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.answer = status, reason, answer


class WebhookStandin(Served):
    """The server, the logs, the script and the pace; a service's stand-in adds its routes and checks."""

    service = "webhook"

    def __init__(self, rates: tuple[tuple[int, float], ...] = ()) -> None:
        self.rates = rates
        self.calls: list[tuple[float, int]] = []
        self.received: list[Received] = []
        self.refusals: list[Refusal] = []
        self.throttled: list[tuple[float, int]] = []
        self._script: list[tuple] = []
        self._accepted: dict[str, list[float]] = {}  # accepted times, per paced scope (a webhook, a space)
        self._lock = threading.RLock()

    # -- scripting and reading

    def script(self, *answers: tuple) -> None:
        """Queue answers: ``(429, retry_after)``, ``(500,)``, ``(404,)``..., served before the usual ones."""
        with self._lock:
            self._script.extend(answers)

    def bodies(self) -> list[dict]:
        with self._lock:
            return [r.body for r in self.received]

    def max_in_window(self, seconds: float, scope: str | None = None) -> int:
        """Most accepted messages in any ``seconds``-long window (of one scope, or all)."""
        with self._lock:
            lists = [self._accepted.get(scope, [])] if scope is not None else list(self._accepted.values())
            return max_in_window(sorted(t for times in lists for t in times), seconds)

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    # -- answering (a subclass's handler calls these)

    def next_scripted(self) -> tuple | None:
        with self._lock:
            return self._script.pop(0) if self._script else None

    def log(self, status: int) -> None:
        with self._lock:
            self.calls.append((time.time(), status))

    def refuse(self, refused: Refused, body: Any) -> None:
        with self._lock:
            now = time.time()
            self.refusals.append(Refusal(now, refused.status, refused.reason, body))
            self.calls.append((now, refused.status))

    def spend(self, scope: str, now: float) -> int:
        """0 when a message to ``scope`` is within every rate (it is then counted), else the seconds to wait."""
        with self._lock:
            times = self._accepted.setdefault(scope, [])
            for rate in self.rates:
                left = wait(times, rate, now)
                if left:
                    self.throttled.append((now, left))
                    self.calls.append((now, 429))
                    return left
            times.append(now)
            return 0
