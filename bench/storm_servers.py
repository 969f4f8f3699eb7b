"""The servers a run of ``bench/storm.py`` loads, started and stopped: the bare aiohttp app
(``bench/baseline.py``), the gateways of its scenarios and their Slack stand-ins, each pinned
to core 0 (``pin``) so that neither side gets a better seat.

Every name here is re-exported by ``storm``: other benchmarks use them as ``storm.NAME``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import storm_links
from helpers import Gateway, RedisServer, free_port, http, wait_for
from storm_bodies import RESERVES, TREE, templates_config

HERE = Path(__file__).resolve().parent


def need_wrk() -> None:
    """Stop the benchmark with the command that installs wrk when it is missing."""
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")


def pin(core: int) -> list[str]:
    """A taskset prefix for ``core``, or nothing where taskset is missing."""
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and os.cpu_count() > 1 else []


def pinned_redis() -> RedisServer:
    """A redis-server of its own, pinned to the last core (with wrk) where ``taskset`` exists."""
    server = RedisServer().start()
    if pin(last := (os.cpu_count() or 1) - 1):
        subprocess.run(["taskset", "-pc", str(last), str(server.proc.pid)], capture_output=True)
    return server


def start_baseline() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([*pin(0), sys.executable, str(HERE / "baseline.py"), str(port)])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _answers(url), 20, what="baseline")
    return proc, url


def _answers(url: str) -> bool:
    try:
        return http("POST", url + "/v1/events", {"category": "x", "text": "y"}, timeout=1)[0] == 202
    except OSError:
        return False


def start_socket_pair(limits: dict[str, str], command: list[str] | None) -> tuple[object, dict[str, Gateway]]:
    """A Slack stand-in with Socket Mode, and two gateways posting to it: ``slack`` with a bot token and
    a signing secret, ``socket-mode`` the same with an app token (its connection open before the storm)."""
    from slack_standin import TOKEN, SlackStandin
    from socket_mode_standin import APP_TOKEN, SocketModeStandin

    slack = SlackStandin(socket_mode=SocketModeStandin()).start()
    bot = {"NOTIFIER_SLACK_BOT_TOKEN": TOKEN, "NOTIFIER_SLACK_API_URL": slack.api_url, "NOTIFIER_SLACK_CHANNEL": "#b"}
    bot["NOTIFIER_SLACK_SIGNING_SECRET"] = "bench-signing-secret"
    pair = {
        "slack": Gateway({**limits, **bot, "NOTIFIER_KEY_PREFIX": "slack"}, wrapper=pin(0), command=command),
        "socket-mode": Gateway(
            {**limits, **bot, "NOTIFIER_KEY_PREFIX": "socket", "NOTIFIER_SLACK_APP_TOKEN": APP_TOKEN},
            wrapper=pin(0),
            command=command,
        ),
    }
    for each in pair.values():
        each.start()
    socket = pair["socket-mode"]
    wait_for(lambda: http("GET", socket.url + "/healthz")[1].get("socket_mode") == "connected", 15, what="connected")
    return slack, pair


def start_servers(limits: dict[str, str], args: argparse.Namespace) -> SimpleNamespace:
    """Every server the scenarios of ``args`` are measured on: the gateways, their Slack stand-ins
    and the baseline (``stop_servers`` stops them)."""
    command = [args.gateway_command, "serve"] if args.gateway_command else None
    gateway = Gateway(limits, wrapper=pin(0), command=command).start()
    reserves = Gateway(
        {**limits, **RESERVES, "NOTIFIER_KEY_PREFIX": "reserves"}, wrapper=pin(0), command=command
    ).start()
    own = {k: v for k, v in limits.items() if k not in ("NOTIFIER_GLOBAL_LIMIT", "NOTIFIER_CATEGORY_LIMIT")}
    tree = Gateway(
        {**own, "NOTIFIER_CONFIG": str(TREE), "NOTIFIER_KEY_PREFIX": "tree"}, wrapper=pin(0), command=command
    ).start()
    templated = None
    if "templates" in args.scenarios:
        config = {**limits, "NOTIFIER_KEY_PREFIX": "templates", "NOTIFIER_CONFIG": templates_config()}
        templated = Gateway(config, wrapper=pin(0), command=command).start()
    slack, pair = start_socket_pair(limits, command) if args.socket_mode else (None, {})
    links_slack, links = (
        storm_links.start(limits, pin(0), command) if "alerts-links" in args.scenarios else (None, None)
    )
    baseline, baseline_url = start_baseline()
    return SimpleNamespace(
        gateway=gateway,
        reserves=reserves,
        tree=tree,
        templated=templated,
        slack=slack,
        pair=pair,
        links_slack=links_slack,
        links=links,
        baseline=baseline,
        baseline_url=baseline_url,
    )


def stop_servers(started: SimpleNamespace, server: RedisServer) -> None:
    """Stop what ``start_servers`` started, then Redis."""
    started.gateway.stop()
    started.reserves.stop()
    started.tree.stop()
    if started.templated:
        started.templated.stop()
    for each in started.pair.values():
        each.stop()
    for each in (started.links, started.links_slack, started.slack):
        if each is not None:
            each.stop()
    started.baseline.terminate()
    started.baseline.wait(10)
    server.stop()
