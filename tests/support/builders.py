"""Gateway parts built the way ``http.app`` builds them, for tests that drive one part directly."""

from __future__ import annotations

from notifier.admission.limiter import Limiter
from notifier.config import EMPTY, Config
from notifier.policy import Policy
from notifier.settings import Settings
from notifier.store.client import Store
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect


def build_limiter(settings: Settings, store: Store | None = None, config: Config = EMPTY) -> tuple[Limiter, Store]:
    """A limiter on ``store`` (else a new connection for the settings), as one replica has it."""
    store = store or connect(settings.redis_url, settings.redis_cluster, settings.redis_timeout / 1000)
    policy = Policy.from_settings(settings, config)
    limiter = Limiter(store, Scripts(store.redis), Keys(settings.key_prefix), settings, policy)
    return limiter, store
