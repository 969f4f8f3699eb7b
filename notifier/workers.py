"""``notifier serve --workers N``: N gateway processes on one port, started, watched and stopped here.

Each worker is today's gateway, a process of its own (``python -m notifier serve --worker-of
PID``): it binds the port with ``SO_REUSEPORT``, so the kernel spreads connections across the
workers, and it admits and delivers like any replica. The limits stay exact because they live in
the store; each worker delivers under a consumer name of its own (the replica's, plus ``-w<i>``,
the same after a restart of that worker, so it resumes its pending entries); the counters reach
``/metrics`` of every worker through prometheus_client's multiprocess mode (``worker_metrics``).

The parent binds the port too, without listening: a port in use is one line before any worker
starts, and no other program can take the port while a worker restarts. It only starts the
workers, restarts one that dies (with a growing pause, logged), passes SIGHUP on to every worker
(each reads the configuration file again), and on SIGTERM or SIGINT stops
them all with SIGTERM (each shuts down gracefully) and exits 0 once they have. A worker never
outlives the parent: on Linux the kernel sends it SIGTERM when the parent dies
(``PR_SET_PDEATHSIG``), elsewhere it watches its parent's pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import multiprocess

if TYPE_CHECKING:
    from .settings import Settings

log = logging.getLogger("notifier.workers")

AUTO = "auto"
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
FIRST_PAUSE = 1.0  # seconds before a dead worker is started again; doubled while it keeps dying
LONGEST_PAUSE = 30.0
STEADY = 30.0  # a worker that ran this long died of something new: its next pause is the first again
STOP_PATIENCE = 30.0  # a worker's graceful shutdown takes up to 20 s (see the chart's grace period)
WATCH_EVERY = 0.1  # seconds between two looks at the workers
START_REFUSED = 2  # a worker's exit status for a start-up problem (cli._fail): a restart would not help


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container's cpuset narrows)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parse_workers(value: object) -> int:
    """``NOTIFIER_WORKERS`` / ``--workers``: a whole number of processes, 1 or more, or ``auto``."""
    text = str(value).strip()
    if text.lower() == AUTO:
        return usable_cpus()
    if not text.isdecimal() or int(text) < 1:
        raise ValueError(f"{text!r} is not a number of worker processes: give 1 or more, or auto (one per usable CPU)")
    return int(text)


def listen(host: str, port: int, shared: bool = False) -> socket.socket:
    """A socket bound to ``host:port`` (``shared``: with ``SO_REUSEPORT``, as every worker binds it)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
        0
    ]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def hold_port(host: str, port: int) -> socket.socket:
    """The parent's socket on ``host:port``: bound with ``SO_REUSEPORT``, never listening, so it takes
    no connection (the kernel spreads them over listening sockets only) but keeps the port for the
    workers. Raises ``OSError`` when the port is in use."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise OSError(f"this system has no SO_REUSEPORT: run one worker ({sys.platform})")
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
        0
    ]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def bind_to_parent(parent: int) -> None:
    """End this worker (SIGTERM: a graceful shutdown) when its parent ``parent`` dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0:
            if os.getppid() != parent:  # it died before the request took effect
                os.kill(os.getpid(), signal.SIGTERM)
            return
    threading.Thread(target=_watch_parent, args=(parent,), name="watching the parent", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class Worker:
    """One worker process and when to start it again after it died."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    pause: float = FIRST_PAUSE
    restart_at: float | None = 0.0  # time.monotonic() of its next start; None while it runs


@dataclass
class Supervisor:
    """Starts ``count`` workers with ``argv`` and the environment ``env(index)``; watches them until told to stop."""

    count: int
    argv: list[str]
    env: Callable[[int], dict[str, str]]
    metrics_dir: str
    workers: list[Worker] = field(default_factory=list)
    stopping: bool = False

    def run(self) -> int:
        """Watch until SIGTERM or SIGINT, then stop every worker; the exit status."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, self._hangup)
        self.workers = [Worker(i) for i in range(self.count)]
        while not self.stopping:
            refused = self._watch()
            if refused is not None:
                self.stopping = True
                return max(refused, self._stop_all())
            time.sleep(WATCH_EVERY)
        return self._stop_all()

    def _stop(self, signum: int, frame: object) -> None:
        log.info("%s: stopping %d workers", signal.Signals(signum).name, self.count)
        self.stopping = True

    def _hangup(self, signum: int, frame: object) -> None:
        """SIGHUP: every worker reads the configuration file again (``http/reload.py``)."""
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signal.SIGHUP)

    def _watch(self) -> int | None:
        """Start the workers due, notice those that died; a worker's refusal to start, if one refused."""
        now = time.monotonic()
        for worker in self.workers:
            if worker.proc is None:
                if worker.restart_at is not None and now >= worker.restart_at:
                    self._start(worker, now)
                continue
            status = worker.proc.poll()
            if status is None:
                continue
            if status == START_REFUSED:
                log.error("worker %d (pid %d) refused to start (status 2): stopping", worker.index, worker.proc.pid)
                return START_REFUSED
            self._died(worker, status, now)
        return None

    def _start(self, worker: Worker, now: float) -> None:
        argv = [*self.argv, "--worker-of", str(os.getpid())]
        # A session of its own: a Ctrl-C in a terminal reaches the parent, which stops the workers once.
        worker.proc = subprocess.Popen(argv, env=self.env(worker.index), start_new_session=True)
        worker.started, worker.restart_at = now, None
        log.info("worker %d started (pid %d)", worker.index, worker.proc.pid)

    def _died(self, worker: Worker, status: int, now: float) -> None:
        assert worker.proc is not None
        pid = worker.proc.pid
        _forget_gauges(pid, self.metrics_dir)
        if now - worker.started >= STEADY:
            worker.pause = FIRST_PAUSE
        log.warning(
            "worker %d (pid %d) exited with %s: starting it again in %.0f s",
            worker.index,
            pid,
            _status(status),
            worker.pause,
        )
        worker.proc, worker.restart_at = None, now + worker.pause
        worker.pause = min(LONGEST_PAUSE, worker.pause * 2)

    def _stop_all(self) -> int:
        """SIGTERM to every worker, then wait for them; 0 when each shut down cleanly."""
        running = [w.proc for w in self.workers if w.proc is not None and w.proc.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline, clean = time.monotonic() + STOP_PATIENCE, True
        for proc in running:
            try:
                status = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker pid %d did not stop within %.0f s: killed", proc.pid, STOP_PATIENCE)
                proc.kill()
                status = proc.wait()
            # Killed by the SIGTERM itself: it was still starting, before it could admit anything.
            clean = clean and status in (0, -signal.SIGTERM)
        log.info("workers stopped" if clean else "workers stopped, not all cleanly")
        return 0 if clean else 1


def _status(status: int) -> str:
    return f"signal {signal.Signals(-status).name}" if status < 0 else f"status {status}"


def _forget_gauges(pid: int, folder: str) -> None:
    """Drop the live gauges of a dead worker (its counters stay: they are counts of the host)."""
    multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]


