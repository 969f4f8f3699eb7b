"""Templates compile and render in a process of their own: one that runs away stops there, not the gateway.

A template is its author's code: the sandbox keeps it from Python's objects, but a
loop of ``range(100000)`` in another, a string doubled forty times or ``9**9**9``
would hold the event loop (admission included) or take the gateway's memory, and
Jinja2 evaluates constant expressions when it compiles (``{{ 'x' * 10**9 }}``). So
the gateway compiles nothing itself: it starts ``python -m notifier.slack.renderer``
and talks to it in JSON lines: first the templates (answered by what does not
compile, and the fields each reads), then one event's values per line, answered by
the text and blocks, or why it failed. The process

* has a bounded address space (what it used once started, plus :data:`MEMORY`;
  where the system enforces it): a render that allocates more fails;
* is killed when a render takes longer than :data:`RENDER_SECONDS`, and started
  again for the next one; the template that took so long is not rendered for
  :data:`REST_SECONDS` (its events take the built-in shape meanwhile), so a slow
  template costs one wait, not one per event;
* gets an environment with nothing but the paths Python needs: the gateway's
  secrets are not there to be read, whatever a template reaches;
* ends when its input closes, so it never outlives the gateway.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from ..errors import TemplateError
from .sandbox import Compiled, compile_template, render

if sys.platform != "win32":
    import resource

RENDER_SECONDS = 1.0  # a render takes milliseconds; one that takes this long is stopped
REST_SECONDS = 60.0  # how long a template that took too long is left aside
START_SECONDS = 30.0  # starting the process (importing Jinja2) on a loaded machine
MEMORY = 256 * 2**20  # bytes of address space a render may add
_KEPT_ENVIRONMENT = ("LD_LIBRARY_PATH", "SYSTEMROOT")  # what some Pythons need to start


class Report(NamedTuple):
    """What compiling the templates found: problems (template, place, why), and the fields each reads."""

    problems: list[tuple[str, str, str]]
    fields: dict[str, list[str]]


class Renderer:
    """The render process of one gateway (or command): started when first needed, restarted after a kill."""

    def __init__(self, templates: Mapping[str, tuple[str, list[dict[str, Any]] | None]]) -> None:
        self._setup = orjson.dumps({name: {"text": t, "blocks": b} for name, (t, b) in templates.items()})
        self._process: subprocess.Popen[bytes] | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="templates")  # the one thread that talks to it
        self._lock = asyncio.Lock()
        # template -> time.monotonic() until which it is left aside ("": the process would not start)
        self._resting: dict[str, float] = {}
        self._why: dict[str, str] = {}
        self._report = Report([], {})

    async def render(self, name: str, context: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """The text and blocks template ``name`` makes of ``context``; :class:`TemplateError` says why not."""
        now = time.monotonic()
        resting = next((k for k in (name, "") if now < self._resting.get(k, 0.0)), None)
        if resting is not None:
            raise TemplateError(f"{self._why[resting]}: left aside for {REST_SECONDS:g}s")
        request = orjson.dumps({"t": name, "c": context}) + b"\n"
        async with self._lock:
            if self._process is None or self._process.poll() is not None:
                await self._run(self._start, START_SECONDS, "")
            if self._report.problems:
                self._resting[""], self._why[""] = time.monotonic() + REST_SECONDS, "templates that do not compile"
                raise TemplateError(self._why[""])
            line = await self._run(functools.partial(self._ask, request), RENDER_SECONDS, name)
        return _answer(line)

    async def report(self) -> Report:
        """Start the process: what compiling the templates found (a process that does not start: one problem)."""
        try:
            async with self._lock:
                await self._run(self._start, START_SECONDS, "")
        except TemplateError as exc:
            return Report([("", "", f"the templates could not be compiled: {exc}")], {})
        return self._report

    async def _run(self, work: Callable[[], Any], seconds: float, name: str) -> Any:
        """``work`` in the pool's thread; past ``seconds`` (or failing) the process is killed, ``name`` left aside."""
        try:
            return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(self._pool, work), seconds)
        except (asyncio.TimeoutError, TemplateError, OSError, ValueError) as exc:  # ValueError: not JSON
            self.close(pool=False)
            why = f"taking longer than {seconds:g}s" if isinstance(exc, asyncio.TimeoutError) else str(exc)
            self._resting[name], self._why[name] = time.monotonic() + REST_SECONDS, why
            raise TemplateError(why) from exc

    def close(self, pool: bool = True) -> None:
        """Stop the process (the next render starts another); ``pool``: for good."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()  # its thread, if reading, reads the end of the output now
            process.wait()
            for pipe in _pipes(process):
                pipe.close()
        if pool:
            self._pool.shutdown(wait=False)

    def _start(self) -> None:
        """Start the process unless it runs (in the pool's thread: it blocks until the templates compiled)."""
        if self._process is not None and self._process.poll() is None:
            return
        paths = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        kept = {k: os.environ[k] for k in _KEPT_ENVIRONMENT if k in os.environ}
        process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**kept, **paths}
        )
        self._process = process
        ready = self._exchange(process, self._setup + b"\n")
        if not ready:
            raise TemplateError("the render process stopped while compiling (out of memory?)")
        answer = orjson.loads(ready)
        self._report = Report([tuple(p) for p in answer["problems"]], answer["fields"])

    def _ask(self, request: bytes) -> bytes:
        process = self._process
        return self._exchange(process, request) if process is not None else b""

    @staticmethod
    def _exchange(process: subprocess.Popen[bytes], request: bytes) -> bytes:
        """Send one line and read the answer (empty when the process ended or was killed)."""
        stdin, stdout = _pipes(process)
        try:
            stdin.write(request)
            stdin.flush()
            return stdout.readline()
        except (OSError, ValueError):  # the process ended; ValueError: its pipe was closed meanwhile
            return b""


