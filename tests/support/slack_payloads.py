"""What Slack sends to an app's interactivity URL: ``block_actions`` payloads and signed requests.

For tests that click a message's buttons, selects and overflow menus as a user would.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from slack_ids import APP_ID, TEAM_ID
from slack_sdk.signature import SignatureVerifier

# ---------------------------------------------------------------- interactivity


def signed_action_request(secret: str, payload: dict, timestamp: float | None = None) -> tuple[bytes, dict]:
    """The body and headers Slack sends to an interactivity URL for ``payload``, signed with ``secret``.

    ``application/x-www-form-urlencoded`` with one field, ``payload`` (the JSON); ``X-Slack-Signature``
    is ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``.
    """
    stamp = str(int(time.time() if timestamp is None else timestamp))
    body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return body, headers


def _find_button(message: dict, action_id: str) -> tuple[str, dict]:
    """The ``block_id`` of the block holding the button ``action_id``, and the button itself."""
    for block in message.get("blocks") or []:
        candidates = (block.get("elements") or []) if block.get("type") == "actions" else [block.get("accessory")]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    return "", {}


def block_actions_payload(
    action_id: str,
    value: str | None,
    user_id: str,
    channel_id: str,
    message_ts: str,
    message: dict,
    *,
    username: str = "someone",
    channel_name: str = "alerts",
    response_url: str = "https://hooks.slack.com/actions/T0STANDIN0/1/standin",
) -> dict:
    """A ``block_actions`` payload for a click on the element ``action_id`` of ``message``, as Slack sends it.

    A button's action carries its ``value`` (none for a link button, which Slack opens); a select's
    or an overflow menu's carries the chosen option as ``selected_option`` (``value`` names it).
    """
    block_id, element = _find_button(message, action_id)
    kind = element.get("type", "button")
    action: dict = {"action_id": action_id, "block_id": block_id or "standin", "type": kind}
    if kind in ("static_select", "overflow"):
        chosen = [o for o in element.get("options") or [] if o.get("value") == value]
        if not chosen:
            raise ValueError(f"{action_id!r} offers no option {value!r}")
        action["selected_option"] = chosen[0]
        if kind == "static_select":
            action["placeholder"] = element.get("placeholder")
    elif value is not None:
        action["value"] = value
    action["action_ts"] = f"{time.time():.6f}"
    if element.get("text"):
        action["text"] = element["text"]
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": username, "name": username, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "standin-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel_id, "is_ephemeral": False},
        "trigger_id": "1000000000000.1000000000.standin",
        "team": {"id": TEAM_ID, "domain": "standin"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [action],
    }