def supervise(settings: Settings, config: str | None, env_file: str | None) -> int:
    """Run ``settings.workers`` workers of ``notifier serve`` (with ``--config`` and ``--env-file`` as given)
    until told to stop; the exit status."""
    argv = [sys.executable, "-m", "notifier", "serve", "--workers", str(settings.workers)]
    argv += [*(["--config", config] if config else []), *(["--env-file", env_file] if env_file else [])]
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        held = hold_port(settings.host, settings.port)
    except OSError as exc:
        reason = exc.strerror or exc
        print(
            f"notifier: cannot listen on {settings.host}:{settings.port} (NOTIFIER_HOST/NOTIFIER_PORT): {reason}",
            file=sys.stderr,
        )
        return START_REFUSED
    port = held.getsockname()[1]  # the port a port of 0 was given
    metrics_dir = tempfile.mkdtemp(prefix="notifier-metrics-")
    base = settings.replica_id or f"{socket.gethostname()}:{port}"
    shared = {**os.environ, "NOTIFIER_PORT": str(port), "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
    log.info(
        "%d workers on %s:%d, delivering as %s-w0 ... -w%d",
        settings.workers,
        settings.host,
        port,
        base,
        settings.workers - 1,
    )
    try:
        supervisor = Supervisor(
            settings.workers, argv, lambda i: {**shared, "NOTIFIER_REPLICA_ID": f"{base}-w{i}"}, metrics_dir
        )
        return supervisor.run()
    finally:
        held.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
