"""``notifier serve --workers 2``: one port, every worker admitting and delivering, one stop for all.

Which worker answers a connection is the kernel's choice (``SO_REUSEPORT``); the tests find it
out from ``/proc`` (the worker holding the server side of the connection), so each claim about
"every worker" is checked on each one, not left to chance.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis
from helpers import Gateway, free_port, need, slack_env, wait_for
from slack_standin import SlackStandin

from notifier.delivery.group import GROUP
from notifier.store.keys import Keys

WORKERS = ["--workers", "2"]


def serve(*options: str) -> list[str]:
    return [sys.executable, "-m", "notifier", "serve", *options]


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, ended but not reaped, counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def workers_of(gateway: Gateway, count: int = 2, gone: int | None = None) -> set[int]:
    """The parent's ``count`` workers, once it has that many (none of them ``gone``)."""

    def found() -> set[int] | None:
        pids = children(gateway.proc.pid)
        return pids if len(pids) == count and gone not in pids else None

    pids = wait_for(found, 20, what=f"{count} workers")
    # Each one serving (aiohttp says so once its gateway has started): until then the kernel
    # gives every connection to those that are.
    wait_for(lambda: gateway.output().count("Running on") >= count, 30, what=f"{count} workers serving")
    return pids


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _server_inode(server_port: int, client_port: int) -> int:
    """The inode of the server side of a connection; 0 while it waits in the accept queue."""
    wanted = f"{server_port:04X}", f"{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (fields[1].split(":")[1], fields[2].split(":")[1]) == wanted:
            return int(fields[9])
    raise AssertionError("the server side of the connection is not in /proc/net/tcp")


def serving(conn: http.client.HTTPConnection, server_port: int, pids: set[int]) -> int:
    """The worker holding the server side of ``conn`` (connected): the one with its socket's inode.

    A connection the kernel has queued but no worker has accepted yet has no socket file (inode 0),
    so this waits for the accept.
    """
    client_port = conn.sock.getsockname()[1]
    inode = wait_for(lambda: _server_inode(server_port, client_port), 10, what="a worker to accept the connection")
    (pid,) = [pid for pid in pids if inode in _socket_inodes(pid)]
    return pid


