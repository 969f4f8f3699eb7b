"""Gateway parts built the way ``http.app`` builds them, for tests that drive one part directly."""

from __future__ import annotations

from typing import Any

from notifier.admission.limiter import Limiter
from notifier.config import EMPTY, Config
from notifier.models import Decision, Event
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


def sent_to_store(limiter: Limiter) -> list[Event]:
    """The events ``limiter`` sends to the store from now on (its ``decide_in_store`` is wrapped)."""
    sent: list[Event] = []
    to_store = limiter.decide_in_store

    async def counted(event: Event, *args: Any, **kwargs: Any) -> Decision:
        sent.append(event)
        return await to_store(event, *args, **kwargs)

    limiter.decide_in_store = counted  # type: ignore[method-assign]
    return sent
