"""Where messages go: Slack (Web API or incoming webhook) or the console.

Every sink raises the same errors (``errors.DeliveryError`` and its kinds), so
the delivery worker decides what to do without knowing which sink it talks
to. slack-sdk's own retry handlers are switched off: retries, backoff and 429
cooldowns are the worker's job, shared across replicas through Redis.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from ..destinations.base import Message, Posted
from ..destinations.spec import Destination
from ..errors import DeliveryError, MessageGone, Permanent, RateLimited, Transient
from ..rules import Rule, Rules

# Slack error codes worth trying again; anything else is the message's or the setup's fault.
TRANSIENT_ERRORS = {
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
    "team_added_to_org",
}
GONE_ERRORS = {"message_not_found", "thread_not_found", "cant_update_message"}
_NETWORK = (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError)


class SlackApiSink:
    """Posts with ``chat.postMessage`` and edits with ``chat.update``, using a bot token."""

    name = "slack_api"
    paced = True
    edits = True
    threads = True

    def __init__(self, destination: Destination, session: aiohttp.ClientSession, rate: Rules) -> None:
        self.rate = destination.rate or rate
        token = destination.bot_token.get_secret_value() if destination.bot_token else None
        base_url = destination.api_url.rstrip("/") + "/"
        self._client = AsyncWebClient(token=token, base_url=base_url, session=session, timeout=10, retry_handlers=[])

    async def post(self, message: Message) -> Posted:
        answer = await self._call(
            self._client.chat_postMessage,
            **(
                {"channel": message.channel, **message.sent}
                if message.sent  # a front-door client's message: as sent
                else {
                    "channel": message.channel,
                    "text": message.text,
                    "blocks": message.blocks or None,
                    "thread_ts": message.thread_ts,
                    "link_names": False,
                    "unfurl_links": False,
                    "unfurl_media": False,
                }
            ),
        )
        return Posted(str(answer.get("channel") or message.channel), str(answer.get("ts") or ""))

    async def update(self, posted: Posted, message: Message) -> None:
        own = message.sent or {"text": message.text, "blocks": message.blocks or [], "link_names": False}
        await self._call(self._client.chat_update, channel=posted.channel_id, ts=posted.ts, **own)

    async def _call(self, method: Any, **kwargs: Any) -> Mapping[str, Any]:
        try:
            response = await method(**kwargs)
        except SlackApiError as exc:
            data = exc.response.data  # a dict, or the raw text of a non-JSON error page
            error = str(data.get("error", "")) if isinstance(data, dict) else ""
            raise _classify(exc.response.status_code, exc.response.headers, error) from exc
        except _NETWORK as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from exc
        return response.data if isinstance(response.data, dict) else {}


class WebhookSink:
    """Posts to an incoming webhook (its channel is fixed by Slack; no edits, no threads)."""

    name = "slack_webhook"
    paced = True
    edits = False
    threads = False

    def __init__(self, destination: Destination, session: aiohttp.ClientSession, rate: Rules) -> None:
        self.rate = destination.rate or rate
        url = destination.url.get_secret_value() if destination.url else ""
        self._client = AsyncWebhookClient(url, session=session, timeout=10, retry_handlers=[])

    async def post(self, message: Message) -> Posted:
        try:
            if message.sent:  # a front-door client's message: as sent (None: a field not given)
                response = await self._client.send_dict({k: v for k, v in message.sent.items() if v is not None})
            else:
                response = await self._client.send(
                    text=message.text, blocks=message.blocks or None, unfurl_links=False, unfurl_media=False
                )
        except _NETWORK as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise _classify(response.status_code, response.headers, response.body)
        return Posted(message.channel, "")

    async def update(self, posted: Posted, message: Message) -> None:
        raise Permanent("an incoming webhook cannot edit messages")


class ConsoleSink:
    """Prints each message to stdout: the default when no Slack credentials are set."""

    name = "console"
    paced = False  # stdout has no rate limit; print as soon as admitted
    edits = True  # edits and replies are printed as lines of their own
    threads = True
    rate: tuple[Rule, ...] = ()

    def __init__(self) -> None:
        self._serial = itertools.count(1)

    async def post(self, message: Message) -> Posted:
        ts = f"{int(time.time())}.{next(self._serial):06d}"
        reply = f" (reply to {message.thread_ts})" if message.thread_ts else ""
        self._print(f"[notifier -> {message.channel}]{reply} {message.text}")
        return Posted(message.channel, ts)

    async def update(self, posted: Posted, message: Message) -> None:
        self._print(f"[notifier -> {posted.channel_id}] (edit of {posted.ts}) {message.text}")

    @staticmethod
    def _print(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _retry_after(headers: Any, default: float = 1.0) -> float:
    try:
        return max(float(headers.get("Retry-After")), 0.0)
    except (TypeError, ValueError, AttributeError):
        return default


def _classify(status: int, headers: Any, error: str) -> DeliveryError:
    if status == 429 or error == "ratelimited":
        return RateLimited(_retry_after(headers))
    if status >= 500 or error in TRANSIENT_ERRORS:
        return Transient(f"HTTP {status} {error}".strip())
    if error in GONE_ERRORS:
        return MessageGone(error)
    return Permanent(error or f"HTTP {status}")
