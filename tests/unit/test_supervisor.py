"""The parent of ``notifier serve --workers N``: how it waits to start a dead worker again, and when it gives up."""

from __future__ import annotations

import os
import signal
import sys
from types import SimpleNamespace

from notifier.workers import Supervisor, Worker


def test_a_worker_that_keeps_dying_waits_longer_each_time_and_no_longer_once_it_ran_a_while(tmp_path):
    supervisor = Supervisor(1, [], lambda i: {}, str(tmp_path))
    worker = Worker(0)
    restarts = []
    for started, died in ((0, 5), (6, 7), (9, 10), (14, 44)):  # the last one ran 30 s
        worker.proc, worker.started = SimpleNamespace(pid=123), started
        supervisor._died(worker, 1, died)
        restarts.append(worker.restart_at - died)
    assert restarts == [1, 2, 4, 1]
    assert worker.proc is None


def test_a_refusal_to_start_stops_them_all_with_status_2_and_a_sigterm_with_0(tmp_path):
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    refusing = [sys.executable, "-c", "import sys; sys.exit(2)"]  # what cli._fail answers a bad start
    sleeping = [sys.executable, "-c", "import time; time.sleep(60)"]
    try:
        assert Supervisor(2, refusing, lambda i: dict(os.environ), str(tmp_path)).run() == 2
        supervisor = Supervisor(1, sleeping, lambda i: dict(os.environ), str(tmp_path))
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # then a SIGALRM...
        signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))  # ...becomes the stop
        assert supervisor.run() == 0  # stopped by its SIGTERM while sleeping: a clean stop
        assert supervisor.workers[0].proc.poll() is not None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
