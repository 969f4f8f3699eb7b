"""Two gateways under one storm, round by round in ABBA order, and the report of the pair.

``bench/workers.py`` (one worker against two) and ``bench/before_after.py`` (one build against
another) both load two gateways in turn with wrk (``storm.lua``, 64 connections), alternating
which goes first so that a load that drifts favours neither, and print each round's rate, the
ratio of the medians, the spread of the per-round ratios and each one's CPU per request.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable

from helpers import Gateway
from storm import wrk


def rounds(
    gateways: dict[str, Gateway], count: int, seconds: int, script_args: list[str], cpu: Callable[[Gateway], float]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Requests/s of each gateway (keyed by its label), round by round in ABBA order, and the CPU
    seconds ``cpu`` says each spent per request, in microseconds."""
    rates: dict[str, list[float]] = {label: [] for label in gateways}
    spent, served = dict.fromkeys(gateways, 0.0), dict.fromkeys(gateways, 0)
    for round_ in range(count):
        for label in list(gateways) if round_ % 2 == 0 else list(gateways)[::-1]:
            before = cpu(gateways[label])
            rate, total, refused = wrk(gateways[label].url + "/v1/events", seconds, 64, script_args)
            spent[label] += cpu(gateways[label]) - before
            served[label] += total
            rates[label].append(rate)
            print(f"  {label:11}  {rate:9.0f} req/s  ({refused} of {total} not 2xx)", flush=True)
    return rates, {label: spent[label] / max(1, served[label]) * 1e6 for label in gateways}


def report(rates: dict[str, list[float]], ratio: str, cpu_line: str, load: tuple[float, float]) -> None:
    """Print each gateway's median and rounds, the second's ratio to the first (named ``ratio``),
    ``cpu_line`` and the load average before and after."""
    first, second = list(rates)
    per_round = sorted(b / a for a, b in zip(rates[first], rates[second], strict=True))
    print()
    for label, each in rates.items():
        print(
            f"{label:11}  {statistics.median(each):9.0f} req/s (median; rounds {', '.join(f'{r:.0f}' for r in each)})"
        )
    medians = statistics.median(rates[second]) / statistics.median(rates[first])
    print(
        f"{ratio} {medians:.2f} (of the medians); per-round ratios {statistics.median(per_round):.2f} median, "
        f"{per_round[0]:.2f}-{per_round[-1]:.2f} spread"
    )
    print(cpu_line)
    print(f"load average {load[0]:.2f} before, {load[1]:.2f} after; {os.cpu_count()} CPUs")
