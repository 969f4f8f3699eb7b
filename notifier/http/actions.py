"""``POST /v1/slack/actions``: the mute, unmute, acknowledge and unacknowledge buttons of Slack messages.

Slack posts a click as ``application/x-www-form-urlencoded`` with a ``payload``
field holding a ``block_actions`` JSON, signed with the app's signing secret.
slack-sdk's ``SignatureVerifier`` checks the signature and refuses a timestamp
more than 5 minutes away: ``401``, nothing changes. A request it cannot read, an
action it does not know, a control whose seal the gateway did not make (a button
a client planted in a message it sent through a front door: ``slack.controls``) or
a mute duration NOTIFIER_MUTE_CHOICES does not offer is ``400``, and changes
nothing. Clicks over Socket Mode go through the same :func:`act`. A valid click answers ``200`` at once:
the mute (or unmute) is an override like ``PUT /v1/limits`` (who clicked is its
author), and the clicked message is edited through the fleet's edit budget to
say who muted what until when, with the button that lifts it. An ``Acknowledge``
click records who and when in the alert's record (``http.alerts``), whose edit
shows it; on a message whose alert is gone (past its window, or resolved) it
changes nothing but a line on the message saying so.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, NamedTuple
from urllib.parse import parse_qs

from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from ..errors import InDoubt, StoreUnavailable
from ..policy import Target
from ..rules import parse_duration_ms, parse_rules
from ..settings import CATEGORY_RE
from ..slack.controls import ACK, LINK, MUTE, UNACK, UNMUTE, Named, unseal, unsealed_choice
from ..slack.messages import escape, is_state_block
from .alerts import SLACK, acknowledge
from .answers import ApiError, json_response
from .state import GATEWAY, Gateway

_SLACK_ID = re.compile(r"^[A-Z0-9]{1,32}$")  # users, channels: only these characters reach a message
_TS = re.compile(r"^\d{1,12}\.\d{1,9}$")
MESSAGE_RECORD_MS = 7 * 86_400_000  # how long a clicked message's record is kept for further clicks
# Slack sends the clicked message whole: the largest event's message is about 125 KB form-encoded,
# beyond the 64 KiB the other routes accept.
MAX_ACTION_BODY = 1 << 20
MAX_TOLD = 64  # reasons a Socket Mode click changed nothing, each logged once
_told: set[str] = set()
log = logging.getLogger(__name__)
# A line a click added to a message's text; an event's text cannot hold one ("<" is escaped).
_BANNER = re.compile(
    r"^(?:(?:Muted .+ until \d\d:\d\d UTC|Unmuted .+) by <@[A-Z0-9]{1,32}>|This alert is no longer open: .+)$"
)
GONE = "This alert is no longer open: nothing to acknowledge"  # a click on a message whose alert is gone


class Click(NamedTuple):
    """One click on a message's control, as read from Slack's payload."""

    action: str  # "mute", "unmute", "ack", "unack" or "link"
    category: str
    record: str  # the alert's record, "" for another message
    user: str
    channel_id: str
    ts: str
    message: dict[str, Any]  # the message as Slack showed it
    duration: str = ""  # how long a mute lasts: the choice clicked


async def post_action(request: web.Request) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    if not any(w.signing_secret for w in gateway.workspaces.all):
        raise ApiError(404, "Slack actions need NOTIFIER_SLACK_SIGNING_SECRET and NOTIFIER_SLACK_BOT_TOKEN")
    raw = await _read_body(request)
    stamp, signature = request.headers.get("X-Slack-Request-Timestamp"), request.headers.get("X-Slack-Signature")
    # The team the payload names only picks the secret to check it with; nothing in it is trusted before.
    for workspace in gateway.workspaces.signers(_team_named(raw)):
        if _signed(workspace.signing_secret, raw, stamp, signature):
            return json_response(await act(gateway, payload_of(raw), workspace.name))
    raise ApiError(401, "bad or stale Slack signature")


async def act(gateway: Gateway, payload: dict[str, Any], destination: str = "") -> dict[str, Any]:
    """Apply one click, posted to ``/v1/slack/actions`` or sent over Socket Mode alike; the answer's body.

    ``destination`` is the workspace the click came from (verified): the clicked message is
    edited there. A click it cannot read, or on a control the gateway did not make, raises a
    400 :class:`ApiError` and changes nothing; a store that does not answer, ``StoreUnavailable``.
    """
    click = await read_click(payload, gateway)
    click = click._replace(channel_id=gateway.workspaces.channel(destination, click.channel_id))
    if click.action == LINK:  # Slack opened the link; there is nothing to do here
        return {"status": "ok", "action": LINK}
    if click.action in (ACK, UNACK):
        return await _acknowledge(gateway, click)
    target = gateway.admission.limiter.policy.mute_target(click.category)
    if target is None:  # a message posted before the tree became the root alone
        return {"status": "nothing to mute", "action": click.action, "category": click.category}
    banner = await (_mute(gateway, click, target) if click.action == MUTE else _unmute(gateway, click, target))
    await _mark(gateway, click, banner)
    return {"status": "ok", "action": click.action, "category": click.category}


async def socket_click(gateway: Gateway, payload: dict[str, Any], destination: str = "") -> bool:
    """A click that came over Socket Mode, applied by :func:`act` as one posted here.

    True once it is recorded, or when there is nothing to record (a click the gateway cannot
    read, or on a control it did not make: logged once per reason); then its envelope is
    acknowledged. False when the store could not record it: the envelope is left
    unacknowledged, and Slack tells the user the click failed.
    """
    try:
        await act(gateway, payload, destination)
    except ApiError as exc:
        if exc.error not in _told and len(_told) < MAX_TOLD:
            _told.add(exc.error)
            log.warning("a Socket Mode click changed nothing: %s", exc.error)
    except (StoreUnavailable, InDoubt) as exc:
        log.warning("a Socket Mode click was not recorded (Slack will say it failed): %s", exc)
        return False
    return True


def _team_named(raw: bytes) -> str:
    """The team id an (unverified) payload names, or ``""``: it only picks the signing secret to check."""
    try:
        payload = json.loads(parse_qs(raw.decode()).get("payload", [""])[0])
        return str(payload["team"]["id"])
    except (ValueError, KeyError, TypeError, IndexError):
        return ""


async def _read_body(request: web.Request) -> bytes:
    """The raw body, up to ``MAX_ACTION_BODY`` (not the app's 64 KiB: Slack sends the whole message)."""
    if request.content_length is not None and request.content_length > MAX_ACTION_BODY:
        raise ApiError(413, f"body over {MAX_ACTION_BODY} bytes")
    body = bytearray()
    while chunk := await request.content.read(65536):
        body += chunk
        if len(body) > MAX_ACTION_BODY:
            raise ApiError(413, f"body over {MAX_ACTION_BODY} bytes")
    try:
        bytes(body).decode()
    except UnicodeDecodeError as exc:  # Slack's requests are UTF-8; the verifier reads them as such
        raise ApiError(400, "not a Slack request: the body is not UTF-8") from exc
    return bytes(body)


def _signed(secret: str, raw: bytes, timestamp: str | None, signature: str | None) -> bool:
    try:
        return SignatureVerifier(secret).is_valid(raw, timestamp, signature)
    except (ValueError, TypeError):  # a timestamp that is not a number; a signature not in ASCII
        return False


def payload_of(raw: bytes) -> dict[str, Any]:
    """The ``payload`` field of Slack's form, or a 400."""
    try:
        payload = json.loads(parse_qs(raw.decode(), strict_parsing=True)["payload"][0])
    except (ValueError, KeyError, IndexError) as exc:
        raise ApiError(400, f"not a Slack block_actions request: {type(exc).__name__}") from exc
    if not isinstance(payload, dict):
        raise ApiError(400, "not a Slack block_actions request: the payload is not an object")
    return payload


async def read_click(payload: dict[str, Any], gateway: Gateway) -> Click:
    """The click in Slack's payload, or a 400 saying what cannot be read or is not the gateway's."""
    try:
        action = payload["actions"][0]
        action_id = str(action["action_id"])
        if payload.get("type") == "block_actions" and action_id.startswith(LINK + ":"):
            return Click(LINK, "", "", "", "", "", {})
        named = await _named(gateway, str(action["block_id"]))
        click = Click(
            action_id,
            named.category,
            gateway.keys.record_of(named.category, named.digest) if named.digest else "",
            str(payload["user"]["id"]),
            str(payload["container"]["channel_id"]),
            str(payload["container"]["message_ts"]),
            payload.get("message") or {},
            await _duration(gateway, named, action) if action_id == MUTE else "",
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ApiError(400, f"not a Slack block_actions request: {type(exc).__name__}") from exc
    if payload.get("type") != "block_actions" or click.action not in (MUTE, UNMUTE, ACK, UNACK):
        raise ApiError(400, f"unknown action {click.action[:40]!r}")
    _check(click, gateway)
    return click


async def _named(gateway: Gateway, block_id: str) -> Named:
    """What a controls block names, when the fleet's key sealed it; else a 400.

    A seal that does not check is checked once more against the store's key, in case
    another replica made a new one (the store lost its data) since this one read it.
    """
    named = unseal(await gateway.control_key.get(), block_id)
    if named is None and await gateway.control_key.refresh():
        named = unseal(await gateway.control_key.get(), block_id)
    if named is None:
        raise ApiError(400, "not a control of this gateway")
    return named


async def _duration(gateway: Gateway, named: Named, action: dict[str, Any]) -> str:
    """The mute's duration a control gives (a select's option, else its button's ``for``), when sealed; else a 400."""
    if "selected_option" in action:
        value = str(action["selected_option"]["value"])
    else:
        value = str(json.loads(action["value"])["for"])
    duration = unsealed_choice(await gateway.control_key.get(), named, value)
    if duration is None:
        raise ApiError(400, "not a mute duration of this gateway")
    return duration


def _check(click: Click, gateway: Gateway) -> None:
    """A 400 unless every part of the click is one this gateway could have written."""
    if not (
        CATEGORY_RE.fullmatch(click.category)
        and _SLACK_ID.fullmatch(click.user)
        and _SLACK_ID.fullmatch(click.channel_id)
        and _TS.fullmatch(click.ts)
        and isinstance(click.message, dict)
    ):
        raise ApiError(400, "the action names no valid category, user, channel or message")
    if click.action == MUTE and click.duration not in gateway.settings.mute_choices:
        raise ApiError(400, f"the action names no mute duration offered ({click.duration[:20]!r})")
    if click.action in (ACK, UNACK) and not click.record:
        raise ApiError(400, "an acknowledgement names no alert")


async def _acknowledge(gateway: Gateway, click: Click) -> dict[str, Any]:
    """Record (or lift) the acknowledgement; the alert's edit shows it. A gone alert: say so, change nothing."""
    by = f"<@{click.user}>" if click.action == ACK else ""
    answer = await acknowledge(gateway, click.record, by, SLACK, f"slack:{click.user}")
    if answer is None:
        await _mark(gateway, click._replace(record=""), GONE, MUTE)
    return {"status": "ok" if answer else "gone", "action": click.action, "category": click.category, **(answer or {})}


async def _mute(gateway: Gateway, click: Click, target: Target) -> str:
    override = await gateway.overrides.put(
        target, parse_rules(f"0/{click.duration}"), parse_duration_ms(click.duration), f"slack:<@{click.user}>", SLACK
    )
    until = time.strftime("%H:%M UTC", time.gmtime((override.until_us or 0) / 1e6))
    return f"Muted {escape(click.category)} until {until} by <@{click.user}>"


async def _unmute(gateway: Gateway, click: Click, target: Target) -> str:
    await gateway.overrides.delete(target, f"slack:<@{click.user}>", SLACK)
    return f"Unmuted {escape(click.category)} by <@{click.user}>"


async def _mark(gateway: Gateway, click: Click, banner: str, button: str = "") -> None:
    """Queue the edit of the clicked message: the banner, and the button that undoes the click."""
    button = button or (UNMUTE if click.action == MUTE else MUTE)
    keys_, scripts, store = gateway.keys, gateway.scripts, gateway.store
    common = [banner, button, click.channel_id, click.ts]
    if click.record and await store.run(scripts.mark, [click.record, keys_.edits], [*common, "", "", "", ""]):
        return
    own = [b for b in click.message.get("blocks") or [] if isinstance(b, dict) and not is_state_block(b)]
    base = json.dumps([{k: v for k, v in b.items() if k != "block_id"} for b in own])
    lines = str(click.message.get("text", "")).split("\n")
    while lines and _BANNER.match(lines[-1]):  # the event's text, without what an earlier click added
        lines.pop()
    text = "\n".join(lines)
    await store.run(
        scripts.mark,
        [keys_.message(click.channel_id, click.ts), keys_.edits],
        [*common, base, text, click.category, MESSAGE_RECORD_MS],
    )
