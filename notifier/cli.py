"""The ``notifier`` command: ``serve`` runs the gateway, ``status`` shows the limits."""

from __future__ import annotations

import argparse
import logging
import sys

from .settings import SettingsError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="notifier", description="Slack notification gateway "
                                     "with hierarchical rate limits")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--env-file", help="read NOTIFIER_* settings from this file too")
    status = commands.add_parser("status", help="show limits and totals of a running gateway")
    status.add_argument("--url", default=None, help="gateway URL (default: from the settings)")
    status.add_argument("--env-file", help="read NOTIFIER_* settings from this file too")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.env_file)
    except SettingsError as exc:
        print(f"notifier: {exc}", file=sys.stderr)
        return 2
    if args.command == "status":
        from .status import show

        return show(args.url or f"http://{settings.host}:{settings.port}", settings)
    return serve_forever(settings)


def serve_forever(settings) -> int:
    """Run the gateway until SIGINT/SIGTERM, then shut down gracefully."""
    from aiohttp import web

    from .app import create_app

    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop
    except ImportError:
        loop_factory = None
    else:
        loop_factory = uvloop.new_event_loop
    import asyncio

    loop = loop_factory() if loop_factory else asyncio.new_event_loop()
    web.run_app(create_app(settings), host=settings.host, port=settings.port, loop=loop,
                access_log=None, shutdown_timeout=10, print=lambda msg: logging.getLogger("notifier").info(msg))
    return 0
