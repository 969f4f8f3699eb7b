"""Alert-storm benchmark: one ``notifier serve`` vs a bare aiohttp app, same load, same run.

    python bench/storm.py            # 5 alternating rounds of 5 s each
    python bench/storm.py --quick    # 3 rounds of 2 s
    python bench/storm.py --gateway-command /other/venv/bin/notifier   # another build ("before")
    python bench/storm.py --token    # every request with a bearer token the gateways require
    python bench/storm.py --socket-mode --scenarios plain   # a Socket Mode connection costs nothing per event

Starts its own redis-server on a free port, one gateway (real Redis, 20 categories,
limits saturated first so nearly every event is refused) and ``bench/baseline.py``,
then loads them in turn with wrk (``apt-get install -y wrk``) and prints medians.
Three gateways: ``gateway`` (the two levels of the environment), ``reserves`` (the same
with reserves for 4 categories and 10% for critical events) and ``tree`` (the four levels
of ``bench/tree.yaml``: global, 5 channels, 4 teams, 20 categories, reserves at two
levels). Scenarios, each measured beside the baseline with the same bodies: ``plain`` (no
dedup_key; on every gateway), and alert storms where every event has a dedup_key:
``alerts-50`` (50 keys, all admitted before the storm: every event a duplicate),
``alerts-5000`` (5,000 keys: the same 50 admitted ones, the rest refused while the
levels are full) and ``links-50`` (50 other admitted keys, each event with two links) on
``gateway``; ``alerts-critical`` (5,000 keys, one in ten critical) on ``reserves`` and
``tree``; ``webhook`` (Alertmanager's ``slack_configs`` payloads, about 1.5 KB with an
attachment, on the incoming-webhook door of ``gateway``, beside a bare app that parses
them and answers ``ok``); ``templates``: the plain storm on a fourth gateway whose
configuration file gives every category a route and a message template of its own
(rendered at delivery, so admission should not notice); ``alerts-links``: the alert storm real
tools send, each event with a runbook link, on a gateway ``links`` with the acknowledge-and-escalate
settings and a Slack stand-in as its bot API (``bench/storm_links.py``).
Also measures, in the same run: admit.lua with a batch of 1 vs a plain PING from
redis-py, Redis CPU per decision (INFO commandstats) and memory per tracked event.
Servers are pinned to core 0, wrk and Redis to the last core (when taskset exists),
the same for gateway and baseline, so neither gets a better seat.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
import storm_links  # noqa: E402
import yaml  # noqa: E402
from helpers import Gateway, RedisServer, free_port, http, wait_for  # noqa: E402

CATEGORIES = [f"storm-{c}" for c in range(20)]
BENCH_TOKEN = "bench-token-0c1d2e3f4a5b6c7d8e9f"  # with --token: NOTIFIER_API_TOKENS of the gateways
AUTH: dict[str, str] = {}  # with --token: the header every request of the storm carries (the baseline ignores it)
# Scenario -> the wrk script's arguments (see storm.lua): distinct dedup_keys, links or critical.
SCENARIOS = {
    "plain": [],
    "alerts-50": ["50"],
    "alerts-5000": ["5000"],
    "links-50": ["50", "links"],
    "alerts-critical": ["5000", "critical"],
    "webhook": ["webhook"],
    "alerts-links": ["alerts-links"],
}
WEBHOOK = "/services/T0000/B0000/bench-secret"  # the incoming-webhook door (no tokens: any secret)
# Scenario -> the gateways it is measured on (each beside the baseline).
MEASURED_ON = {
    "plain": ("gateway", "reserves", "tree", "templates", "slack", "socket-mode"),
    "alerts-critical": ("reserves", "tree"),
    "alerts-links": ("links",),
}
TREE = HERE / "tree.yaml"


def pin(core: int) -> list[str]:
    """A taskset prefix for ``core``, or nothing where taskset is missing."""
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and os.cpu_count() > 1 else []


def wrk_output(url: str, seconds: float, connections: int, script_args: list[str], *options: str) -> str:
    """What one wrk run of the storm script (``storm.lua`` with ``script_args``) printed."""
    core = (os.cpu_count() or 1) - 1
    script = ["-s", str(HERE / "storm.lua"), url, *(["--", *script_args] if script_args else [])]
    return subprocess.run(
        [*pin(core), "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", *options, *script],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def wrk(url: str, seconds: float, connections: int, script_args: list[str]) -> tuple[float, int, int]:
    """(requests/s, requests, non-2xx answers) of one wrk run against ``url`` with the storm script."""
    headers = [f"-H{name}: {value}" for name, value in AUTH.items()]
    out = wrk_output(url, seconds, connections, script_args, *headers)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    total = re.search(r"(\d+) requests in", out)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, int(total.group(1)), int(non2xx.group(1)) if non2xx else 0


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


def alert_body(j: int, links: bool = False, critical: bool = False) -> dict:
    """The alert body storm.lua sends for key ``j``."""
    body = {
        "category": CATEGORIES[j % 20],
        "text": f"disk full on host-{j}",
        "severity": "critical" if critical and j // 20 % 10 == 0 else "error",
        "fields": {"host": f"h{j}", "team": f"t{j % 20 % 4}"},
        "dedup_key": f"{'linked' if links else 'disk'}-{j}",
    }
    if links:
        body["links"] = [
            {"text": "Runbook", "url": "https://runbooks.example.com/disk-full"},
            {"text": "Dashboard", "url": f"https://grafana.example.com/d/hosts?var-host=h{j}"},
        ]
    return body


def slack_body(j: int) -> dict:
    """The Alertmanager ``slack_configs`` payload storm.lua's ``webhook`` scenario sends for ``j``."""
    lines = "".join(
        f"*Alert:* DiskFull - critical\n*Description:* Disk /var on host-{j}-{k} is 95% full, writes will fail "
        f"within the hour\n*Details:*\n \u2022 *alertname:* `DiskFull`\n \u2022 *instance:* `host-{j}-{k}:9100`\n"
        " \u2022 *job:* `node`\n \u2022 *severity:* `critical`\n"
        for k in (1, 2, 3)
    )
    attachment = {
        "title": "[FIRING:3] DiskFull (node prod critical)",
        "title_link": f"http://alertmanager.example:9093/#/alerts?receiver=slack-{j}",
        "pretext": "",
        "text": lines,
        "fallback": "[FIRING:3] DiskFull (node prod critical) | http://alertmanager.example:9093/#/alerts?receiver=slack",
        "callback_id": "",
        "footer": "",
        "color": "danger",
        "mrkdwn_in": ["fallback", "pretext", "text"],
        "actions": [{"type": "button", "text": "Runbook :green_book:", "url": "https://runbooks.example.com/DiskFull"}],
        "fields": [
            {"title": "cluster", "value": f"prod-{j}", "short": True},
            {"title": "severity", "value": "critical", "short": True},
            {"title": "team", "value": "storage", "short": True},
        ],
    }
    return {
        "channel": "#alerts",
        "username": "Alertmanager",
        "icon_emoji": ":fire:",
        "link_names": False,
        "attachments": [attachment],
    }


