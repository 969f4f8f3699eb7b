"""A gateway with named tokens for the front doors' tests, posting to the Slack stand-in."""

from __future__ import annotations

import hashlib
from pathlib import Path

from helpers import Gateway, http, slack_env, wait_for

# The configuration file: a route for one token's messages, and the tokens (the hash of each
# one's token, ``token(name)``, goes in front of what is written here).
CONFIG = """\
routes:
  - match: {source: payments}
    channel: "#payments-alerts"
    category: pay
tokens:
"""
TOKENS = """\
ci: scopes: [send]
loud: scopes: [send], mentions: true
strict: scopes: [send], refusal: "429"
payments: scopes: [send], channels: ["#payments-*"]
reader: scopes: [read]
boss: scopes: [admin]
"""
NAMES = [line.partition(":")[0] for line in TOKENS.splitlines()]


def token(name: str) -> str:
    """The token of ``name`` (one of NAMES) or, for any other name, a token no one knows."""
    return f"{name}-Token-7f3a"


def config_file(folder: Path) -> Path:
    lines = []
    for line in TOKENS.splitlines():
        name, _, rest = line.partition(": ")
        lines.append(f"  {name}: {{sha256: {hashlib.sha256(token(name).encode()).hexdigest()}, {rest}}}")
    path = folder / "notifier.yml"
    path.write_text(CONFIG + "\n".join(lines) + "\n")
    return path


def start(redis_url: str, slack, folder: Path, **settings: str) -> Gateway:
    """A gateway with the tokens above, limits far away unless given."""
    env = slack_env(redis_url, slack, NOTIFIER_CONFIG=str(config_file(folder)), NOTIFIER_CHANNEL_RATE="50/1s")
    return Gateway({**env, **settings}, log_dir=str(folder)).start()


def webhook_url(gateway: Gateway, name: str) -> str:
    return f"{gateway.url}/services/T0000/B0000/{token(name)}"


def mute(gateway: Gateway, category: str, on: bool = True) -> None:
    """Mute ``category`` (an override to 0/1h), or lift the mute."""
    headers = {"Authorization": f"Bearer {token('boss')}"}
    path = f"/v1/limits/category/{category}"
    body = {"rules": "0/1h", "for": "1h"} if on else None
    status = http("PUT" if on else "DELETE", gateway.url + path, body, headers)[0]
    assert status == 200, status


def stats(gateway: Gateway) -> dict:
    return gateway.get("/v1/stats")[1]


def arrived(slack, text: str, timeout: float = 15.0):
    """The stand-in's one message whose text is ``text`` (waits for it)."""
    return wait_for(lambda: next((m for m in slack.received() if m.text == text), None), timeout, what=repr(text))
