"""The gateway started from what the chart renders, as a pod's container: it serves, on a read-only root.

Each ci/ values file is rendered with the addresses of a real Redis, Sentinel or Cluster this test
starts (and of the Slack stand-in) on top, and ``notifier serve`` runs with the container's
environment, volumes, user and read-only root file system taken from the rendered Deployment
(tests/support/pod.py, sandbox.py): it must become ready on the readiness probe's path, accept an
event, deliver it, serve the console, and stop cleanly on SIGTERM within the grace period.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from helm import CHART, render
from helpers import RedisServer, free_port, http, wait_for
from pod import Pod
from slack_standin import TOKEN, SlackStandin
from test_cluster import cluster_port
from topology import Replicated, Sentinels

from notifier.store.keys import Keys

CI = CHART / "ci"
SETTINGS_SECRET = {  # the Secret ci/sentinel-values.yaml names (existingSecret), made beforehand as a user would
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "notifier-settings"},
    "stringData": {"NOTIFIER_SLACK_BOT_TOKEN": TOKEN, "NOTIFIER_API_TOKENS": "oncall-token"},
}


@contextlib.contextmanager
def store(kind: str, values: dict) -> Iterator[dict]:
    """A real store for the ci values ``kind``; yields the values that point the chart at it."""
    if kind == "single":  # with the password the chart's Secret gives the gateway
        server = RedisServer(extra=["--requirepass", values["secrets"][values["redis"]["passwordKey"]]]).start()
        try:
            yield {"redis": {"url": f"redis://127.0.0.1:{server.port}/0"}}
        finally:
            server.stop()
    elif kind == "sentinel":  # a primary, the replica minReplicas waits for, a Sentinel
        replicated = Replicated(replicas=1).start()
        sentinels = Sentinels(replicated.primary, count=1, quorum=1).start()
        try:
            yield {"redis": {"sentinels": [sentinels.addresses]}}
        finally:
            sentinels.stop()
            replicated.stop()
    else:
        node = one_node_cluster()
        try:
            yield {"redis": {"url": f"redis://127.0.0.1:{node.port}/0"}}
        finally:
            node.stop()


def one_node_cluster() -> RedisServer:
    """A Redis Cluster of one master that holds every slot."""
    node = RedisServer(port=cluster_port(), extra=["--cluster-enabled", "yes"])
    node.extra += ["--cluster-config-file", f"{node.dir}/nodes.conf"]
    client = redis.Redis(port=node.start().port, decode_responses=True)
    try:
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: client.execute_command("CLUSTER INFO")["cluster_state"] == "ok", 20, what="cluster_state:ok")
    except BaseException:
        node.stop()
        raise
    finally:
        client.close()
    return node


def pod_of(tmp_path: Path, kind: str, slack: SlackStandin, at: dict, trace: bool = False) -> Pod:
    """The pod of ci/KIND-values.yaml with the store ``at``, this machine's Slack stand-in and a free port."""
    local = {**at, "containerPort": free_port(), "env": {"NOTIFIER_SLACK_API_URL": slack.api_url}}
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(local))
    objects = render(CI / f"{kind}-values.yaml", tmp_path / "local.yaml")
    return Pod(objects, extra=[SETTINGS_SECRET] if kind == "sentinel" else [], trace=trace)


def delivered(pod: Pod, slack: SlackStandin, text: str) -> int:
    """How many times ``text`` reached Slack (or, without a bot token, the console sink's output)."""
    if "NOTIFIER_SLACK_BOT_TOKEN" in pod.environment():
        return sum(text in t for t in slack.texts())
    return pod.output().count(text)


def bearer(pod: Pod) -> dict[str, str]:
    """An Authorization header with the first of the pod's NOTIFIER_API_TOKENS (none when open)."""
    tokens = pod.environment().get("NOTIFIER_API_TOKENS")
    return {"Authorization": f"Bearer {tokens.split(',')[0]}"} if tokens else {}


def unknown_settings(output: str) -> list[str]:
    """Warnings of settings the gateway does not know."""
    return [line for line in output.splitlines() if "unknown setting" in line]


@pytest.mark.parametrize("kind", ["single", "sentinel", "cluster"])
def test_the_chart_s_container_serves_on_its_store(tmp_path, slack, kind):
    values = yaml.safe_load((CI / f"{kind}-values.yaml").read_text())
    with store(kind, values) as at:
        pod = pod_of(tmp_path, kind, slack, at)
        try:
            pod.start()  # the startup probe's path answers 200, then the readiness probe's (/readyz)
            assert http("GET", pod.probe_url("livenessProbe"))[0] == 200
            status, _, head = http("GET", pod.url + "/")
            assert status == 200 and head["Content-Type"].startswith("text/html")  # the console
            text = f"deployed by helm on {kind}"
            answer = http("POST", pod.url + "/v1/events", {"category": "deploy", "text": text}, headers=bearer(pod))
            assert answer[0] == 202, answer
            wait_for(lambda: delivered(pod, slack, text), 15, what="the event delivered")
            assert http("GET", pod.url + "/metrics")[0] == 200
            levels = [level["name"] for level in http("GET", pod.url + "/v1/limits")[1]["levels"]]
            wanted = [level["name"] for level in values.get("config", {}).get("levels", [])] or ["global", "category"]
            assert levels == wanted  # the gateway runs the tree of the chart's configuration file
            code, seconds = pod.stop()
            assert code == 0 and seconds < pod.spec["terminationGracePeriodSeconds"], (code, seconds, pod.output())
            assert "Traceback" not in pod.output() and unknown_settings(pod.output()) == [], pod.output()
        finally:
            pod.close()


