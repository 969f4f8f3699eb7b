"""Posting JSON to a chat's webhook, and reading its answer the same way for every kind.

What an answer means is the contract's, for every webhook kind: a ``429`` pauses
the channel for as long as it says (Discord's ``retry_after`` in its body, or
``Retry-After``, else 30 s); ``401``, ``403`` and ``404`` are permanent (the hook was
deleted or its credentials are wrong), as is any other ``4xx`` (the payload was
refused); a ``5xx`` or a network error is tried again.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from ..errors import DeliveryError, Permanent, RateLimited, Transient

DEFAULT_PAUSE = 30.0  # seconds, when a 429 says nothing of how long
TIMEOUT = 10.0  # seconds for one call
REASON = 300  # characters of an answer's body kept in a dead letter's reason
_NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class Hook:
    """One webhook URL, called through the gateway's shared HTTP session."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self._session = session

    async def call(self, method: str, url: str, body: dict[str, Any], params: dict[str, str] | None = None) -> Any:
        """Send ``body`` as JSON; the answer's JSON (or text) when 2xx, else the kind of failure raised."""
        try:
            async with self._session.request(
                method, url, json=body, params=params, timeout=aiohttp.ClientTimeout(total=TIMEOUT)
            ) as response:
                text = await response.text(errors="replace")  # an error page in another charset is still an answer
                if response.status >= 300:
                    raise classify(response.status, response.headers.get("Retry-After"), text)
        except _NETWORK as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from exc
        return _json(text)


def classify(status: int, retry_after: str | None, body: str) -> DeliveryError:
    """The failure an answer of ``status`` means (see the module's docstring)."""
    if status == 429:
        return RateLimited(pause(retry_after, _json(body)))
    if status >= 500 and status != 501:  # 501: the server does not take webhooks at all (Mattermost's off)
        return Transient(f"HTTP {status}")
    return Permanent(f"HTTP {status}: {body[:REASON]}".rstrip(": "))


def pause(retry_after: str | None, body: Any) -> float:
    """Seconds a 429 asks for: a ``retry_after`` in its JSON body, else its ``Retry-After``, else 30.

    The body's comes first: Discord sends both, and its header is the body's seconds rounded up
    (``Retry-After: 1`` for ``"retry_after": 0.35``), a pause three times too long for a 2-second bucket.
    """
    for given in (body.get("retry_after") if isinstance(body, dict) else None, retry_after):
        try:
            seconds = float(given)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if seconds == seconds and 0 <= seconds < 86_400:  # not NaN, not absurd
            return seconds
    return DEFAULT_PAUSE


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text