def _pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    assert process.stdin is not None and process.stdout is not None  # both are pipes (see _start)
    return process.stdin, process.stdout


def _answer(line: bytes) -> tuple[str, list[Any]]:
    try:
        answer = orjson.loads(line) if line else {"failed": "the render process stopped (out of memory?)"}
    except orjson.JSONDecodeError:
        answer = {"failed": "the render process answered what is not JSON"}
    if "failed" in answer:
        raise TemplateError(str(answer["failed"]))
    return str(answer["text"]), list(answer["blocks"])


# -- the process ---------------------------------------------------------------------


def main() -> None:
    """The render process: compile the templates of the first line, say what it found, then render line by line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the gateway's to handle; its end closes our input
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    setup = orjson.loads(stdin.readline() or b"{}")
    _limit_memory()
    templates, report = _compile_all(setup)
    _send(stdout, report)
    if report["problems"]:
        return
    for line in stdin:
        request = orjson.loads(line)
        _send(stdout, _render_one(templates, request["t"], request["c"]))


def _compile_all(setup: dict[str, Any]) -> tuple[dict[str, Compiled], dict[str, Any]]:
    templates: dict[str, Compiled] = {}
    problems, fields = [], {}
    try:
        for name, raw in setup.items():
            templates[name], wrong = compile_template(raw["text"], raw["blocks"])
            problems += [(name, p.place, p.message) for p in wrong]
            fields[name] = sorted(templates[name].fields)
    except MemoryError:
        problems.append(("", "", f"compiling them used more than {MEMORY // 2**20} MiB"))
    return templates, {"problems": problems, "fields": fields}


def _send(stdout: IO[bytes], answer: dict[str, Any]) -> None:
    stdout.write(orjson.dumps(answer) + b"\n")
    stdout.flush()


def _render_one(templates: Mapping[str, Compiled], name: str, context: dict[str, Any]) -> dict[str, Any]:
    try:
        text, blocks = render(templates[name], context)
    except MemoryError:
        return {"failed": f"used more than {MEMORY // 2**20} MiB"}
    except Exception as exc:  # whatever a template raises is a failure of this event, not of the process
        return {"failed": f"{type(exc).__name__}: {exc}"[:300]}
    return {"text": text, "blocks": blocks}


def _limit_memory() -> None:
    """What the process uses now plus :data:`MEMORY`, as its address space (Linux; elsewhere the time bound only)."""
    statm = Path("/proc/self/statm")
    if sys.platform == "win32" or not statm.exists():
        return
    limit = int(statm.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE") + MEMORY
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


if __name__ == "__main__":
    main()
