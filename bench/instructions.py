"""CPU instructions per storm request, gateway vs bare aiohttp, counted by callgrind.

    python bench/instructions.py [requests] [--scenario alerts-50] [--token]

Requests/s on a shared 2-core machine swing by 15% between runs; instructions do
not. Each server runs under ``valgrind --tool=callgrind`` with counting switched
off; after start-up, saturation and a warm-up, counting is switched on for
exactly ``requests`` storm requests (8 keep-alive connections) and off again.
The ratio baseline/gateway predicts the throughput ratio of ``storm.py`` on a
quiet machine. Valgrind slows the server about 30 times, so work driven by
the clock would run 30 times as often per request as it really does: the
limiter's flush of local refusals (every 50 ms) is stretched to match, and
background loops are measured in an idle window and taken off; so is the alert
epoch's freshness (a repeat is answered locally only after a recent read:
unstretched, valgrind would send every repeat to the store).
``--scenario`` picks the bodies of one of ``storm.py``'s scenarios. Needs valgrind
(``apt-get install -y valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "support")]

import redis  # noqa: E402
import storm  # noqa: E402
from helpers import Gateway, RedisServer, free_port, wait_for  # noqa: E402

SLOWDOWN = 30  # about valgrind's slowdown of this Python code
# `notifier serve` with the limiter's flush interval stretched by the same factor, so that
# under valgrind it writes refusals to Redis as often per request as it does without.
SERVE_SLOWED = (
    "import sys, notifier.admission.limiter as limiter, notifier.admission.known as known, notifier.cli as cli, "
    "notifier.admission.local as local; "
    f"limiter.FLUSH_DELAY *= {SLOWDOWN}; local.OPEN_TRUST *= {SLOWDOWN}; "
    f"limiter.REFRESH *= {SLOWDOWN}; known.FRESH *= {SLOWDOWN}; sys.exit(cli.main(['serve']))"
)
PLAIN = [
    storm_body.encode()
    for storm_body in (
        f'{{"category":"storm-{c}","text":"disk full on host-{c}","severity":"error","fields":{{"host":"h{c}"}}}}'
        for c in range(20)
    )
]
BODIES = PLAIN
PATH = b"/v1/events"
AUTH_LINE = b""  # with --token: the Authorization header every request carries


def scenario_bodies(scenario: str) -> list[bytes]:
    """The request bodies of one of ``storm.py``'s scenarios (as ``storm.lua`` sends them)."""
    script_args = storm.SCENARIOS[scenario]
    if not script_args:
        return PLAIN
    if script_args == ["webhook"]:
        return [json.dumps(storm.slack_body(j), separators=(",", ":")).encode() for j in range(20)]
    keys, links = int(script_args[0]), script_args[1:] == ["links"]
    return [json.dumps(storm.alert_body(j, links), separators=(",", ":")).encode() for j in range(keys)]


