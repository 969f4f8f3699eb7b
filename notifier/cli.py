"""The ``notifier`` command: ``serve`` runs the gateway; ``status``, ``mute``, ``unmute``, ``ack``,
``unack`` and ``maintenance`` talk to one; ``check-config``, ``route`` and ``render`` read a
configuration file; ``token new`` makes a token for it.

A start-up problem (a bad setting, a missing env file, a port in use) is one
line on stderr naming the variable, file or port, and exit status 2; a bad
configuration file is one line per problem naming the place in the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable
from typing import TypeAlias

from . import terminal, workers
from .config import EMPTY, Config, load_config
from .destinations.preview import KINDS, payload
from .errors import ConfigError, SettingsError, TemplateError
from .explain import explain_route, render_entry, summary
from .policy import Policy
from .settings import Settings, load_settings, unknown_variables
from .slack.messages import MessageState, event_message, shaped_message
from .slack.templates import Templates, check_templates, context
from .tokens import comma_list, new_token

log = logging.getLogger("notifier")
BUILDER = "https://app.slack.com/block-kit-builder"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    given = {"workers": args.workers} if getattr(args, "workers", None) is not None else {}
    try:
        settings = load_settings(args.env_file, **given)
    except SettingsError as exc:
        return _fail(str(exc))
    for warning in unknown_variables(args.env_file):
        print(f"notifier: warning: {warning}", file=sys.stderr)
    command: Callable[[argparse.Namespace, Settings], int] = args.run
    return command(args, settings)


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="notifier", description="Slack notification gateway with hierarchical rate limits"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    local = [*_local_parsers(commands), _token_parser(commands)]
    remote = _remote_parsers(commands)
    for sub in (*local, *remote):  # after each command's own arguments
        sub.add_argument("--env-file", help="read NOTIFIER_* settings from this file too")
    for sub in remote:
        sub.add_argument("--url", default=None, help="gateway URL (default: from NOTIFIER_HOST/NOTIFIER_PORT)")
        sub.add_argument("--token", default=None, help="bearer token (default: the first of NOTIFIER_API_TOKENS)")
    return parser


def _local_parsers(commands: Subparsers) -> list[argparse.ArgumentParser]:
    """The commands that run here: serve, check-config, route, render."""
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", metavar="FILE", help="the configuration file (default: NOTIFIER_CONFIG)")
    serve.add_argument(
        "--workers",
        type=_workers,
        metavar="N",
        help="gateway processes sharing the port, each admitting and delivering; auto: one per usable CPU "
        "(default: NOTIFIER_WORKERS, else 1)",
    )
    serve.add_argument("--worker-of", type=int, metavar="PID", help=argparse.SUPPRESS)  # set by the parent
    serve.set_defaults(run=_serve)
    check = commands.add_parser("check-config", help="check a configuration file without starting anything")
    check.add_argument("file", help="the configuration file (YAML)")
    check.set_defaults(run=_check_config)
    route = commands.add_parser("route", help="print where an event goes, and its value and rules at every level")
    route.add_argument("--config", metavar="FILE", help="the configuration file (default: NOTIFIER_CONFIG)")
    route.add_argument("keys", nargs="+", metavar="KEY=VALUE", help="category=db severity=critical field:team=db ...")
    route.set_defaults(run=_route)
    render = commands.add_parser("render", help="print the message a template, or a destination's kind, makes")
    render.add_argument("--config", metavar="FILE", help="the configuration file (default: NOTIFIER_CONFIG)")
    render.add_argument(
        "--destination",
        metavar="KIND",
        choices=KINDS,
        help=f"what a destination of this kind is sent: {', '.join(KINDS)}",
    )
    render.add_argument("template", nargs="?", help="the template's name (none with --destination)")
    render.add_argument(
        "keys", nargs="*", metavar="KEY=VALUE", help="text=... title=... category=db field:team=db link:Runbook=URL ..."
    )
    render.set_defaults(run=_render)
    return [serve, check, route, render]


def _remote_parsers(commands: Subparsers) -> list[argparse.ArgumentParser]:
    """The commands that ask a running gateway: status, mute, unmute, ack, unack, maintenance, audit."""
    status = commands.add_parser("status", help="show limits and totals of a running gateway")
    status.set_defaults(run=lambda args, settings: terminal.show(_url(args, settings), _token(args, settings)))
    return [
        status,
        *_mute_parsers(commands),
        *_ack_parsers(commands),
        _window_parser(commands),
        _audit_parser(commands),
    ]


def _audit_parser(commands: Subparsers) -> argparse.ArgumentParser:
    audit = commands.add_parser("audit", help="print the audit log: every change, who made it, newest first")
    audit.add_argument("--limit", type=int, default=20, help="how many entries, 1-1000 (default 20)")
    audit.add_argument("--action", default=None, help="only this action, e.g. override.put, window.open, ack")
    audit.add_argument("--by", default=None, help="only this author: a token's name, or slack:<user id>")
    audit.set_defaults(
        run=lambda args, settings: terminal.audit(
            _url(args, settings), _token(args, settings), args.limit, args.action, args.by
        )
    )
    return audit


def _mute_parsers(commands: Subparsers) -> list[argparse.ArgumentParser]:
    mute = commands.add_parser("mute", help="mute a category (or LEVEL/VALUE) for the whole fleet for a while")
    mute.add_argument("category", metavar="CATEGORY|LEVEL/VALUE", help="a category, or a value of a level: channel/#db")
    mute.add_argument("duration", help="how long, e.g. 30m or 1h")
    mute.set_defaults(
        run=lambda args, settings: terminal.mute(
            _url(args, settings), _token(args, settings), args.category, args.duration
        )
    )
    unmute = commands.add_parser("unmute", help="lift the mute (any override) of a category (or LEVEL/VALUE)")
    unmute.add_argument(
        "category", metavar="CATEGORY|LEVEL/VALUE", help="a category, or a value of a level: channel/#db"
    )
    unmute.set_defaults(
        run=lambda args, settings: terminal.unmute(_url(args, settings), _token(args, settings), args.category)
    )
    return [mute, unmute]


def _ack_parsers(commands: Subparsers) -> list[argparse.ArgumentParser]:
    ack = commands.add_parser("ack", help="acknowledge an open alert (stops its escalation)")
    ack.add_argument("dedup_key", help="the alert's dedup_key")
    ack.add_argument("--by", default=None, help="who acknowledges (default: the token's author)")
    ack.set_defaults(
        run=lambda args, settings: terminal.ack(_url(args, settings), _token(args, settings), args.dedup_key, args.by)
    )
    unack = commands.add_parser("unack", help="lift the acknowledgement of an open alert")
    unack.add_argument("dedup_key", help="the alert's dedup_key")
    unack.set_defaults(
        run=lambda args, settings: terminal.unack(_url(args, settings), _token(args, settings), args.dedup_key)
    )
    return [ack, unack]


def _window_parser(commands: Subparsers) -> argparse.ArgumentParser:
    window = commands.add_parser("maintenance", help="open or end a maintenance window for the whole fleet")
    window.add_argument("name", help="the window's name (its URL: /v1/windows/NAME)")
    window.add_argument("--for", dest="for_", metavar="DURATION", help="how long from its start, e.g. 2h")
    window.add_argument("--until", metavar="WHEN", help="its end instead: unix seconds or ISO 8601")
    window.add_argument("--start", metavar="WHEN", help="unix seconds or ISO 8601 (default: now)")
    window.add_argument("--category", action="append", default=[], help="a category it holds (repeat for more)")
    window.add_argument("--channel", action="append", default=[], help="a channel it holds (repeat for more)")
    window.add_argument("--note", default="", help="said in its start and end messages")
    window.add_argument("--end", action="store_true", help="end the window now")
    window.set_defaults(
        run=lambda args, settings: terminal.maintenance(
            _url(args, settings), _token(args, settings), args.name, _window_body(args)
        )
    )
    return window


def _token_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """``token new``; returns its parser."""
    token = commands.add_parser("token", help="make bearer tokens for the configuration file")
    new = token.add_subparsers(dest="action", required=True, help="what to do: new").add_parser(
        "new", help="print a new random token, and its line for tokens: (with its hash, never the token)"
    )
    new.add_argument("name", help="the token's name: the source of the events it sends, the author of its changes")
    new.add_argument("--scopes", required=True, help="comma list of send, read, ack, admin")
    new.add_argument("--channels", default="", help="comma list of globs where its messages may go (default: any)")
    new.add_argument("--mentions", action="store_true", help="broadcast mentions of its front-door messages stay")
    new.add_argument("--refusal", choices=("ok", "429"), default="ok", help="how the front doors answer a refusal")
    new.set_defaults(run=_new_token)
    return new


def _new_token(args: argparse.Namespace, settings: Settings) -> int:
    try:
        made = new_token(args.name, comma_list(args.scopes), comma_list(args.channels), args.mentions, args.refusal)
    except ConfigError as exc:
        return _fail_all(exc.problems)
    print(made.token)
    print(made.line)
    print(
        "notifier: the first line is the token (shown once: give it to its client); add the second under tokens: "
        "in the configuration file",
        file=sys.stderr,
    )
    return 0


def _config(path: str | None, settings: Settings) -> Config:
    """The configuration file at ``path`` (else ``NOTIFIER_CONFIG``), checked; none is an empty one.

    Its templates are compiled (one that does not is a problem) and tried on a sample event
    (one that fails is a warning, on stderr).
    """
    path = path or settings.config
    if not path:
        return EMPTY
    config = load_config(path, settings)
    for warning in check_templates(config.templates, path):
        print(f"notifier: warning: {warning}", file=sys.stderr)
    return config


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    try:
        config = _config(args.config, settings)
    except ConfigError as exc:
        return _fail_all(exc.problems)
    if args.config:  # the file a reload reads again
        settings = settings.model_copy(update={"config": args.config})
    if settings.workers > 1 and args.worker_of is None:
        return workers.supervise(settings, args.config, args.env_file)
    return serve_forever(settings, config, args.worker_of)


def _workers(value: str) -> int:
    try:
        return workers.parse_workers(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_config(args: argparse.Namespace, settings: Settings) -> int:
    try:
        config = _config(args.file, settings)
    except ConfigError as exc:
        return _fail_all(exc.problems)
    print(f"{args.file}: ok")
    print(summary(Policy.from_settings(settings, config), config))
    return 0


def _route(args: argparse.Namespace, settings: Settings) -> int:
    given = dict(key.partition("=")[::2] for key in args.keys)
    if any("=" not in key for key in args.keys):
        return _fail("give each key as KEY=VALUE, e.g. category=db field:team=db")
    try:
        config = _config(args.config, settings)
        print(explain_route(Policy.from_settings(settings, config), given))
    except ConfigError as exc:
        return _fail_all(exc.problems)
    except ValueError as exc:  # pydantic's ValidationError is one
        return _fail(str(exc).splitlines()[0] if "validation error" not in str(exc) else _first_problem(exc))
    return 0


def _render(args: argparse.Namespace, settings: Settings) -> int:
    """Print the message ``args.template`` makes for the event of ``args.keys``, as Block Kit JSON."""
    if args.template and "=" in args.template:  # no template named: the first key took its place
        args.keys, args.template = [args.template, *args.keys], None
    if args.destination:
        return _render_for(args.destination, args.keys, args.config, settings)
    if not args.template:
        return _fail("name a template (or give --destination KIND)")
    if any("=" not in key for key in args.keys):
        return _fail("give each key as KEY=VALUE, e.g. text='disk full' field:team=db")
    try:
        config = _config(args.config, settings)
        entry = render_entry(Policy.from_settings(settings, config), dict(k.partition("=")[::2] for k in args.keys))
        templates = Templates(config.templates)
        try:
            own, text = asyncio.run(templates.render(args.template, context(entry)))
        finally:
            templates.close()
    except ConfigError as exc:
        return _fail_all(exc.problems)
    except TemplateError as exc:
        return _fail(f"template {args.template} fails for this event ({exc}): it would be posted in the built-in shape")
    except ValueError as exc:
        return _fail(_first_problem(exc) if "validation error" in str(exc) else str(exc).splitlines()[0])
    message = shaped_message(entry.channel, own, text, {**entry.event, "category": entry.category}, MessageState())
    print(json.dumps({"blocks": message.blocks}, indent=2, ensure_ascii=False))
    print(f"notifier: the message's text (notifications, screen readers): {message.text}", file=sys.stderr)
    print(f"notifier: to see it, paste the JSON above into {BUILDER} (Slack's Block Kit Builder)", file=sys.stderr)
    return 0


def _render_for(kind: str, keys: list[str], path: str | None, settings: Settings) -> int:
    """Print the body a destination of ``kind`` is sent for the event of ``keys`` (the built-in shape)."""
    if any("=" not in key for key in keys):
        return _fail("give each key as KEY=VALUE, e.g. text='disk full' field:team=db")
    try:
        entry = render_entry(
            Policy.from_settings(settings, _config(path, settings)), dict(k.partition("=")[::2] for k in keys)
        )
    except ConfigError as exc:
        return _fail_all(exc.problems)
    except ValueError as exc:
        return _fail(_first_problem(exc) if "validation error" in str(exc) else str(exc).splitlines()[0])
    message = event_message(entry.channel, {**entry.event, "category": entry.category})
    print(json.dumps(payload(kind, message), indent=2, ensure_ascii=False))
    return 0


def _first_problem(exc: ValueError) -> str:
    lines = str(exc).splitlines()
    return f"{lines[1]}: {lines[2].strip()}" if len(lines) > 2 else lines[0]


def _fail_all(problems: list[str]) -> int:
    for problem in problems:
        print(f"notifier: {problem}", file=sys.stderr)
    return 2


def _url(args: argparse.Namespace, settings: Settings) -> str:
    return str(args.url or f"http://{settings.host}:{settings.port}")


def _window_body(args: argparse.Namespace) -> dict[str, object] | None:
    """The body of ``PUT /v1/windows/NAME`` from the options; None for ``--end``."""
    if args.end:
        return None
    body: dict[str, object] = {"categories": args.category, "channels": args.channel, "note": args.note, "via": "cli"}
    for key, value in (("start", args.start), ("end", args.until)):
        if value is not None:  # unix seconds as a number, else ISO 8601 as given
            body[key] = float(value) if value.replace(".", "", 1).isdigit() else value
    if args.for_ is not None:
        body["for"] = args.for_
    return body


def _token(args: argparse.Namespace, settings: Settings) -> str | None:
    return args.token or (settings.api_tokens[0] if settings.api_tokens else None)


def _fail(message: str) -> int:
    print(f"notifier: {message}", file=sys.stderr)
    return 2


def serve_forever(settings: Settings, config: Config = EMPTY, worker_of: int | None = None) -> int:
    """Run the gateway until SIGINT/SIGTERM, then shut down gracefully.

    ``worker_of``: the pid of the parent of ``--workers`` (this process is one of its workers).
    """
    from .http.app import create_app  # the server's imports are paid only by `serve`
    from .http.serving import run
    from .worker_metrics import share_counts

    if worker_of is not None:
        workers.bind_to_parent(worker_of)
    try:  # bound before anything starts: a port in use is one line, not a half-started gateway
        sock = workers.listen(settings.host, settings.port, shared=worker_of is not None)
    except OSError as exc:
        return _fail(
            f"cannot listen on {settings.host}:{settings.port} (NOTIFIER_HOST/NOTIFIER_PORT): {exc.strerror or exc}"
        )
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _audit_lines()
    try:
        import uvloop
    except ImportError:
        loop = asyncio.new_event_loop()
    else:
        loop = uvloop.new_event_loop()
    app = create_app(settings, config)
    share_counts(app)  # with workers: their counts reach /metrics of each
    run(app, sock, loop)
    return 0


def _audit_lines() -> None:
    """The ``audit`` logger's lines are its JSON alone (it holds ``at``), so whatever keeps logs parses them whole."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit = logging.getLogger("audit")
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)  # kept whatever NOTIFIER_LOG_LEVEL quiets: an entry is never a debug line
    audit.propagate = False