@pytest.mark.parametrize("kind", ["single", "sentinel", "cluster"])
def test_the_configuration_file_is_where_notifier_config_says(tmp_path, slack, kind):
    values = yaml.safe_load((CI / f"{kind}-values.yaml").read_text())
    pod = pod_of(tmp_path, kind, slack, {})
    try:
        read = pod.exec(
            ["python", "-c", "import os, sys; sys.stdout.write(open(os.environ['NOTIFIER_CONFIG']).read())"]
        )
        assert read.returncode == 0, read.stdout + read.stderr
        assert (yaml.safe_load(read.stdout) or {}) == values.get("config", {})
        checked = pod.exec(["notifier", "check-config", pod.environment()["NOTIFIER_CONFIG"]])
        assert checked.returncode == 0 and checked.stdout.startswith(pod.environment()["NOTIFIER_CONFIG"] + ": ok"), (
            checked.stdout + checked.stderr
        )
    finally:
        pod.close()


WRITE_PROBE = """
import json, os, sys
tried = {}
for folder in ["/", "/var/tmp", "/etc/notifier", os.environ["HOME"], os.getcwd(), sys.prefix, "/tmp"]:
    try:
        with open(os.path.join(folder, "written-by-the-gateway"), "w") as f:
            f.write("x")
        os.remove(os.path.join(folder, "written-by-the-gateway"))
        tried[folder] = "written"
    except OSError as exc:
        tried[folder] = exc.strerror
print(json.dumps(tried))
"""


def test_the_sandbox_lets_the_container_write_in_tmp_only(tmp_path, slack):
    # (and in /dev/shm, which is writable in a pod too)
    pod = pod_of(tmp_path, "single", slack, {})
    try:
        done = pod.exec(["python", "-c", WRITE_PROBE])
        assert done.returncode == 0, done.stderr
        tried = json.loads(done.stdout)
        assert tried.pop("/tmp") == "written"
        assert tried.pop("/var/tmp") == "Read-only file system"  # open to every user: only read-only stops it
        assert set(tried.values()) <= {"Read-only file system", "Permission denied"}, tried
    finally:
        pod.close()


def test_the_gateway_tries_no_write_outside_tmp(tmp_path, slack):
    values = yaml.safe_load((CI / "single-values.yaml").read_text())
    with store("single", values) as at:
        pod = pod_of(tmp_path, "single", slack, at, trace=True)
        try:
            pod.start()
            for i in range(3):
                event = {"category": "deploy", "text": f"read-only {i}", "dedup_key": f"ro-{i}"}
                assert http("POST", pod.url + "/v1/events", event, headers=bearer(pod))[0] == 202
            for path in ("/", "/metrics", "/v1/stats", "/v1/limits", "/healthz", "/readyz"):
                assert http("GET", pod.url + path, headers=bearer(pod))[0] == 200, path
            wait_for(lambda: delivered(pod, slack, "read-only") == 3, 15, what="3 deliveries")
            assert pod.stop()[0] == 0, pod.output()
            assert pod.refused_writes() == [], "\n".join(pod.refused_writes())
        finally:
            pod.close()


def test_sigterm_settles_the_send_in_flight_and_hands_back_the_rest(tmp_path):
    slow = SlackStandin(post_latency=3.0).start()  # below the 5 s a stopping gateway gives its sends
    values = yaml.safe_load((CI / "single-values.yaml").read_text())
    try:
        with store("single", values) as at:
            pod = pod_of(tmp_path, "single", slow, at)
            outbox = redis.Redis.from_url(pod.environment()["NOTIFIER_REDIS_URL"])
            try:
                pod.start()
                for text in ("in flight", "queued behind it"):  # one per second per channel: the second waits
                    answer = http("POST", pod.url + "/v1/events", {"category": "db", "text": text}, headers=bearer(pod))
                    assert answer[0] == 202
                wait_for(lambda: slow.in_flight == 1, 10, what="a send in flight")
                code, seconds = pod.stop()
                grace = pod.spec["terminationGracePeriodSeconds"]
                assert code == 0 and seconds < grace, (code, seconds, pod.output())
                assert [delivered(pod, slow, t) for t in ("in flight", "queued")] == [1, 0]  # finished, not cut
                prefix = pod.environment().get("NOTIFIER_KEY_PREFIX", "notifier")
                assert outbox.xlen(Keys(prefix).outbox) == 1  # settled; the other one handed back
                pod.start()  # the same pod name: it resumes its own pending entry
                wait_for(lambda: delivered(pod, slow, "queued"), 20, what="the handed-back event delivered")
                assert [delivered(pod, slow, t) for t in ("in flight", "queued")] == [1, 1]
                assert pod.stop()[0] == 0
            finally:
                outbox.close()
                pod.close()
    finally:
        slow.stop()
