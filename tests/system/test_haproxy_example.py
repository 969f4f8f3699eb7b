"""The example haproxy configuration (deploy/haproxy.cfg), run by the real haproxy: it logs every
request, and never the webhook door's token (the last part of its path)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from helpers import free_port, http, need, wait_for

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "wh-7b3c9f2e41d8a6c5"


def runnable(port: int) -> str:
    """deploy/haproxy.cfg on a free local port, its replicas (Docker names) replaced by a closed local port."""
    config = (ROOT / "deploy" / "haproxy.cfg").read_text()
    config = config.replace("bind :8080", f"bind 127.0.0.1:{port}")
    config = re.sub(r"server (notifier-\d) notifier-\d:8080", rf"server \1 127.0.0.1:{free_port()}", config)
    return config.replace("resolvers docker init-addr last,libc,none", "init-addr none")


def test_the_example_logs_each_request_without_the_webhook_token(tmp_path):
    binary, port = need("haproxy"), free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(runnable(port))
    subprocess.run([binary, "-c", "-q", "-f", str(config)], check=True, timeout=10)
    log = tmp_path / "haproxy.log"
    with open(log, "wb") as out:
        proxy = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _answers(port), 10, what="haproxy listening")
        http("POST", f"http://127.0.0.1:{port}/services/T0/B0/{TOKEN}?x={TOKEN}", {"text": "hi"})
        http("GET", f"http://127.0.0.1:{port}/v1/stats")
        wait_for(lambda: "/v1/stats" in log.read_text(errors="replace"), 10, what="the requests logged")
        time.sleep(0.2)
    finally:
        proxy.terminate()
        proxy.wait(10)
    written = log.read_text(errors="replace")
    assert '"POST /services/... HTTP/1.1"' in written and '"GET /v1/stats HTTP/1.1"' in written, written
    assert TOKEN not in written, written


def _answers(port: int) -> bool:
    try:
        return http("GET", f"http://127.0.0.1:{port}/healthz", timeout=1)[0] > 0
    except OSError:
        return False
