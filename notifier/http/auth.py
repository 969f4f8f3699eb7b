"""Who the caller is, and what it may do: bearer tokens, their scopes, and the route table.

Tokens come from the configuration file (``tokens``: a name, the SHA-256 of the
token, scopes, channels) and from ``NOTIFIER_API_TOKENS`` (every scope, named
``env-1``, ``env-2``, ... in the order listed). A presented token is hashed and
compared with every known hash in constant time, so neither the file nor the
comparison reveals a token. With no tokens anywhere, every caller is
``anonymous`` and may do everything.

:data:`ROUTES` says, for every route of the application, what it needs: a scope,
any known token, or nothing (open). :class:`Guard` applies it: the application
wraps every handler so the caller is known (or refused) before the handler
reads anything, and a route the table does not name stops the application from
being built, so no route is ever forgotten.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractRoute

from ..config import SCOPES, Config
from ..models import ANONYMOUS
from ..settings import Settings
from .answers import ApiError, Handler, json_response
from .input import check_post

SEND, READ, ACK, ADMIN = SCOPES
OPEN = "open"  # no token looked at: counts, health, the console's files, Slack's signed requests
TOKEN = "token"  # any known token, whatever its scopes

# Every route (method, path as aiohttp names it) and what it needs. A HEAD route needs what its GET needs.
# A route whose credential is not a bearer header (Slack's signature) is OPEN here and checks it itself.
ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/events"): SEND,
    ("POST", "/v1/alertmanager"): SEND,
    ("GET", "/v1/stats"): OPEN,
    ("GET", "/v1/stats/history"): READ,
    ("GET", "/v1/names"): READ,
    ("GET", "/v1/limits"): OPEN,
    ("PUT", "/v1/limits/{level}"): ADMIN,
    ("DELETE", "/v1/limits/{level}"): ADMIN,
    ("PUT", "/v1/limits/{level}/{value}"): ADMIN,
    ("DELETE", "/v1/limits/{level}/{value}"): ADMIN,
    ("GET", "/v1/windows"): OPEN,
    ("PUT", "/v1/windows/{name}"): ADMIN,
    ("DELETE", "/v1/windows/{name}"): ADMIN,
    ("POST", "/v1/slack/actions"): OPEN,  # Slack's signature is its credential (http/actions.py)
    ("GET", "/v1/alerts"): READ,
    ("POST", "/v1/alerts/{dedup_key}/ack"): ACK,
    ("DELETE", "/v1/alerts/{dedup_key}/ack"): ACK,
    ("GET", "/v1/dead"): READ,
    ("POST", "/v1/dead/requeue"): ADMIN,
    ("GET", "/v1/audit"): READ,
    ("POST", "/v1/reload"): ADMIN,
    ("GET", "/v1/token"): TOKEN,
    # The front doors take the token from the path or the body, need send, and answer in Slack's shapes
    # (http/slack_compat/intake.py): open here, checked there.
    ("POST", "/services/{a}/{b}/{secret}"): OPEN,
    ("POST", "/api/chat.postMessage"): OPEN,
    ("POST", "/api/chat.update"): OPEN,
    ("POST", "/api/auth.test"): OPEN,
    ("POST", "/api/{method}"): OPEN,
    ("GET", "/healthz"): OPEN,
    ("GET", "/readyz"): OPEN,
    ("GET", "/metrics"): OPEN,
    ("GET", "/openapi.json"): OPEN,
    ("GET", "/"): OPEN,
    ("GET", "/{asset}"): OPEN,  # the console's scripts, style and icon
    ("*", "/{path}"): OPEN,  # unknown paths and methods: 404 or 405
}
HOST_REFUSED = "Host not allowed: a gateway on a loopback address answers loopback names and NOTIFIER_ALLOWED_HOSTS"
# What a page of another site can send without a CORS preflight: a POST (a form, text/plain, or no
# body at all). PUT and DELETE always need a preflight, which the gateway never grants.
CHANGES = frozenset(("POST",))
LOOPBACK_NAMES = frozenset(("localhost", "127.0.0.1", "::1"))
MAX_REMEMBERED = 1024  # presented tokens whose caller is remembered (see Tokens.lookup)
UNAUTHORIZED = {"WWW-Authenticate": 'Bearer realm="notifier"'}  # RFC 6750: a 401 names the scheme


@dataclass(frozen=True)
class Caller:
    """A known caller: its name (an event's source), scopes, and bounds for the front doors."""

    name: str
    scopes: frozenset[str]
    channels: tuple[str, ...] = ("*",)  # globs, ``*`` any run of characters
    mentions: bool = False  # broadcast mentions in front-door messages stay mentions
    refusal: str = "ok"  # "ok": a refused front-door message is answered as a success; "429": as Slack's 429
    bounded: bool = field(init=False)  # False when ``channels`` allow every channel: no glob to match

    def __post_init__(self) -> None:
        object.__setattr__(self, "bounded", "*" not in self.channels)

    def may(self, scope: str) -> bool:
        return scope in self.scopes

    def may_post_to(self, channel: str) -> bool:
        """True when ``channel`` is one the caller's ``channels`` allow."""
        return not self.bounded or any(fnmatch.fnmatchcase(channel, glob) for glob in self.channels)


EVERYONE = Caller(ANONYMOUS, frozenset(SCOPES))  # the caller when no tokens are configured
NOBODY = Caller(ANONYMOUS, frozenset())  # an unidentified caller of an open route while tokens are configured


class Tokens:
    """Every known token by its SHA-256, and the caller each one is."""

    def __init__(self, settings: Settings, config: Config) -> None:
        self._callers: list[tuple[bytes, Caller]] = []
        self._remembered: dict[str, Caller] = {}
        self.reload(settings, config)

    def reload(self, settings: Settings, config: Config) -> None:
        """Know the tokens of ``config`` (and the settings') from the next request on; forget the others."""
        callers = []
        for index, token in enumerate(settings.api_tokens or (), 1):
            digest = hashlib.sha256(token.encode()).digest()
            callers.append((digest, Caller(f"env-{index}", frozenset(SCOPES))))
        for name, entry in config.tokens.items():
            caller = Caller(name, frozenset(entry.scopes), entry.channels, entry.mentions, entry.refusal)
            callers.append((bytes.fromhex(entry.sha256), caller))
        self._callers, self._remembered = callers, {}

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

    def lookup(self, presented: str) -> Caller | None:
        """:meth:`identify`, remembering the callers of known tokens (bounded).

        Every request of a storm presents the same token: hashing it again costs a third
        of a microsecond. A dict finds a remembered token by its string hash, keyed
        per process, so a guess learns nothing from the time a lookup takes; unknown
        tokens are never remembered, so guesses cannot push the known ones out.
        """
        caller = self._remembered.get(presented)
        if caller is None:
            caller = self.identify(presented)
            if caller is not None:
                if len(self._remembered) >= MAX_REMEMBERED:
                    self._remembered.clear()
                self._remembered[presented] = caller
        return caller


TOKENS = web.AppKey("tokens", Tokens)
CALLER = web.RequestKey("caller", Caller)


class Guard:
    """The route table applied to the routes of one application, with its tokens.

    Open mode (no tokens) is not open to web pages in the operator's browser: a ``POST``
    needs ``Content-Type: application/json``, which a page cannot send to another site
    without a preflight (never granted here; ``PUT`` and ``DELETE`` always need one),
    and a gateway bound to a loopback address
    answers only a ``Host`` that names it so (or one of NOTIFIER_ALLOWED_HOSTS), which a
    DNS-rebinding page cannot.
    """

    def __init__(self, tokens: Tokens, routes: Iterable[AbstractRoute], settings: Settings) -> None:
        self.tokens = tokens
        self.open = tokens.open  # read on every request: a plain attribute, not a property
        self._needs = {
            route: need_of(route.method, route.resource.canonical if route.resource else "") for route in routes
        }
        self._hosts = frozenset(h.lower() for h in settings.allowed_hosts) | LOOPBACK_NAMES
        self._host_bound = self.open and is_loopback(settings.host)
        self._seen_hosts: dict[str, bool] = {}  # Host header -> allowed (see host_allowed)

    def caller(self, request: web.Request) -> Caller:
        """Who sent ``request``, when it may use the route it reached; else a 401, 403 or 415 (``ApiError``)."""
        if self.open:
            if not self.host_allowed(request):
                raise ApiError(403, HOST_REFUSED)
            if request.method in CHANGES and self._needs[request.match_info.route] != OPEN:
                check_post(request)
            return EVERYONE
        need = self._needs[request.match_info.route]
        if need == OPEN:
            return NOBODY
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        caller = self.tokens.lookup(given.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            raise ApiError(401, "missing or wrong bearer token", headers=UNAUTHORIZED)
        if need != TOKEN and not caller.may(need):
            raise ApiError(403, f"token '{caller.name}' lacks scope '{need}'")
        return caller

    def host_allowed(self, request: web.Request) -> bool:
        """False for a ``Host`` that a loopback-bound gateway in open mode does not answer (the front doors ask too).

        The answer is remembered per header value (bounded): a storm's requests all name one
        host, and reading it costs 0.6 us a request (an address parsed, a name lowered).
        """
        if not self._host_bound:
            return True
        host = request.headers.get("Host")
        if host is None:
            return True
        allowed = self._seen_hosts.get(host)
        if allowed is None:
            name = host_name(host)
            allowed = name in self._hosts or is_loopback(name)
            if len(self._seen_hosts) >= MAX_REMEMBERED:  # many Host values: start again
                self._seen_hosts.clear()
            self._seen_hosts[host] = allowed
        return allowed


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port or brackets, lower case."""
    if host.startswith("["):
        return host[1:].partition("]")[0].lower()
    name, _, port = host.rpartition(":")
    return (name if name and port.isdigit() else host).lower()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` (and names under it) and loopback addresses."""
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def need_of(method: str, path: str) -> str:
    """What a route needs, from :data:`ROUTES`; ``LookupError`` for a route the table does not name."""
    need = ROUTES.get(("GET" if method == "HEAD" else method, path))
    if need is None:
        raise LookupError(f"{method} {path} is not in notifier.http.auth.ROUTES: say which scope it needs")
    return need


GUARD = web.AppKey("guard", Guard)


def guarded(handler: Handler) -> Handler:
    """``handler``, reached only by a caller the route table lets through (``request[CALLER]``)."""

    @functools.wraps(handler)
    async def checked(request: web.Request) -> web.StreamResponse:
        request[CALLER] = request.app[GUARD].caller(request)
        return await handler(request)

    return checked


async def get_token(request: web.Request) -> web.StreamResponse:
    """``GET /v1/token``: who the presented token is and what it may do (what the console offers)."""
    caller = request[CALLER]
    return json_response(
        {
            "name": caller.name,
            "scopes": [scope for scope in SCOPES if caller.may(scope)],
            "channels": list(caller.channels),
            "open": request.app[TOKENS].open,
        }
    )
