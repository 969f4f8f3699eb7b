"""Redis with replicas and Sentinels, made of real processes on free ports in temp dirs.

``Replicated`` is a primary and its replicas; ``Sentinels`` watches it with
``redis-server --sentinel`` processes. Nodes can be SIGKILLed, SIGSTOPped and
resumed like any ``RedisServer``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import redis
from helpers import RedisServer, free_port, need, wait_for

MASTER = "notifier"


def client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=2, decode_responses=True)


def freeze(node: RedisServer) -> None:
    os.kill(node.proc.pid, signal.SIGSTOP)


def thaw(node: RedisServer) -> None:
    os.kill(node.proc.pid, signal.SIGCONT)


class Replicated:
    """A primary and ``replicas`` replicas of it (``extra`` arguments for every node)."""

    def __init__(self, replicas: int = 2, extra: list[str] | None = None, configs: Path | None = None) -> None:
        """``configs``: a folder with ``primary.conf`` and ``replica.conf`` (``deploy/sentinel``) to start from."""
        primary, replica = (str(configs / f"{n}.conf") for n in ("primary", "replica")) if configs else (None, None)
        self.primary = RedisServer(extra=list(extra or []), config=primary)
        self.replicas = [RedisServer(extra=list(extra or []), config=replica) for _ in range(replicas)]

    @property
    def nodes(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    def start(self) -> Replicated:
        self.primary.start()
        for replica in self.replicas:
            replica.extra += ["--replicaof", "127.0.0.1", str(self.primary.port)]
            replica.start()
        wait_for(lambda: self.online(self.primary) == len(self.replicas), 20, what="replicas online")
        return self

    @staticmethod
    def online(node: RedisServer) -> int:
        """Replicas that ``node`` (a primary) has online, 0 when it does not answer."""
        try:
            info = client(node.port).info("replication")
        except (redis.RedisError, OSError):
            return 0
        return sum(
            1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
        )

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                thaw(node)
            node.stop(kill=True)


class Sentinels:
    """``count`` Sentinels (``redis-server --sentinel``) watching ``primary`` under the name ``notifier``."""

    def __init__(
        self,
        primary: RedisServer,
        count: int = 3,
        down_after_ms: int = 2000,
        quorum: int = 2,
        template: Path | None = None,
    ) -> None:
        """``template``: a Sentinel configuration (``deploy/sentinel/sentinel.conf``) to start from."""
        self.primary, self.count, self.down_after_ms, self.quorum = primary, count, down_after_ms, quorum
        self.template = template
        self.ports = [free_port() for _ in range(count)]
        self.procs: list[subprocess.Popen] = []
        self.dirs: list[Path] = []

    @property
    def addresses(self) -> str:
        """``NOTIFIER_REDIS_SENTINELS``."""
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self) -> Sentinels:
        binary = need("redis-server")
        for port in self.ports:
            folder = Path(RedisServer(port=port).dir)
            (folder / "sentinel.conf").write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n" + self._body())
            self.dirs.append(folder)
            self.procs.append(
                subprocess.Popen(
                    [binary, str(folder / "sentinel.conf"), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        wait_for(lambda: all(self.primary_of(p) for p in self.ports), 20, what="Sentinels watching the primary")
        wait_for(self._all_known, 30, 0.2, what="Sentinels knowing each other and the replicas")
        return self

    def _body(self) -> str:
        if self.template is None:
            return (
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} {self.quorum}\n"
                f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 2\n"
            )
        lines = [line for line in self.template.read_text().splitlines() if not line.startswith("port ")]
        return "\n".join(lines).replace(" primary 6379 ", f" 127.0.0.1 {self.primary.port} ") + "\n"

    def _all_known(self) -> bool:
        try:
            return all(
                int(client(p).execute_command("SENTINEL", "MASTER", MASTER)["num-other-sentinels"]) >= self.count - 1
                for p in self.ports
            )
        except (redis.RedisError, OSError, KeyError, TypeError):
            return False

    @staticmethod
    def primary_of(port: int) -> int | None:
        """The port of the primary the Sentinel on ``port`` names, None when it does not answer."""
        try:
            _, named = client(port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
        except (redis.RedisError, OSError, TypeError, ValueError):
            return None
        return int(named)

    def majority_names(self, port: int) -> bool:
        return sum(1 for p in self.ports if self.primary_of(p) == port) > self.count // 2

    def wait_failover(self, old: int, timeout: float = 30) -> tuple[int, float]:
        """Wait until a majority names a primary other than ``old``: (its port, when, time.monotonic())."""

        def named() -> int | None:
            ports = [self.primary_of(p) for p in self.ports]
            for port in set(ports) - {old, None}:
                if ports.count(port) > self.count // 2:
                    return port
            return None

        port = wait_for(named, timeout, 0.02, what="a new primary named by a majority")
        return port, time.monotonic()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
