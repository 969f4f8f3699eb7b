"""The fleet's control key: what seals the controls of the gateway's messages (``slack.controls``).

Every replica must seal and check with the same key, and a restart must not change it
(a message's buttons live as long as the message). So it comes from the settings
(``NOTIFIER_CONTROL_SECRET``), else from the store, where the first replica that needs
it writes a random one (``SET NX``) and every other reads that. It is read when first
needed, not at start-up: a gateway starts while the store is down.

The key is kept as a SHA-256 digest of the secret; neither is ever logged or shown.
"""

from __future__ import annotations

import hashlib
import secrets

from ..errors import StoreUnavailable
from .client import Store, as_text
from .keys import Keys


class ControlKey:
    """The fleet's control key, read once and kept."""

    def __init__(self, store: Store, keys: Keys, configured: str | None = None) -> None:
        self._store, self._name = store, keys.control_key
        self._key = _digest(configured) if configured else b""
        self._fixed = bool(configured)

    def __repr__(self) -> str:
        return "ControlKey(...)"

    async def get(self) -> bytes:
        """The key; raises ``StoreUnavailable`` while it cannot be read."""
        if not self._key:
            await self.refresh()
        return self._key

    async def refresh(self) -> bool:
        """Read the store's key again (one a replica wrote after losing the store's data, say).
        True when it changed; a key from the settings never does."""
        if self._fixed:
            return False
        store = self._store
        await store.call(store.redis.set, self._name, secrets.token_hex(32), nx=True)
        secret = await store.call(store.redis.get, self._name)
        if secret is None:  # flushed between the two calls
            raise StoreUnavailable("the control key was removed while it was read")
        key = _digest(as_text(secret))
        changed, self._key = key != self._key, key
        return changed


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
