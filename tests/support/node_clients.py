"""Slack's own Node clients (``@slack/web-api``, ``@slack/webhook``), from the npm registry.

Installed by the tests on first use with ``npm install`` into a folder of the test
environment (``$VIRTUAL_ENV/node-slack``, out of git, reused afterwards), and run with
``node``: a script gets the gateway's URLs and tokens in its environment and prints
one JSON line of what it saw.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import need

PACKAGES = ("@slack/web-api@8", "@slack/webhook@8")


def node_modules() -> Path:
    """The folder of the installed clients (installed now if missing)."""
    folder = Path(os.environ.get("VIRTUAL_ENV") or sys.prefix) / "node-slack"
    modules = folder / "node_modules"
    folder.mkdir(parents=True, exist_ok=True)
    # One install at a time: the suite's workers (pytest-xdist) may all want it first.
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((modules / name.rpartition("@")[0] / "package.json").exists() for name in PACKAGES):
            command = [need("npm"), "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel=error"]
            done = subprocess.run([*command, *PACKAGES], capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"npm install {' '.join(PACKAGES)} failed:\n{done.stdout}\n{done.stderr}"
    return modules


def run_node(script: str, env: dict[str, str], timeout: float = 60) -> dict:
    """Run ``script`` with the clients on NODE_PATH; its last line of output, as JSON."""
    node = need("node")
    done = subprocess.run(
        [node, "-e", script],
        env={**os.environ, "NODE_PATH": str(node_modules()), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"node failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return {"result": json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}
