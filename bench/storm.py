"""Alert-storm benchmark: one ``notifier serve`` vs a bare aiohttp app, same load, same run.

    python bench/storm.py            # 5 alternating rounds of 5 s each
    python bench/storm.py --quick    # 3 rounds of 2 s

Starts its own redis-server on a free port, one gateway (real Redis, 20 categories,
limits saturated first so nearly every event is refused) and ``bench/baseline.py``,
then loads them in turn with wrk (``apt-get install -y wrk``) and prints medians.
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
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
from helpers import Gateway, RedisServer, free_port, http, wait_for  # noqa: E402

CATEGORIES = [f"storm-{c}" for c in range(20)]


def pin(core: int) -> list[str]:
    """A taskset prefix for ``core``, or nothing where taskset is missing."""
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and os.cpu_count() > 1 else []


def wrk(url: str, seconds: float, connections: int) -> float:
    """Requests/s of one wrk run against ``url`` with the storm script."""
    core = (os.cpu_count() or 1) - 1
    out = subprocess.run(
        [*pin(core), "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(HERE / "storm.lua"), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
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


def saturate(gateway: Gateway) -> None:
    """Post until the global limit refuses, so the storm meets full levels."""
    for n in range(10_000):
        status, body, _ = gateway.post({"category": CATEGORIES[n % 20], "text": "prefill"})
        if status == 429 and body.get("limit") == "global":
            return
    raise AssertionError("global limit never filled")


def evalsha_stats(client: redis.Redis) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return stats.get("calls", 0), stats.get("usec", 0)


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) used so far by process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def storm_rounds(servers: dict[str, tuple[str, int]], client: redis.Redis, args) -> dict:
    """Alternate gateway and baseline rounds; collect rates, CPU per request, Redis cost per decision."""
    rates = {"gateway": [], "baseline": []}
    cpu_us = {"gateway": [], "baseline": []}
    calls = usec = decisions = refused = 0
    cpu = 0.0
    names = list(servers)
    for round_ in range(args.rounds):
        # ABBA order: a load drifting over the run favours neither server.
        for name in names if round_ % 2 == 0 else names[::-1]:
            url, pid = servers[name]
            before, cpu0, own0 = evalsha_stats(client), redis_cpu(client), process_cpu(pid)
            rate, total, non2xx = wrk(url + "/v1/events", args.seconds, args.connections)
            after, cpu1, own1 = evalsha_stats(client), redis_cpu(client), process_cpu(pid)
            rates[name].append(rate)
            cpu_us[name].append((own1 - own0) / max(1, total) * 1e6)
            print(
                f"  {name:8} {rate:9.0f} req/s  {cpu_us[name][-1]:6.1f} us CPU/request  ({non2xx} of {total} not 2xx)",
                flush=True,
            )
            if name == "gateway":
                calls += after[0] - before[0]
                usec += after[1] - before[1]
                decisions += total
                refused += non2xx
                cpu += cpu1 - cpu0
    return dict(rates=rates, cpu_us=cpu_us, calls=calls, usec=usec, decisions=decisions, refused=refused, cpu=cpu)


async def script_vs_ping(url: str, prefix: str, limit: str, n: int) -> dict:
    """Latency of admit.lua with a batch of 1 (as built by the Limiter) vs PING, sequentially."""
    from builders import build_limiter

    from notifier.admission.batch import Pending
    from notifier.models import Event
    from notifier.settings import load_settings

    settings = load_settings(
        redis_url=url, key_prefix=prefix, global_limit=limit, category_limit=limit, digest_interval=0
    )
    limiter, store = build_limiter(settings)
    client = store.redis
    sync = redis.Redis.from_url(url)
    result = {}
    for label, call in (
        ("ping", lambda i: client.ping()),
        (
            "admit",
            lambda i: limiter._ask(
                [Pending(Event(category=CATEGORIES[i % 20], text="bench"), f"{prefix}-{i}", time.monotonic() + 5)],
                {},
                limiter._protocol,
                time.monotonic(),
            ),
        ),
    ):
        await call(0)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="length of a round (whole seconds)")
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 3, 2
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")
    last = (os.cpu_count() or 1) - 1
    server = RedisServer(extra=[]).start()
    if pin(last):
        subprocess.run(["taskset", "-pc", str(last), str(server.proc.pid)], capture_output=True)
    client = redis.Redis.from_url(server.url)
    gateway = Gateway(
        {"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_GLOBAL_LIMIT": "100/30m", "NOTIFIER_CATEGORY_LIMIT": "10/30m"},
        wrapper=pin(0),
    ).start()
    baseline, baseline_url = start_baseline()
    try:
        saturate(gateway)
        print(
            f"storm: {args.rounds} rounds x {args.seconds:g} s, {args.connections} connections, "
            f"20 categories; load: {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        r = storm_rounds(
            {"gateway": (gateway.url, gateway.proc.pid), "baseline": (baseline_url, baseline.pid)}, client, args
        )
        gw, base = statistics.median(r["rates"]["gateway"]), statistics.median(r["rates"]["baseline"])
        stats = http("GET", gateway.url + "/v1/stats")[1]
        refusing = asyncio.run(script_vs_ping(server.url, "benchfull", "1/1h", 2000))
        admitting = asyncio.run(script_vs_ping(server.url, "benchopen", "1000000/1h", 5000))
        mem, tracked = memory_per_event(client, "benchopen")
    finally:
        gateway.stop()
        baseline.terminate()
        baseline.wait(10)
        server.stop()
    print(f"\ngateway   {gw:9.0f} req/s (median)   baseline {base:9.0f} req/s (median)")
    print(
        f"ratio     {gw / base:9.2f}   (median of per-round ratios: "
        f"{statistics.median(g / b for g, b in zip(r['rates']['gateway'], r['rates']['baseline'], strict=True)):.2f})"
    )
    gw_cpu, base_cpu = (statistics.median(r["cpu_us"][name]) for name in ("gateway", "baseline"))
    print(
        f"CPU       {gw_cpu:9.1f} us/request gateway, {base_cpu:.1f} us/request baseline (medians), "
        f"ratio {base_cpu / gw_cpu:.2f}"
    )
    print(
        f"decisions {r['decisions'] / (args.rounds * args.seconds):9.0f} /s during gateway rounds, "
        f"{r['refused'] / max(1, r['decisions']):.1%} refused; stats dropped={stats.get('dropped')}"
    )
    print(
        f"evalsha   {r['calls']} calls for {r['decisions']} decisions "
        f"({r['decisions'] / max(1, r['calls']):.0f} per call), {r['usec'] / max(1, r['calls']):.1f} us/call, "
        f"{r['usec'] / max(1, r['decisions']):.3f} us Redis script time per decision; "
        f"Redis CPU {r['cpu'] / max(1, r['decisions']) * 1e6:.2f} us per decision"
    )
    print(
        f"redis-py  PING {refusing['ping']:.0f} us, admit.lua batch of 1: refusing {refusing['admit']:.0f} us "
        f"({refusing['usec_per_call']:.1f} us in Redis), admitting {admitting['admit']:.0f} us "
        f"({admitting['usec_per_call']:.1f} us in Redis); sequential calls = "
        f"{1e6 / refusing['admit']:.0f} decisions/s"
    )
    print(f"memory    {mem:.0f} bytes per tracked event in the logs ({tracked} events)")


if __name__ == "__main__":
    main()