def admit_alerts(gateway: Gateway) -> None:
    """Admit the 50 keys of ``alerts-50`` and of ``links-50`` (100 events: the global level is full)."""
    for links in (False, True):
        for j in range(50):
            status, body, _ = gateway.post(alert_body(j, links), headers=AUTH)
            assert status in (202, 429), body  # with reserves, the shared part fills first


# Issue 23's settings: escalation for every severity, five mute choices, a signing secret.
ACTING = {
    "NOTIFIER_ESCALATION": '{"critical": ["5m <!here>", "20m <@U0LEAD>"], "error": ["1h <!here>"], '
    '"warning": ["2h <!here>"], "info": ["4h <!here>"]}',
    "NOTIFIER_MUTE_CHOICES": "15m,1h,4h,24h,7d",
    "NOTIFIER_SLACK_SIGNING_SECRET": "bench-signing-secret",
}


def templates_config() -> str:
    """A configuration file: every category routed to a channel with a template of its own."""
    templates = {
        f"storm-{c}": {
            "text": f"storm {c}: {{{{ title or category }}}}: {{{{ text }}}}",
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": f"Storm {c}: {{{{ category }}}}"}},
                {"type": "section", "text": {"type": "mrkdwn", "text": "*{{ fields.host|default('-') }}* {{ text }}"}},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ severity }} from {{ source }}"}]},
            ],
        }
        for c in range(20)
    }
    routes = [{"match": {"category": name}, "channel": "#storm", "template": name} for name in templates]
    path = Path(tempfile.mkdtemp(prefix="notifier-bench-")) / "templates.yml"
    path.write_text(json.dumps({"routes": routes, "templates": templates}))  # JSON is YAML
    return str(path)


