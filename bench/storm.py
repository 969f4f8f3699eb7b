"""Alert-storm benchmark: one ``notifier serve`` vs a bare aiohttp app, same load, same run.

    python bench/storm.py            # 5 alternating rounds of 5 s each
    python bench/storm.py --quick    # 3 rounds of 2 s
    python bench/storm.py --gateway-command /other/venv/bin/notifier   # another build ("before")
    python bench/storm.py --token    # every request with a bearer token the gateways require
    python bench/storm.py --socket-mode --scenarios plain   # a Socket Mode connection costs nothing per event
    python bench/storm.py --together # each gateway loaded at once with the bare app, sharing core 0

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
Before the rounds each alert storm runs on its gateways until they know its keys (a key's first
event goes to the store): the rounds measure a storm's steady state.
Also measures, in the same run: admit.lua with a batch of 1 vs a plain PING from
redis-py, Redis CPU per decision (INFO commandstats) and memory per tracked event.
Servers are pinned to core 0, wrk and Redis to the last core (when taskset exists),
the same for gateway and baseline, so neither gets a better seat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
import storm_links  # noqa: E402
from helpers import Gateway, http  # noqa: E402

# The storm's bodies and settings, its servers and its Redis figures live in modules of their own; every name
# stays importable from here (other benchmarks use them as ``storm.NAME``).
from storm_bodies import (  # noqa: E402, F401
    ACTING,
    CATEGORIES,
    RESERVES,
    TREE,
    alert_body,
    quiet_hours_later,
    slack_body,
    templates_config,
)
from storm_redis import (  # noqa: E402, F401
    counters,
    evalsha_stats,
    keyed_in_store,
    memory_per_event,
    process_cpu,
    redis_cpu,
    script_vs_ping,
)
from storm_servers import (  # noqa: E402, F401
    _answers,
    need_wrk,
    pin,
    pinned_redis,
    start_baseline,
    start_servers,
    start_socket_pair,
    stop_servers,
)

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


def admit_alerts(gateway: Gateway) -> None:
    """Admit the 50 keys of ``alerts-50`` and of ``links-50`` (100 events: the global level is full)."""
    for links in (False, True):
        for j in range(50):
            status, body, _ = gateway.post(alert_body(j, links), headers=AUTH)
            assert status in (202, 429), body  # with reserves, the shared part fills first


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


def storm_rounds(servers: dict[str, tuple[str, int]], client: redis.Redis, args) -> dict:
    """Alternate the servers' rounds; collect rates, CPU per request, Redis cost per decision.

    Results are keyed by run: the server's name for the plain storm, ``name scenario`` else. With
    ``--together`` each gateway is loaded at the same time as the bare app (both on core 0): the
    kernel gives each half of the core, so their rates' ratio is their costs' ratio measured in the
    same instants, which a noisy machine's swings between rounds do not move. The bare app's rates
    are then kept per pair, as ``baseline SCENARIO beside NAME``.
    """
    runs = [
        (name, scenario)
        for scenario in SCENARIOS
        for name in (*MEASURED_ON.get(scenario, ("gateway",)), "baseline")
        if name in servers and scenario in args.scenarios
    ]
    label = {run: run[0] if run[1] == "plain" else f"{run[0]} {run[1]}" for run in runs}
    steps = [(run,) for run in runs]
    if args.together:
        steps = [(run, ("baseline", run[1], run[0])) for run in runs if run[0] != "baseline"]
        label.update({step[1]: f"{label[step[1][:2]]} beside {label[step[0]]}" for step in steps})
    r = dict(rates={}, cpu_us={}, redis={})
    for round_ in range(args.rounds):
        # ABBA order: a load drifting over the run favours no server.
        for step in steps if round_ % 2 == 0 else steps[::-1]:
            with ThreadPoolExecutor(len(step)) as pool:
                results = pool.map(lambda run: _one_run(run, servers, client, args), step)
                for run, (result, spent) in zip(step, results, strict=True):
                    _keep(r, label[run], result, spent)
    return r


def learn_keys(servers: dict[str, tuple[str, int]], client: redis.Redis, args) -> None:
    """Each alert storm on each gateway it is measured on, before the rounds, until that gateway knows
    its keys (under 5% of a run's events decided in the store; at most 5 runs of 3 s): the rounds then
    measure the storm's steady state. A key's first event goes to the store, and on a slow machine
    5,000 keys took the first three rounds to learn (2,509, 804 and 1,593 events in the store)."""
    for scenario, script_args in SCENARIOS.items():
        if scenario in ("plain", "webhook") or scenario not in args.scenarios:
            continue  # no keys
        for name in (name for name in MEASURED_ON.get(scenario, ("gateway",)) if name in servers):
            for _ in range(5):
                keyed = keyed_in_store(client)
                _, total, non2xx = wrk(servers[name][0] + "/v1/events", 3, args.connections, script_args)
                learnt = keyed_in_store(client) - keyed
                print(f"  {name} {scenario} learning its keys ({non2xx} of {total} not 2xx, {learnt} in the store)")
                if learnt < 0.05 * total:
                    break


def _one_run(run: tuple, servers: dict[str, tuple[str, int]], client: redis.Redis, args) -> tuple:
    """One wrk run of ``run`` (server, scenario): (rate, requests, non-2xx) and what the round spent."""
    url, pid = servers[run[0]]
    before = counters(client, pid)
    result = wrk(url + "/v1/events", args.seconds, args.connections, SCENARIOS[run[1]])
    spent = {k: v - before[k] for k, v in counters(client, pid).items()}
    if run[0] == "baseline":  # with --together the store's figures of the round are the gateway's
        spent.update(calls=0, usec=0, cpu=0.0, keyed=0)
    return result, spent


def _keep(r: dict, name: str, result: tuple[float, int, int], spent: dict) -> None:
    rate, total, non2xx = result
    r["rates"].setdefault(name, []).append(rate)
    r["cpu_us"].setdefault(name, []).append(spent["own"] / max(1, total) * 1e6)
    print(
        f"  {name:20} {rate:9.0f} req/s  {r['cpu_us'][name][-1]:6.1f} us CPU/request  ({non2xx} of {total} not 2xx, "
        f"{spent['keyed']} alert events decided in the store)",
        flush=True,
    )
    cost = r["redis"].setdefault(name, dict(calls=0, usec=0, decisions=0, refused=0, cpu=0.0, keyed=0))
    for k in ("calls", "usec", "cpu", "keyed"):
        cost[k] += spent[k]
    cost["decisions"] += total
    cost["refused"] += non2xx


def parse_args() -> argparse.Namespace:
    """The command line: rounds and their length, the gateways' options, the scenarios to run."""
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
    parser.add_argument(
        "--together", action="store_true", help="each gateway loaded at the same time as the bare app, on one core"
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
    return args


def gateway_settings(redis_url: str, args: argparse.Namespace) -> dict[str, str]:
    """The environment every gateway starts from: the run's Redis, the limits and the options of ``args``
    (with ``--token``, every request of the storm carries the token from now on)."""
    limits = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_GLOBAL_LIMIT": "100/30m", "NOTIFIER_CATEGORY_LIMIT": "10/30m"}
    if args.quiet_hours:
        limits["NOTIFIER_QUIET_HOURS"] = quiet_hours_later()
    if args.acting:
        limits.update(ACTING)
    if args.token:
        limits["NOTIFIER_API_TOKENS"] = BENCH_TOKEN
        AUTH["Authorization"] = f"Bearer {BENCH_TOKEN}"
    return limits


def measure(started: SimpleNamespace, redis_url: str, client: redis.Redis, args: argparse.Namespace) -> tuple:
    """Fill the levels, run the rounds, then time admit.lua and weigh the logs: every figure ``report`` prints."""
    gateway, reserves, tree, templated = started.gateway, started.reserves, started.tree, started.templated
    pair, links, baseline, baseline_url = started.pair, started.links, started.baseline, started.baseline_url
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
    learn_keys(servers, client, args)
    r = storm_rounds(servers, client, args)
    stats = http("GET", gateway.url + "/v1/stats")[1]
    refusing = asyncio.run(script_vs_ping(redis_url, "benchfull", "100/1h", 2000, prefill=300))
    refusing_reserves = asyncio.run(
        script_vs_ping(
            redis_url,
            "benchres",
            "100/1h",
            2000,
            prefill=300,
            category_reserves=RESERVES["NOTIFIER_CATEGORY_RESERVES"],
            critical_reserve="10%",
        )
    )
    admitting = asyncio.run(script_vs_ping(redis_url, "benchopen", "1000000/1h", 5000))
    admitting["tree"] = asyncio.run(script_vs_ping(redis_url, "benchtree", "1000000/1h", 5000, tree=True))
    mem, tracked = memory_per_event(client, "benchopen")
    return r, stats, refusing, refusing_reserves, admitting, mem, tracked


def main() -> None:
    args = parse_args()
    need_wrk()
    server = pinned_redis()
    client = redis.Redis.from_url(server.url)
    limits = gateway_settings(server.url, args)
    started = start_servers(limits, args)
    try:
        r, stats, refusing, refusing_reserves, admitting, mem, tracked = measure(started, server.url, client, args)
    finally:
        stop_servers(started, server)
    report(r, stats, refusing, refusing_reserves, admitting, mem, tracked, args)


def report(
    r: dict, stats: dict, refusing: dict, refusing_reserves: dict, admitting: dict, mem: float, tracked: int, args
) -> None:
    print()
    for name in r["rates"]:
        if name.startswith("baseline"):
            continue
        scenario = name.partition(" ")[2]
        against = f"baseline {scenario}".strip() + (f" beside {name}" if args.together else "")
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
