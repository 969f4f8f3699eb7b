"""A fleet: gateway processes on one Redis behind a real haproxy, the last with its clock an hour off.

The only clock the limiter reads is Redis ``TIME`` inside the admission script,
so a replica whose own clock is wrong admits exactly what the others would.
"""

from __future__ import annotations

import contextlib
import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

from helpers import Gateway, free_port, http, need, wait_for

REPLICAS = 3
SKEW = "-1h"  # libfaketime offset of the last replica
SKEW_SECONDS = 3600

HAPROXY_CFG = """\
global
    maxconn 2048

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s

frontend notifier
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz
{servers}
"""


def skewed_clock() -> dict[str, str]:
    """Environment that runs a process under libfaketime with its clock ``SKEW`` off.

    LD_PRELOAD rather than the ``faketime`` wrapper: the wrapper forks, so stopping
    it would leave the gateway running.
    """
    need("faketime")  # the Debian package that ships the library
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not found:
        need("libfaketime.so.1")  # fails in CI, skips elsewhere
    return {"LD_PRELOAD": found[0], "FAKETIME": SKEW}


class Fleet:
    """Gateways on one Redis behind haproxy; ``url`` is the balancer's address."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix="notifier-fleet-"))
        self.gateways: list[Gateway] = []
        self.haproxy: subprocess.Popen | None = None
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def skewed(self) -> Gateway:
        return self.gateways[-1]

    def start(self) -> Fleet:
        skew = skewed_clock()
        for index in range(REPLICAS):
            env = {**self.env, "NOTIFIER_REPLICA_ID": f"replica-{index}"}
            if index == REPLICAS - 1:
                env.update(skew)
            self.gateways.append(Gateway(env, log_dir=str(self.dir)).start())
        self._start_haproxy()
        return self

    def _start_haproxy(self) -> None:
        binary = need("haproxy")
        servers = "\n".join(
            f"    server replica-{i} 127.0.0.1:{g.port} check inter 500ms" for i, g in enumerate(self.gateways)
        )
        config = self.dir / "haproxy.cfg"
        config.write_text(HAPROXY_CFG.format(port=self.port, servers=servers))
        subprocess.run([binary, "-c", "-q", "-f", str(config)], check=True, timeout=10)
        with open(self.dir / "haproxy.log", "ab") as log:
            self.haproxy = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._balancing, 15, what="haproxy forwarding to the replicas")

    def _balancing(self) -> bool:
        if self.haproxy.poll() is not None:
            raise AssertionError((self.dir / "haproxy.log").read_text(errors="replace"))
        try:
            return all(http("GET", self.url + "/readyz", timeout=1)[0] == 200 for _ in range(REPLICAS))
        except OSError:
            return False

    def post(self, body: dict) -> tuple[int, dict]:
        status, answer, _ = http("POST", self.url + "/v1/events", body)
        return status, answer

    def get(self, path: str) -> dict:
        status, answer, _ = http("GET", self.url + path)
        assert status == 200, (path, status, answer)
        return answer

    def stop(self) -> None:
        if self.haproxy and self.haproxy.poll() is None:
            self.haproxy.terminate()
            self.haproxy.wait(10)
        for gateway in self.gateways:
            gateway.stop()
            with contextlib.suppress(AttributeError):
                gateway.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