def saturate(gateway: Gateway, categories: list[str] = CATEGORIES) -> None:
    """Post until every category is refused, so the storm meets full levels (reserves included);
    the webhook door's messages (category ``anonymous``) too."""
    for _ in range(50):
        headers = http("POST", gateway.url + WEBHOOK, {"text": "prefill"})[2]
        if headers.get("X-Notifier-Outcome") == "dropped":
            break
    for _ in range(500):
        prefill = [
            gateway.post(
                {"category": c, "text": "prefill", "severity": "error", "fields": {"team": f"t{i % 4}"}}, headers=AUTH
            )
            for i, c in enumerate(categories)
        ]
        refused = [status == 429 for status, _, _ in prefill]
        if all(refused):
            return
    raise AssertionError("the levels never filled")


def evalsha_stats(client: redis.Redis) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return stats.get("calls", 0), stats.get("usec", 0)


def keyed_in_store(client: redis.Redis) -> int:
    """How many events with a dedup_key the store decided so far (``admit.lua`` reads each one's record)."""
    return client.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) used so far by process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def counters(client: redis.Redis, pid: int) -> dict[str, float]:
    """What a round spends is the difference of these before and after it."""
    calls, usec = evalsha_stats(client)
    return dict(calls=calls, usec=usec, cpu=redis_cpu(client), own=process_cpu(pid), keyed=keyed_in_store(client))


def storm_rounds(servers: dict[str, tuple[str, int]], client: redis.Redis, args) -> dict:
    """Alternate the servers' rounds; collect rates, CPU per request, Redis cost per decision.

    Results are keyed by run: the server's name for the plain storm, ``name scenario`` else.
    """
    runs = [
        (name, scenario)
        for scenario in SCENARIOS
        for name in (*MEASURED_ON.get(scenario, ("gateway",)), "baseline")
        if name in servers
    ]
    runs = [run for run in runs if run[1] in args.scenarios]
    label = {run: run[0] if run[1] == "plain" else f"{run[0]} {run[1]}" for run in runs}
    rates = {label[run]: [] for run in runs}
    cpu_us = {label[run]: [] for run in runs}
    redis_cost = {label[run]: dict(calls=0, usec=0, decisions=0, refused=0, cpu=0.0, keyed=0) for run in runs}
    for round_ in range(args.rounds):
        # ABBA order: a load drifting over the run favours no server.
        for run in runs if round_ % 2 == 0 else runs[::-1]:
            name = label[run]
            url, pid = servers[run[0]]
            before = counters(client, pid)
            rate, total, non2xx = wrk(url + "/v1/events", args.seconds, args.connections, SCENARIOS[run[1]])
            spent = {k: v - before[k] for k, v in counters(client, pid).items()}
            rates[name].append(rate)
            cpu_us[name].append(spent["own"] / max(1, total) * 1e6)
            print(
                f"  {name:20} {rate:9.0f} req/s  {cpu_us[name][-1]:6.1f} us CPU/request  ({non2xx} of {total} not 2xx, "
                f"{spent['keyed']} alert events decided in the store)",
                flush=True,
            )
            cost = redis_cost[name]
            for k in ("calls", "usec", "cpu", "keyed"):
                cost[k] += spent[k]
            cost["decisions"] += total
            cost["refused"] += non2xx
    return dict(rates=rates, cpu_us=cpu_us, redis=redis_cost)


