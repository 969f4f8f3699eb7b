"""CPU instructions per storm request, gateway vs bare aiohttp, counted by callgrind.

    python bench/instructions.py [requests]

Requests/s on a shared 2-core machine swing by 15% between runs; instructions do
not. Each server runs under ``valgrind --tool=callgrind`` with counting switched
off; after start-up, saturation and a warm-up, counting is switched on for
exactly ``requests`` storm requests (8 keep-alive connections) and off again.
The ratio baseline/gateway predicts the throughput ratio of ``storm.py`` on a
quiet machine. Valgrind slows the server about 30 times, so work driven by
the clock (the limiter's flush every 50 ms, delivery polling) would run 30
times as often per request as it really does, about 10% of the count: both
servers run with their clocks slowed to match (libfaketime). Needs valgrind
and faketime (``apt-get install -y valgrind faketime``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

import storm  # noqa: E402
from helpers import Gateway, RedisServer, free_port, wait_for  # noqa: E402

CLOCK_SPEED = 0.03  # about 1 / valgrind's slowdown of this Python code
BODIES = [storm_body.encode() for storm_body in (
    f'{{"category":"storm-{c}","text":"disk full on host-{c}","severity":"error","fields":{{"host":"h{c}"}}}}'
    for c in range(20))]


async def send(port: int, requests: int, connections: int = 8) -> None:
    """``requests`` storm POSTs over keep-alive connections, each waiting for its answer."""

    async def one_connection(k: int, n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(n):
            body = BODIES[(k + i) % len(BODIES)]
            writer.write(b"POST /v1/events HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        writer.close()

    await asyncio.gather(*(one_connection(k, requests // connections) for k in range(connections)))


def slow_clock() -> dict[str, str]:
    """Environment that runs a process's clocks at ``CLOCK_SPEED`` (libfaketime)."""
    library = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), None)
    if library is None:
        sys.exit("libfaketime not found: apt-get install -y faketime")
    return {"LD_PRELOAD": str(library), "FAKETIME": f"+0 x{CLOCK_SPEED}"}


def callgrind(argv: list[str], out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *argv]


def count(pid: int, port: int, requests: int, out: str) -> float:
    """Instructions per request of the server ``pid`` for ``requests`` storm requests."""
    asyncio.run(send(port, 400))  # warm-up: caches, batching state
    control = ["callgrind_control"]
    subprocess.run(control + ["-i", "on", str(pid)], check=True, capture_output=True)
    asyncio.run(send(port, requests))
    subprocess.run(control + ["-i", "off", str(pid)], check=True, capture_output=True)
    subprocess.run(control + ["-d", str(pid)], check=True, capture_output=True)
    dumps = sorted(Path(out).parent.glob(Path(out).name + "*"), key=os.path.getmtime)
    totals = wait_for(lambda: re.search(r"^totals: (\d+)", dumps[-1].read_text(), re.M), 30,
                      what="callgrind dump")
    return int(totals.group(1)) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("requests", type=int, nargs="?", default=4000)
    parser.add_argument("--only", choices=("gateway", "baseline"), help="count one server only")
    args = parser.parse_args()
    requests = args.requests
    if not shutil.which("valgrind"):
        sys.exit("valgrind not found: apt-get install -y valgrind")
    work = tempfile.mkdtemp(prefix="notifier-instr-")
    server = RedisServer().start()
    results = {}
    try:
        if args.only != "baseline":
            results["gateway"] = count_gateway(server, requests, f"{work}/gateway.out")
        if args.only != "gateway":
            results["baseline"] = count_baseline(requests, f"{work}/baseline.out")
    finally:
        server.stop()
    for name, value in results.items():
        print(f"instructions/request: {name:8} {value:9,.0f}")
    if len(results) == 2:
        print(f"ratio baseline/gateway: {results['baseline'] / results['gateway']:.2f} "
              f"({requests} storm requests each)")


def count_gateway(server: RedisServer, requests: int, out: str) -> float:
    """Instructions per request of ``notifier serve`` with every storm event refused."""
    gateway = Gateway({"NOTIFIER_REDIS_URL": server.url, "NOTIFIER_GLOBAL_LIMIT": "100/30m",
                       "NOTIFIER_CATEGORY_LIMIT": "10/30m", **slow_clock()},
                      command=callgrind([sys.executable, "-m", "notifier", "serve"], out)).start()
    try:
        storm.saturate(gateway)
        return count(gateway.proc.pid, gateway.port, requests, out)
    finally:
        gateway.stop()


def count_baseline(requests: int, out: str) -> float:
    """Instructions per request of ``bench/baseline.py``."""
    port = free_port()
    baseline = subprocess.Popen(callgrind([sys.executable, str(HERE / "baseline.py"), str(port)], out),
                                env={**os.environ, **slow_clock()}, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: storm._answers(f"http://127.0.0.1:{port}"), 120, interval=0.5, what="baseline")
        return count(baseline.pid, port, requests, out)
    finally:
        baseline.terminate()
        baseline.wait(30)


if __name__ == "__main__":
    main()
