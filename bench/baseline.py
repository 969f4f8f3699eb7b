"""The yardstick: a bare aiohttp app that only parses the event JSON and answers 202 (and, at
Slack's incoming-webhook path, parses the message JSON and answers ``ok``).

Same server settings as ``notifier serve`` (uvloop when available, no access log),
so the benchmark ratio measures what the gateway adds on top of HTTP + JSON.
"""

from __future__ import annotations

import json
import sys

from aiohttp import web


async def post_event(request: web.Request) -> web.Response:
    """Parse the body like the gateway must, answer like an accepted event."""
    body = json.loads(await request.read())
    return web.json_response({"status": "accepted", "id": str(body.get("category"))}, status=202)


async def post_webhook(request: web.Request) -> web.Response:
    """Parse a Slack webhook's body like the gateway's front door must, answer like Slack."""
    json.loads(await request.read())
    return web.Response(text="ok")


def main() -> None:
    port = int(sys.argv[1])
    app = web.Application()
    app.router.add_post("/v1/events", post_event)
    app.router.add_post("/services/{a}/{b}/{secret}", post_webhook)
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = None
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, loop=loop)


if __name__ == "__main__":
    main()
