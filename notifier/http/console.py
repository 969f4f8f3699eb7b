"""The operator console: ``GET /``, its scripts and style under ``/console/``, and ``/favicon.ico``.

The files are package data (``notifier/console/``), served as they are: plain HTML,
CSS and ES modules, nothing to build. The page is a face like ``cli.py``: it reads
and acts only through the JSON routes any client uses, with the same token checks,
so there is one path for every action. This module only serves files, with a
``Content-Security-Policy`` of the gateway's own origin (no inline script or style,
no asset from elsewhere) and validators so a browser revalidates instead of
downloading again.

Two facts are written into the page, as attributes (no inline script): whether the
gateway asks for a token (so the page asks for one before it reads event content,
rather than collecting a 401 first), and which optional routes this version has (a
panel whose route is missing says so, rather than polling a 404).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from aiohttp import web

from .auth import TOKENS

FOLDER = "console"  # inside the notifier package
# Routes a panel needs that older versions lack.
OPTIONAL_ROUTES = ("/v1/alerts", "/v1/windows", "/v1/stats/history", "/v1/names", "/v1/audit")
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".ico": "image/x-icon",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# Revalidate every time (a 304 costs one round trip): a page and its modules never mix versions.
REVALIDATE = "no-cache"
ICON_CACHE = "public, max-age=86400"


@dataclass(frozen=True)
class Asset:
    """One file of the console, read once."""

    body: bytes
    content_type: str


@cache
def assets() -> dict[str, Asset]:
    """Every file of ``notifier/console/`` that may be served, by name; read once (it never changes)."""
    folder = resources.files("notifier").joinpath(FOLDER)
    found = {}
    for entry in folder.iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        if entry.is_file() and suffix in CONTENT_TYPES and not entry.name.startswith("."):
            found[entry.name] = Asset(entry.read_bytes(), CONTENT_TYPES[suffix])
    return found


async def page(request: web.Request) -> web.StreamResponse:
    """``GET /``: the console page, with the token requirement and the optional routes filled in."""
    found = assets().get("index.html")
    if found is None:
        raise web.HTTPNotFound()
    auth = "open" if request.app[TOKENS].open else "token"
    paths = {resource.canonical for resource in request.app.router.resources()}
    routes = " ".join(path for path in OPTIONAL_ROUTES if path in paths)
    body = found.body.replace(b"{{auth}}", auth.encode()).replace(b"{{routes}}", routes.encode())
    return _answer(request, body, found.content_type, REVALIDATE)


async def static(request: web.Request) -> web.StreamResponse:
    """``/console/NAME`` (scripts, style) and ``/favicon.ico``."""
    name = request.match_info["asset"].removeprefix("console/")
    found = assets().get(name)  # a fixed set: names asked for are never kept
    if found is None or name == "index.html":
        raise web.HTTPNotFound()
    return _answer(request, found.body, found.content_type, ICON_CACHE if name.endswith(".ico") else REVALIDATE)


def _answer(request: web.Request, body: bytes, content_type: str, cache_control: str) -> web.Response:
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    headers = {**SECURITY_HEADERS, "Cache-Control": cache_control, "ETag": etag}
    if etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers={**headers, "Content-Type": content_type})
