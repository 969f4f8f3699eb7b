"""What handlers find on the application: the settings, the metrics, the running gateway."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ..admission.admit import Admission
from ..admission.overrides import Overrides
from ..config import Config
from ..delivery.dead_letters import DeadLetters
from ..gateway_ts import GatewayTs
from ..metrics import Metrics
from ..settings import Settings
from ..slack.socket_mode import SocketMode
from ..store.audit import Audit
from ..store.client import Store
from ..store.keys import Keys
from ..store.scripts import Scripts
from ..store.secret import ControlKey


@dataclass
class Gateway:
    """Everything a handler needs, built once at start-up (``app.gateway_ctx``)."""

    settings: Settings
    store: Store
    keys: Keys
    scripts: Scripts
    admission: Admission
    overrides: Overrides
    dead_letters: DeadLetters
    metrics: Metrics
    sent: GatewayTs  # the gateway ts of front-door messages, and what became of each
    control_key: ControlKey  # seals the controls of messages; a click must bring its seal back
    audit: Audit  # every change, who made it and from where (store/audit.py)
    socket_mode: SocketMode | None = None  # Slack's clicks over a WebSocket (NOTIFIER_SLACK_APP_TOKEN)

    @property
    def socket_mode_status(self) -> str:
        """``connected``, ``connecting``, ``off``, or why the last attempt failed."""
        return self.socket_mode.status if self.socket_mode is not None else "off"


SETTINGS = web.AppKey("settings", Settings)
CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", Metrics)
GATEWAY = web.AppKey("gateway", Gateway)
