"""The storm benchmark runs end to end, and during the storm every refusal is counted.

No timing is asserted (the machines are shared and noisy): this keeps ``bench/storm.py``
working and checks what must hold at any speed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import need

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_storm_benchmark_runs_and_refuses_every_storm_event():
    need("wrk")
    need("redis-server")
    out = subprocess.run(
        [sys.executable, str(BENCH / "storm.py"), "--rounds", "2", "--seconds", "1"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    assert re.search(r"^gateway .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
    assert re.search(r"^reserves .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
    assert re.search(r"^tree .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout  # the four-level tree
    assert re.search(r"^templates .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout  # a template per category
    for scenario in ("alerts-50", "alerts-5000", "links-50"):  # alert storms, beside the plain one
        assert re.search(rf"^gateway {scenario} .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
    for gateway in ("reserves", "tree"):  # alert storms with reserves: one key in ten critical
        assert re.search(rf"^{gateway} alerts-critical .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
    # Real tools' alert storm (a runbook link each) on the acknowledge-and-escalate settings, Slack a stand-in
    assert re.search(r"^links alerts-links .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
    assert out.stdout.count("100.0% refused") == 4, out.stdout  # every gateway refused every plain storm event
    assert re.search(r"^levels .* us per level more", out.stdout, re.M), out.stdout
    dropped = re.search(r"stats\s+dropped=(\d+) \(gateway\)", out.stdout)
    assert dropped, out.stdout
    # Every refusal reached the shared counters, the alert storms' included: wrk's count plus
    # requests still in flight when each run ended (at most 64 per run) plus those that filled
    # the levels first. The webhook door answers its refusals 200 "ok", as Slack would: all of them count.
    runs = re.findall(r"^  gateway (?!webhook).*\((\d+) of \d+ not 2xx", out.stdout, re.M)
    runs += re.findall(r"^  gateway webhook .*\(\d+ of (\d+) not 2xx", out.stdout, re.M)
    counted = sum(int(n) for n in runs)
    assert counted <= int(dropped.group(1)) <= counted + len(runs) * 64 + 20, out.stdout


def test_the_together_mode_loads_each_gateway_beside_the_bare_app():
    """``--together``: each gateway's rounds are paired with the bare app's, run at the same time."""
    need("wrk")
    need("redis-server")
    out = subprocess.run(
        [sys.executable, str(BENCH / "storm.py"), "--together", "--rounds", "1", "--seconds", "1", "--scenarios=plain"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    for gateway in ("gateway", "reserves", "tree"):
        assert re.search(rf"^  baseline beside {gateway} +\d+ req/s", out.stdout, re.M), out.stdout
        assert re.search(rf"^{gateway} .* ratio \d+\.\d\d", out.stdout, re.M), out.stdout
