"""The stand-ins' rate windows: ``Throttled`` (a 429 to answer) and the sliding-window counts.

Windows slide; only accepted calls count (the stand-in records their times). The Slack stand-in
and the other chats' (``webhook_standin.py``) both count with these.
"""

from __future__ import annotations

import bisect
import math


class Throttled(Exception):
    """Slack would answer 429 with ``Retry-After: retry_after``."""

    def __init__(self, retry_after: int, channel_id: str = "") -> None:
        super().__init__(f"rate limited for {retry_after}s")
        self.retry_after, self.channel_id = retry_after, channel_id


# ---------------------------------------------------------------- rate windows


def wait(times: list[float], rate: tuple[int, float], now: float) -> int:
    """0 when ``times`` (sorted) hold fewer than ``count`` calls within the last ``seconds``, else the
    whole seconds (at least 1) until the oldest of those leaves the window."""
    count, seconds = rate
    first = bisect.bisect_right(times, now - seconds)
    if len(times) - first < count:
        return 0
    return max(1, math.ceil(times[len(times) - count] + seconds - now))


def _spend(times: list[float], rate: tuple[int, float] | None, now: float, channel_id: str = "") -> None:
    """Raise ``Throttled`` when ``times`` already hold ``count`` calls within the last ``seconds``."""
    left = wait(times, rate, now) if rate is not None else 0
    if left:
        raise Throttled(left, channel_id)


def max_in_window(times: list[float], seconds: float) -> int:
    """The most of ``times`` (sorted) within any window ``[t, t + seconds)``."""
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= seconds:
            start += 1
        best = max(best, end - start + 1)
    return best
