"""The programs the tests start, found on this machine: ``need`` and what installs each.

A missing program fails the test that needs it, naming the command that
installs it (``tests/run`` installs them all): the suite never turns green by
skipping what it could not run.
"""

from __future__ import annotations

import os
import shutil

import pytest

# What installs each program the system tests start: Debian/Ubuntu, then macOS (Homebrew).
INSTALL = {
    "redis-server": ("redis-server", "redis"),
    "redis-cli": ("redis-tools", "redis"),
    "haproxy": ("haproxy", "haproxy"),
    "prometheus-alertmanager": ("prometheus-alertmanager", "alertmanager"),
    "faketime": ("faketime", "libfaketime"),
    "wrk": ("wrk", "wrk"),
    "node": ("nodejs", "node"),
    "chromium": ("chromium", "chromium"),  # the console's browser tests drive it with Playwright
    "cc": ("gcc", "gcc"),  # builds the wall-clock shift for redis-server (ShiftedClock)
    "npm": ("npm", "node"),  # fetches helm (tests/support/helm.py) and Slack's Node clients (node_clients.py)
    # strace sees every write a pod's gateway tries (tests/support/pod.py); Linux only
    "strace": ("strace", "(no formula: Linux only)"),
}
ALIASES = {"prometheus-alertmanager": ("alertmanager",)}  # Homebrew's name of the program


def need(program: str) -> str:
    """The path of ``program``; without it the test fails, naming the command that installs it."""
    for name in (program, *ALIASES.get(program, ())):
        path = shutil.which(name) or next(
            (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/usr/local/sbin/{name}") if os.path.exists(p)), None
        )
        if path:
            return path
    debian, brew = INSTALL.get(program, (program, program))
    pytest.fail(
        f"{program} is not installed: run tests/run, or install it with "
        f"`sudo apt-get install -y {debian}` (Debian/Ubuntu) or `brew install {brew}` (macOS)",
        pytrace=False,
    )
