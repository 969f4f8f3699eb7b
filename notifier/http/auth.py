"""Who the caller is, and what it may do: bearer tokens.

Tokens come from the configuration file (``tokens``: a name, the SHA-256 of the
token, scopes, channels) and from ``NOTIFIER_API_TOKENS`` (every scope, named
``env-1``, ``env-2``, ... in the order listed). A presented token is hashed and
compared with every known hash in constant time, so neither the file nor the
comparison reveals a token. With no tokens anywhere, every caller is
``anonymous`` and may do everything.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
from dataclasses import dataclass

from aiohttp import web

from ..config import SCOPES, Config
from ..models import ANONYMOUS
from ..settings import Settings
from .answers import ApiError


@dataclass(frozen=True)
class Caller:
    """A known caller: its name (an event's source), scopes, and bounds for the front doors."""

    name: str
    scopes: frozenset[str]
    channels: tuple[str, ...] = ("*",)  # globs, ``*`` any run of characters
    mentions: bool = False  # broadcast mentions in front-door messages stay mentions
    refusal: str = "ok"  # "ok": a refused front-door message is answered as a success; "429": as Slack's 429

    def may(self, scope: str) -> bool:
        return scope in self.scopes

    def may_post_to(self, channel: str) -> bool:
        """True when ``channel`` is one the caller's ``channels`` allow."""
        return any(fnmatch.fnmatchcase(channel, glob) for glob in self.channels)


EVERYONE = Caller(ANONYMOUS, frozenset(SCOPES))  # the caller when no tokens are configured


class Tokens:
    """Every known token by its SHA-256, and the caller each one is."""

    def __init__(self, settings: Settings, config: Config) -> None:
        self._callers: list[tuple[bytes, Caller]] = []
        for index, token in enumerate(settings.api_tokens or (), 1):
            digest = hashlib.sha256(token.encode()).digest()
            self._callers.append((digest, Caller(f"env-{index}", frozenset(SCOPES))))
        for name, entry in config.tokens.items():
            caller = Caller(name, frozenset(entry.scopes), entry.channels, entry.mentions, entry.refusal)
            self._callers.append((bytes.fromhex(entry.sha256), caller))

    @property
    def open(self) -> bool:
        """True when no tokens are configured: every caller may do everything."""
        return not self._callers

    def identify(self, presented: str | bytes) -> Caller | None:
        """The caller whose token was ``presented``; None for an unknown token (every hash compared)."""
        raw = presented if isinstance(presented, bytes) else presented.encode("utf-8", "surrogateescape")
        digest = hashlib.sha256(raw).digest()
        found = None
        for known, caller in self._callers:
            if hmac.compare_digest(digest, known):
                found = caller
        return found


TOKENS = web.AppKey("tokens", Tokens)


def check_token(request: web.Request, tokens: tuple[str, ...] | None) -> str:
    """Require one of ``tokens`` as the bearer token (compared in constant time).

    Returns who made the request, for the log of changes: a short fingerprint of
    the token (never the token), or ``anonymous`` when no tokens are configured.
    """
    if not tokens:
        return ANONYMOUS
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # A header with undecodable bytes arrives with surrogates; keep them as bytes, never a 500.
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(given_bytes, token.encode())
    if scheme.lower() != "bearer" or not matched:
        # RFC 6750: a 401 names the scheme a client must use.
        raise ApiError(401, "missing or wrong bearer token", headers={"WWW-Authenticate": 'Bearer realm="notifier"'})
    return "token:" + hashlib.sha256(given_bytes).hexdigest()[:8]
