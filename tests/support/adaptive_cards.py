"""The Adaptive Cards JavaScript library (npm ``adaptivecards``), reading cards as Teams' renderers do.

Installed by the tests on first use with ``npm install`` of one exact version into a folder of the
test environment (``$VIRTUAL_ENV/node-adaptivecards``, out of git, reused afterwards; npm writes its
``package-lock.json`` there), like Slack's Node clients (``node_clients.py``). One ``node`` process
per test process reads cards, one JSON line each, and answers what the library said of each:

- ``new AdaptiveCard().parse(json, context)`` with a ``SerializationContext`` targeting version 1.5:
  every event the context records (an unknown element or action type, an invalid property value,
  an unsupported version...);
- then ``card.validateProperties()``: every validation event (a required property missing, a
  collection that cannot be empty, too many actions...).

Events of kind ``Hint`` and ``Deprecated`` are warnings; any other is an error.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from helpers import need

PACKAGE = "adaptivecards@3.0.6"  # the library, pinned: a new release must not change what a test reads
WARNINGS = ("Hint", "Deprecated")

SCRIPT = r"""
const AC = require("adaptivecards/dist/adaptivecards.js");  // the UMD build: the ESM one does not load in Node
const readline = require("readline");
const WARN = new Set(%(warnings)s);
function describe(event) {
  const kind = AC.ValidationEvent[event.event];
  const source = event.source && event.source.getJsonTypeName ? event.source.getJsonTypeName() : "";
  return {kind, message: (source ? source + ": " : "") + event.message};
}
function check(json) {
  const card = new AC.AdaptiveCard();
  const context = new AC.SerializationContext(AC.Versions.v1_5);
  const events = [];
  card.parse(json, context);
  for (let i = 0; i < context.eventCount; i++) events.push(describe(context.getEventAt(i)));
  for (const event of card.validateProperties().validationEvents) events.push(describe(event));
  if (json.version !== "1.5") events.push({kind: "UnsupportedCardVersion", message: "version " + json.version});
  return {
    errors: events.filter(e => !WARN.has(e.kind)),
    warnings: events.filter(e => WARN.has(e.kind)),
  };
}
readline.createInterface({input: process.stdin}).on("line", line => {
  let answer;
  try { answer = check(JSON.parse(line)); }
  catch (error) { answer = {errors: [{kind: "Exception", message: String(error)}], warnings: []}; }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
"""


@dataclass(frozen=True)
class CardReport:
    """What the library said of one card: ``errors`` (it would not show as sent) and ``warnings``."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def node_modules() -> Path:
    """The folder of the installed library (installed now if missing)."""
    folder = Path(os.environ.get("VIRTUAL_ENV") or sys.prefix) / "node-adaptivecards"
    modules = folder / "node_modules"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".install.lock", "w") as lock:  # one install at a time across pytest-xdist workers
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed_version(modules) != PACKAGE.rpartition("@")[2]:
            command = [need("npm"), "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel=error"]
            done = subprocess.run([*command, "--save-exact", PACKAGE], capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"npm install {PACKAGE} failed:\n{done.stdout}\n{done.stderr}"
    return modules


def installed_version(modules: Path) -> str:
    """The version of the library in ``modules`` ("" if none)."""
    try:
        return str(json.loads((modules / "adaptivecards" / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return ""


class CardValidator:
    """One ``node`` process running the library; :meth:`check` is safe from any thread."""

    def __init__(self) -> None:
        script = SCRIPT % {"warnings": json.dumps(list(WARNINGS))}
        self._process = subprocess.Popen(
            [need("node"), "-e", script],
            env={**os.environ, "NODE_PATH": str(node_modules())},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()

    def check(self, card: dict) -> CardReport:
        """What the library says of ``card`` (the Adaptive Card itself, not the webhook's envelope)."""
        with self._lock:
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps(card) + "\n")
            self._process.stdin.flush()
            answer = json.loads(self._process.stdout.readline())
        return CardReport(
            [f"{e['kind']}: {e['message']}" for e in answer["errors"]],
            [f"{e['kind']}: {e['message']}" for e in answer["warnings"]],
        )

    def close(self) -> None:
        """End the ``node`` process."""
        if self._process.poll() is None:
            self._process.stdin.close()  # type: ignore[union-attr]
            self._process.wait(10)


_shared: CardValidator | None = None
_shared_lock = threading.Lock()


def validator() -> CardValidator:
    """The test process's validator, started on first use and ended at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CardValidator()
            atexit.register(_shared.close)
        return _shared