async def send(port: int, requests: int, connections: int = 8) -> None:
    """``requests`` storm POSTs over keep-alive connections, each waiting for its answer."""

    async def one_connection(k: int, n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        start = k * len(BODIES) // connections  # spread over all bodies, as wrk's storm cycles through them
        for i in range(n):
            body = BODIES[(start + i) % len(BODIES)]
            writer.write(
                b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s"
                b"Content-Length: %d\r\n\r\n%s" % (PATH, AUTH_LINE, len(body), body)
            )
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        writer.close()

    await asyncio.gather(*(one_connection(k, requests // connections) for k in range(connections)))


def callgrind(argv: list[str], out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *argv]


IDLE_SECONDS = 5.0


def count(pid: int, port: int, requests: int, out: str) -> tuple[float, float]:
    """(instructions per request, share of the count that was background work) for the server ``pid``.

    Background loops (delivery polling, digest claims, gauges) run by the clock,
    30 times as often per request under valgrind as without, so an idle window
    first measures their rate, and that much per second is taken off the storm
    window.
    """
    asyncio.run(send(port, max(400, len(BODIES))))  # warm-up: caches, batching state, every alert key learnt
    callgrind_control(pid, "-i", "on")
    started = time.monotonic()
    time.sleep(IDLE_SECONDS)
    idle = dump(pid, out, 1) / (time.monotonic() - started)
    started = time.monotonic()
    asyncio.run(send(port, requests))
    busy = dump(pid, out, 2)
    seconds = time.monotonic() - started
    print(f"counted {requests} requests in {seconds:.1f} s ({requests / seconds:.0f}/s under valgrind)")
    background = idle * seconds
    callgrind_control(pid, "-i", "off")
    return (busy - background) / requests, background / busy


def callgrind_control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def dump(pid: int, out: str, number: int) -> int:
    """Instructions counted since the last dump (callgrind writes ``out.<number>``)."""
    callgrind_control(pid, "-d")
    path = Path(f"{out}.{number}")
    totals = wait_for(
        lambda: path.exists() and re.search(r"^totals: (\d+)", path.read_text(), re.M),
        30,
        what=f"callgrind dump {path}",
    )
    return int(totals.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("requests", type=int, nargs="?", default=4000)
    parser.add_argument("--only", choices=("gateway", "baseline"), help="count one server only")
    parser.add_argument("--reserves", action="store_true", help="the gateway with reserves (as storm.py's)")
    parser.add_argument("--scenario", choices=list(storm.SCENARIOS), default="plain", help="storm.py's bodies")
    parser.add_argument("--token", action="store_true", help="the gateway requires a token; every request has it")
    args = parser.parse_args()
    global BODIES, PATH, AUTH_LINE
    BODIES = scenario_bodies(args.scenario)
    PATH = storm.WEBHOOK.encode() if args.scenario == "webhook" else PATH
    if args.token:
        storm.AUTH["Authorization"] = f"Bearer {storm.BENCH_TOKEN}"
        AUTH_LINE = f"Authorization: Bearer {storm.BENCH_TOKEN}\r\n".encode()
    requests = args.requests
    if not shutil.which("valgrind"):
        sys.exit("valgrind not found: apt-get install -y valgrind")
    work = tempfile.mkdtemp(prefix="notifier-instr-")
    server = RedisServer().start()
    results = {}
    try:
        if args.only != "baseline":
            results["gateway"] = count_gateway(server, requests, f"{work}/gateway.out", args.reserves)
        if args.only != "gateway":
            results["baseline"] = count_baseline(requests, f"{work}/baseline.out")
    finally:
        server.stop()
    for name, (value, background) in results.items():
        print(f"instructions/request: {name:8} {value:9,.0f}  (background work taken off: {background:.1%})")
    if len(results) == 2:
        print(
            f"ratio baseline/gateway: {results['baseline'][0] / results['gateway'][0]:.2f} "
            f"({requests} storm requests each)"
        )


def count_gateway(server: RedisServer, requests: int, out: str, reserves: bool) -> tuple[float, float]:
    """Instructions per request of ``notifier serve`` with every storm event refused."""
    gateway = Gateway(
        {
            "NOTIFIER_REDIS_URL": server.url,
            "NOTIFIER_GLOBAL_LIMIT": "100/30m",
            "NOTIFIER_CATEGORY_LIMIT": "10/30m",
            **(storm.RESERVES if reserves else {}),
            **({"NOTIFIER_API_TOKENS": storm.BENCH_TOKEN} if AUTH_LINE else {}),
        },
        command=callgrind([sys.executable, "-c", SERVE_SLOWED], out),
    ).start()
    client = redis.Redis.from_url(server.url)
    try:
        storm.admit_alerts(gateway)
        storm.saturate(gateway)
        calls, keyed = storm.evalsha_stats(client)[0], storm.keyed_in_store(client)
        result = count(gateway.proc.pid, gateway.port, requests, out)
        print(
            f"from warm-up to the end of counting: {storm.evalsha_stats(client)[0] - calls} script calls, "
            f"{storm.keyed_in_store(client) - keyed} alert events decided in the store"
        )
        return result
    finally:
        client.close()
        gateway.stop()


def count_baseline(requests: int, out: str) -> tuple[float, float]:
    """Instructions per request of ``bench/baseline.py``."""
    port = free_port()
    baseline = subprocess.Popen(
        callgrind([sys.executable, str(HERE / "baseline.py"), str(port)], out), stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: storm._answers(f"http://127.0.0.1:{port}"), 120, interval=0.5, what="baseline")
        return count(baseline.pid, port, requests, out)
    finally:
        baseline.terminate()
        baseline.wait(30)


if __name__ == "__main__":
    main()