async def script_vs_ping(
    url: str, prefix: str, limit: str, n: int, prefill: int = 1, tree: bool = False, **extra: str
) -> dict:
    """Latency of admit.lua with a batch of 1 (as built by the Limiter) vs PING, sequentially.

    The first ``limit``'s worth of events fill the levels before the timing starts. ``tree``:
    the four levels of ``bench/tree.yaml``, every rule ``limit``.
    """
    from builders import build_limiter

    from notifier.admission.batch import Pending
    from notifier.config import EMPTY, parse_config
    from notifier.models import Event
    from notifier.settings import load_settings

    config = EMPTY
    if tree:
        raw = yaml.safe_load(TREE.read_text())
        for level in raw["levels"]:
            level["rules"] = limit
        config = parse_config(raw)
        settings = load_settings(redis_url=url, key_prefix=prefix, digest_interval=0, **extra)
    else:
        settings = load_settings(
            redis_url=url, key_prefix=prefix, global_limit=limit, category_limit=limit, digest_interval=0, **extra
        )
    limiter, store = build_limiter(settings, config=config)
    client = store.redis
    sync = redis.Redis.from_url(url)
    result = {}

    def pending(i: int) -> Pending:
        event = Event(category=CATEGORIES[i % 20], text="bench")
        return Pending(event, f"{prefix}-{i}", time.monotonic() + 5, limiter.policy.route(event, "anonymous"))

    for label, call in (
        ("ping", lambda i: client.ping()),
        ("admit", lambda i: limiter._ask([pending(i)], {}, {}, limiter._protocol, time.monotonic())),
    ):
        for i in range(prefill if label == "admit" else 1):
            await call(i)  # warm up; fill the levels of a refusing run
        before = evalsha_stats(sync)
        started = time.perf_counter()
        for i in range(n):
            await call(i)
        result[label] = (time.perf_counter() - started) / n * 1e6
        after = evalsha_stats(sync)
        if label == "admit":
            result["usec_per_call"] = (after[1] - before[1]) / max(1, after[0] - before[0])
    await client.aclose()
    sync.close()
    return result


def memory_per_event(client: redis.Redis, prefix: str) -> float:
    """Bytes in the sliding logs per admitted event (both logs, all categories)."""
    keys = [k for k in client.scan_iter(match=f"{prefix}:*log:*")]
    events = client.zcard(f"{prefix}:{{{prefix}}}:log:global")
    total = sum(client.memory_usage(k, samples=0) or 0 for k in keys)
    return total / max(1, events), events


RESERVES = {
    "NOTIFIER_CATEGORY_RESERVES": '{"storm-0": "10%", "storm-1": "10%", "storm-2": "10%", "storm-3": "5%"}',
    "NOTIFIER_CRITICAL_RESERVE": "10%",
}


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


def quiet_hours_later() -> str:
    """Quiet hours for every channel, an hour long, starting in about 6 hours: configured, not in force."""
    start = (time.gmtime().tm_hour + 6) % 24
    return f'{{"*": "{start:02d}:00-{(start + 1) % 24:02d}:00 UTC"}}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--quiet-hours", action="store_true", help="the gateways with quiet hours for every channel, not in force"
    )
    parser.add_argument(
        "--acting",
        action="store_true",
        help="the gateways with escalation steps, five mute choices and a signing secret",
    )
    parser.add_argument("--token", action="store_true", help="the gateways require a token; every request has it")
    parser.add_argument(
        "--socket-mode",
        action="store_true",
        help="two more gateways posting to a Slack stand-in, the second with an app token (Socket Mode)",
    )
    parser.add_argument("--gateway-command", help="the notifier command to bench (default: the installed one)")
    every = [*SCENARIOS, "templates"]
    parser.add_argument("--scenarios", default=",".join(every), help="comma-separated, of: " + ", ".join(every))
    args = parser.parse_args()
    args.scenarios = args.scenarios.split(",")
    if "templates" in args.scenarios and "plain" not in args.scenarios:
        args.scenarios.append("plain")  # the templated gateway's storm is the plain one, measured beside it
    if args.quick:
        args.rounds, args.seconds = 3, 2
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")
    last = (os.cpu_count() or 1) - 1
    server = RedisServer(extra=[]).start()
    if pin(last):
        subprocess.run(["taskset", "-pc", str(last), str(server.proc.pid)], capture_output=True)
    client = redis.Redis.from_url(server.url)
    limits = {"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_GLOBAL_LIMIT": "100/30m", "NOTIFIER_CATEGORY_LIMIT": "10/30m"}
    if args.quiet_hours:
        limits["NOTIFIER_QUIET_HOURS"] = quiet_hours_later()
    if args.acting:
        limits.update(ACTING)
    if args.token:
        limits["NOTIFIER_API_TOKENS"] = BENCH_TOKEN
        AUTH["Authorization"] = f"Bearer {BENCH_TOKEN}"
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
    try:
        admit_alerts(gateway)
        for each in (gateway, reserves, tree, *([templated] if templated else []), *pair.values()):
            saturate(each)
        if links:
            saturate(links, storm_links.CATEGORIES)
        print(
            f"storm: {args.rounds} rounds x {args.seconds:g} s, {args.connections} connections, "
            f"20 categories (4 with reserves, and 10% for critical events, in 'reserves'; "
            f"the four levels of bench/tree.yaml in 'tree'); load: {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        servers = {
            "gateway": (gateway.url, gateway.proc.pid),
            "reserves": (reserves.url, reserves.proc.pid),
            "tree": (tree.url, tree.proc.pid),
            **({"templates": (templated.url, templated.proc.pid)} if templated else {}),
            **{name: (each.url, each.proc.pid) for name, each in pair.items()},
            **({"links": (links.url, links.proc.pid)} if links else {}),
            "baseline": (baseline_url, baseline.pid),
        }
        r = storm_rounds(servers, client, args)
        stats = http("GET", gateway.url + "/v1/stats")[1]
        refusing = asyncio.run(script_vs_ping(server.url, "benchfull", "100/1h", 2000, prefill=300))
        refusing_reserves = asyncio.run(
            script_vs_ping(
                server.url,
                "benchres",
                "100/1h",
                2000,
                prefill=300,
                category_reserves=RESERVES["NOTIFIER_CATEGORY_RESERVES"],
                critical_reserve="10%",
            )
        )
        admitting = asyncio.run(script_vs_ping(server.url, "benchopen", "1000000/1h", 5000))
        admitting["tree"] = asyncio.run(script_vs_ping(server.url, "benchtree", "1000000/1h", 5000, tree=True))
        mem, tracked = memory_per_event(client, "benchopen")
    finally:
        gateway.stop()
        reserves.stop()
        tree.stop()
        if templated:
            templated.stop()
        for each in pair.values():
            each.stop()
        for each in (links, links_slack, slack):
            if each is not None:
                each.stop()
        baseline.terminate()
        baseline.wait(10)
        server.stop()
    report(r, stats, refusing, refusing_reserves, admitting, mem, tracked, args)


