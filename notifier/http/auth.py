"""Bearer tokens: with ``NOTIFIER_API_TOKENS`` set, every change needs one of them."""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

from .answers import ApiError


def check_token(request: web.Request, tokens: tuple[str, ...] | None) -> str:
    """Require one of ``tokens`` as the bearer token (compared in constant time).

    Returns who made the request, for the log of changes: a short fingerprint of
    the token (never the token), or ``anonymous`` when no tokens are configured.
    """
    if not tokens:
        return "anonymous"
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
