"""Where messages go: Slack (Web API or incoming webhook) or the console.

Every sink raises the same three errors, so the delivery worker decides what
to do without knowing which sink it talks to. slack-sdk's own retry handlers
are switched off: retries, backoff and 429 cooldowns are the worker's job,
shared across replicas through Redis.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from .settings import Settings

# Slack error codes worth trying again; anything else is the message's or the setup's fault.
TRANSIENT_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                    "request_timeout", "team_added_to_org"}


class DeliveryError(Exception):
    """Slack did not take the message."""


class RateLimited(DeliveryError):
    """Slack answered 429: wait ``retry_after`` seconds before the next call."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited for {retry_after}s")
        self.retry_after = retry_after


class Transient(DeliveryError):
    """A 5xx, a timeout or a broken connection: try again later."""


class Permanent(DeliveryError):
    """Slack refused the message for good (``channel_not_found``, ``invalid_auth``...)."""


@dataclass(frozen=True)
class Message:
    """One Slack message: a plain-text fallback and Block Kit blocks."""

    channel: str
    text: str
    blocks: list = field(default_factory=list)


def _retry_after(headers: object, default: float = 1.0) -> float:
    try:
        return max(float(headers.get("Retry-After")), 0.0)  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        return default


class SlackApiSink:
    """Posts with ``chat.postMessage`` using a bot token."""

    name = "slack_api"
    paced = True

    def __init__(self, settings: Settings, session: aiohttp.ClientSession) -> None:
        base_url = settings.slack_api_url.rstrip("/") + "/"
        self._client = AsyncWebClient(token=settings.slack_bot_token, base_url=base_url,
                                      session=session, timeout=10, retry_handlers=[])

    async def send(self, message: Message) -> None:
        try:
            await self._client.chat_postMessage(
                channel=message.channel, text=message.text, blocks=message.blocks or None,
                link_names=False, unfurl_links=False, unfurl_media=False)
        except SlackApiError as exc:
            data = exc.response.data  # a dict, or the raw text of a non-JSON error page
            error = str(data.get("error", "")) if isinstance(data, dict) else ""
            raise _classify(exc.response.status_code, exc.response.headers, error) from exc
        except (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from exc


class WebhookSink:
    """Posts to an incoming webhook (its channel is fixed by Slack)."""

    name = "slack_webhook"
    paced = True

    def __init__(self, settings: Settings, session: aiohttp.ClientSession) -> None:
        self._client = AsyncWebhookClient(settings.slack_webhook_url, session=session,
                                          timeout=10, retry_handlers=[])

    async def send(self, message: Message) -> None:
        try:
            response = await self._client.send(text=message.text, blocks=message.blocks or None,
                                               unfurl_links=False, unfurl_media=False)
        except (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise _classify(response.status_code, response.headers, response.body)


class ConsoleSink:
    """Prints each message to stdout: the default when no Slack credentials are set."""

    name = "console"
    paced = False  # stdout has no rate limit; print as soon as admitted

    async def send(self, message: Message) -> None:
        sys.stdout.write(f"[notifier -> {message.channel}] {message.text}\n")
        sys.stdout.flush()


def _classify(status: int, headers: object, error: str) -> DeliveryError:
    if status == 429 or error == "ratelimited":
        return RateLimited(_retry_after(headers))
    if status >= 500 or error in TRANSIENT_ERRORS:
        return Transient(f"HTTP {status} {error}".strip())
    return Permanent(error or f"HTTP {status}")


def make_sink(settings: Settings, session: aiohttp.ClientSession):
    """The sink the settings ask for: bot token, webhook, else the console."""
    if settings.slack_bot_token:
        return SlackApiSink(settings, session)
    if settings.slack_webhook_url:
        return WebhookSink(settings, session)
    return ConsoleSink()