def report(
    r: dict, stats: dict, refusing: dict, refusing_reserves: dict, admitting: dict, mem: float, tracked: int, args
) -> None:
    print()
    for name in r["rates"]:
        if name.startswith("baseline"):
            continue
        scenario = name.partition(" ")[2]
        against = f"baseline {scenario}" if scenario else "baseline"
        base = statistics.median(r["rates"][against])
        rate = statistics.median(r["rates"][name])
        per_round = statistics.median(g / b for g, b in zip(r["rates"][name], r["rates"][against], strict=True))
        cpu, base_cpu = statistics.median(r["cpu_us"][name]), statistics.median(r["cpu_us"][against])
        cost = r["redis"][name]
        print(
            f"{name:20} {rate:9.0f} req/s (median), baseline {base:.0f}, ratio {rate / base:.2f} (median of "
            f"per-round ratios {per_round:.2f}); CPU {cpu:.1f} us/request vs {base_cpu:.1f}"
        )
        print(
            f"{'':20} {cost['decisions'] / (args.rounds * args.seconds):.0f} decisions/s, "
            f"{cost['refused'] / max(1, cost['decisions']):.1%} refused with a 4xx, {cost['calls']} EVALSHA "
            f"({cost['decisions'] / max(1, cost['calls']):.0f} decisions per call), "
            f"{cost['usec'] / max(1, cost['decisions']):.3f} us script time and "
            f"{cost['cpu'] / max(1, cost['decisions']) * 1e6:.2f} us Redis CPU per request"
        )
    print(f"stats     dropped={stats.get('dropped')} (gateway)")
    print(
        f"redis-py  PING {refusing['ping']:.0f} us; admit.lua batch of 1: refusing {refusing['admit']:.0f} us "
        f"({refusing['usec_per_call']:.1f} us in Redis), refusing with reserves {refusing_reserves['admit']:.0f} us "
        f"({refusing_reserves['usec_per_call']:.1f} us in Redis), admitting {admitting['admit']:.0f} us "
        f"({admitting['usec_per_call']:.1f} us in Redis)"
    )
    tree = admitting["tree"]
    print(
        f"levels    admitting through the four levels of bench/tree.yaml: {tree['admit']:.0f} us "
        f"({tree['usec_per_call']:.1f} us in Redis, against {admitting['usec_per_call']:.1f} for two levels: "
        f"{(tree['usec_per_call'] - admitting['usec_per_call']) / 2:.1f} us per level more)"
    )
    print(f"memory    {mem:.0f} bytes per tracked event in the logs ({tracked} events)")


if __name__ == "__main__":
    main()