def one_per_worker(gateway: Gateway, pids: set[int]) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection to each worker (new ones until the kernel gave each worker one)."""
    found: dict[int, http.client.HTTPConnection] = {}
    for _ in range(64):
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read()
        pid = serving(conn, gateway.port, pids)
        if pid in found:
            conn.close()
        else:
            found[pid] = conn
        if len(found) == len(pids):
            return found
    raise AssertionError(f"64 connections reached only the workers {sorted(found)} of {sorted(pids)}")


def call(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, data, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read().decode()


def sample(metrics: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_limits_stay_exact_across_workers_and_every_worker_shows_the_sum(redis_url, tmp_path):
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CATEGORY_LIMIT": "10/30m", "NOTIFIER_DIGEST_INTERVAL": "0"}
    gateway = Gateway(env, log_dir=str(tmp_path), command=serve(*WORKERS)).start()
    try:
        pids = workers_of(gateway)
        conns = [http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10) for _ in range(40)]
        for conn in conns:
            conn.connect()
        answered_by = [serving(conn, gateway.port, pids) for conn in conns]
        assert set(answered_by) == pids  # the 40 posts meet both workers
        start, answers = threading.Barrier(40), [0] * 40

        def post(i: int) -> None:
            start.wait()
            answers[i] = call(conns[i], "POST", "/v1/events", {"category": "db", "text": f"storm {i}"})[0]

        threads = [threading.Thread(target=post, args=(i,)) for i in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(answers) == [202] * 10 + [429] * 30
        accepted = 'notifier_events_total{category="db",outcome="accepted"}'

        def counts(metrics: str) -> tuple[float, float]:
            return sample(metrics, accepted), sample(metrics, accepted.replace("accepted", "dropped_category"))

        for pid, conn in one_per_worker(gateway, pids).items():  # whichever worker answers, the host's sum
            # The other worker's counts come at most SHARE_EVERY (1 s) late: each of the two in its time.
            wait_for(
                lambda conn=conn: counts(call(conn, "GET", "/metrics")[1]) == (10, 30),
                10,
                what=f"worker {pid}'s /metrics to show the 10 admitted events and the 30 refused",
            )
            assert json.loads(call(conn, "GET", "/v1/stats")[1])["accepted"] == 10
    finally:
        assert gateway.stop() == 0, gateway.output()


def _consumers(client: redis.Redis) -> set[str]:
    pending = client.xpending(Keys("notifier").outbox, GROUP)
    return {c["name"].decode() for c in pending["consumers"] if c["pending"]}


def test_every_worker_delivers_under_a_name_of_its_own(redis_url, tmp_path):
    slow = SlackStandin(post_latency=1.0).start()  # sends stay in flight long enough to be seen
    env = {**slack_env(redis_url, slow), "NOTIFIER_WORKERS": "2", "NOTIFIER_REPLICA_ID": "host-a"}
    gateway = Gateway({**env, "NOTIFIER_CHANNEL_RATE": "100/1s"}, log_dir=str(tmp_path), command=serve()).start()
    client = redis.Redis.from_url(redis_url)
    try:
        workers_of(gateway)  # NOTIFIER_WORKERS=2 starts two
        seen: set[str] = set()
        for i in range(12):
            assert gateway.post({"category": "ops", "text": f"deliver-{i}"})[0] == 202
            seen |= _consumers(client)
            time.sleep(0.05)
        wait_for(lambda: (seen.update(_consumers(client)) or seen) >= {"host-a-w0", "host-a-w1"}, 20, what="both")
        assert seen == {"host-a-w0", "host-a-w1"}  # each worker took entries to send, under its own name
        wait_for(lambda: len(slow.texts()) >= 12, 60, what="12 messages delivered")
        time.sleep(1)  # a second copy, if any, would arrive now
        texts = [re.search(r"deliver-\d+", t).group() for t in slow.texts()]
        assert sorted(texts) == sorted(f"deliver-{i}" for i in range(12))  # each exactly once
    finally:
        client.close()
        assert gateway.stop() == 0, gateway.output()
        slow.stop()


def test_one_sigterm_stops_every_worker_and_a_restart_resumes_what_they_held(redis_url, tmp_path):
    # Slack hangs longer than the 5 s each worker gives its sends in flight: they hand back what
    # they hold, pending under their own names, which a restart with the same names resumes at once
    # (another replica would wait NOTIFIER_CLAIM_IDLE, 10 minutes here).
    hung = SlackStandin(post_latency=8).start()
    env = {**slack_env(redis_url, hung), "NOTIFIER_REPLICA_ID": "host-b", "NOTIFIER_CLAIM_IDLE": "10m"}
    env["NOTIFIER_CHANNEL_RATE"] = "100/1s"
    port = free_port()
    gateway = Gateway(env, port=port, log_dir=str(tmp_path), command=serve(*WORKERS)).start()
    client = redis.Redis.from_url(redis_url)
    try:
        pids = workers_of(gateway)
        for i in range(12):
            assert gateway.post({"category": "ops", "text": f"held-{i}"})[0] == 202
            time.sleep(0.05)
        wait_for(lambda: hung.in_flight == 2, 10, what="a send in flight in each worker")
        began = time.monotonic()
        assert gateway.stop(timeout=40) == 0, gateway.output()
        assert time.monotonic() - began < 20
        assert not [pid for pid in pids if alive(pid)]  # no worker outlives the stop
        assert "Traceback" not in gateway.output() and "workers stopped\n" in gateway.output()
        assert client.xlen(Keys("notifier").outbox) == 12  # nothing lost: every admitted event waits
        assert _consumers(client) == {"host-b-w0", "host-b-w1"}
    finally:
        gateway.stop(kill=True)
        hung.stop()
    slack = SlackStandin().start()
    again = Gateway({**env, "NOTIFIER_SLACK_API_URL": slack.api_url}, port=port, command=serve(*WORKERS))
    try:
        again.start()
        wait_for(lambda: len(slack.texts()) >= 12, 30, what="the 12 held events delivered after the restart")
        texts = sorted(re.search(r"held-\d+", t).group() for t in slack.texts())
        assert texts == sorted(f"held-{i}" for i in range(12))
        wait_for(lambda: client.xlen(Keys("notifier").outbox) == 0, 10, what="the outbox emptied")
    finally:
        client.close()
        assert again.stop() == 0, again.output()
        slack.stop()


def test_a_dead_worker_is_started_again_and_none_outlives_the_parent(redis_url, tmp_path):
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_DIGEST_INTERVAL": "0"}
    gateway = Gateway(env, log_dir=str(tmp_path), command=serve(*WORKERS)).start()
    first: set[int] = set()
    now: set[int] = set()
    try:
        first = workers_of(gateway)
        doomed = min(first)
        os.kill(doomed, signal.SIGKILL)
        wait_for(lambda: "exited with signal SIGKILL: starting it again in 1 s" in gateway.output(), 10, what="log")
        now = workers_of(gateway, gone=doomed)
        assert len(now & first) == 1
        wait_for(lambda: gateway.output().count("Running on") == 3, 30, what="the new worker serving")
        assert gateway.post({"category": "db", "text": "after the restart"})[0] == 202
        gateway.proc.kill()  # the parent dies without stopping anyone: the kernel stops the workers
        gateway.proc.wait(5)
        wait_for(lambda: not [pid for pid in now if alive(pid)], 20, what="the workers to end with their parent")
    finally:
        gateway.stop(kill=True)
        for pid in first | now:  # what a failure here left behind
            if alive(pid) and b"--worker-of" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


def test_a_port_in_use_is_one_line_before_any_worker_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "NOTIFIER_HOST": "127.0.0.1", "NOTIFIER_PORT": str(port)}
        env["NOTIFIER_REDIS_URL"] = "redis://127.0.0.1:1/0"  # never reached: the port is checked first
        done = subprocess.run(serve(*WORKERS), env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"notifier: cannot listen on 127.0.0.1:{port} (NOTIFIER_HOST/NOTIFIER_PORT): Address already in use"
    ]


def test_the_workers_benchmark_runs_and_prints_its_ratio():
    need("wrk")
    bench = Path(__file__).resolve().parents[2] / "bench" / "workers.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--rounds", "2", "--seconds", "1"], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^ratio \d+\.\d\d \(of the medians\); per-round ratios \d+\.\d\d median", done.stdout, re.M)
    counts = re.findall(r"\((\d+) of (\d+) not 2xx\)", done.stdout)
    assert len(counts) == 4 and all(refused == total != "0" for refused, total in counts)  # every storm event refused


def test_sighup_to_the_parent_reloads_every_worker(redis_url, tmp_path):
    config = tmp_path / "notifier.yaml"
    config.write_text("levels: [{name: global, rules: 100/1h}]\n")
    env = {"NOTIFIER_REDIS_URL": redis_url, "NOTIFIER_CONFIG": str(config), "NOTIFIER_DIGEST_INTERVAL": "0"}
    gateway = Gateway(env, log_dir=str(tmp_path), command=serve(*WORKERS)).start()
    try:
        connections = one_per_worker(gateway, workers_of(gateway))
        before = {pid: json.loads(call(conn, "GET", "/healthz")[1])["config"] for pid, conn in connections.items()}
        config.write_text("levels: [{name: global, rules: 200/1h}]\n")
        gateway.proc.send_signal(signal.SIGHUP)

        def reloaded() -> bool:
            now = {pid: json.loads(call(conn, "GET", "/healthz")[1])["config"] for pid, conn in connections.items()}
            return all(now[pid] != before[pid] for pid in now)

        wait_for(reloaded, 10, what="every worker's reload")
        assert gateway.proc.poll() is None  # the parent lives on: SIGHUP is passed on, not its death
        conn = next(iter(connections.values()))
        entries = json.loads(call(conn, "GET", "/v1/audit?action=reload")[1])["entries"]
        assert [e["by"] for e in entries] == ["signal", "signal"], entries  # each worker's, by the signal
    finally:
        gateway.stop()
