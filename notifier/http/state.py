"""What handlers find on the application: the settings, the metrics, the running gateway."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from ..admission.admit import Admission
from ..admission.overrides import Overrides
from ..config import Config
from ..delivery.dead_letters import DeadLetters
from ..gateway_ts import GatewayTs
from ..metrics import Metrics
from ..settings import Settings
from ..slack.socket_mode import SocketMode
from ..slack.workspaces import Workspaces
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
    workspaces: Workspaces = field(default_factory=lambda: Workspaces([], False))  # the Slack destinations
    config_error: list[str] = field(default_factory=list)  # the last reload's problems (reload.py); [] when it read
    destinations: tuple[str, ...] = ()  # their names, in the file's order (the first is the default)
    socket_modes: list[SocketMode] = field(default_factory=list)  # clicks over a WebSocket, one per workspace

    @property
    def socket_mode_status(self) -> str:
        """``connected``, ``connecting``, ``off``, or why the last attempt failed (the first workspace's)."""
        return self.socket_modes[0].status if self.socket_modes else "off"


SETTINGS = web.AppKey("settings", Settings)
CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", Metrics)
GATEWAY = web.AppKey("gateway", Gateway)
