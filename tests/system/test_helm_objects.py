"""What the chart's rendered objects say, held against the contract's "Kubernetes" section.

Each object on its own is valid for Kubernetes (test_helm.py); these tests check that they fit
together (the Service and the budget select the pods, the ServiceMonitor the Service, the
NetworkPolicy lets clients in and the gateway out) and say what the contract says.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from dockerfile import image
from helm import CHART, find, notes, render

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
VALUES = [None, *CI_VALUES]  # None: the chart's defaults
SHUTDOWN = 20  # seconds the gateway may take after SIGTERM: 10 for requests, 5 for sends, the hand-back


def ids(values: Path | None) -> str:
    return values.name.removesuffix("-values.yaml") if values else "defaults"


def rendered(values: Path | None, tmp_path: Path | None = None, **more: object) -> list[dict]:
    files: list[Path] = [values] if values else []
    if more:
        assert tmp_path is not None
        (tmp_path / "more.yaml").write_text(yaml.safe_dump(more))
        files.append(tmp_path / "more.yaml")
    return render(*files)


def given(values: Path | None) -> dict:
    return yaml.safe_load(values.read_text()) if values else {}


def container(objects: list[dict]) -> dict:
    return find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def env_values(objects: list[dict]) -> dict[str, str | None]:
    """The container's env by name (None for a value from elsewhere); a name set twice fails."""
    names = [var["name"] for var in container(objects)["env"]]
    assert len(names) == len(set(names)), f"variables set twice: {names}"
    return {var["name"]: var.get("value") for var in container(objects)["env"]}


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_the_configuration_file_is_mounted_and_named_by_notifier_config(values):
    objects = rendered(values)
    config_path = Path(env_values(objects)["NOTIFIER_CONFIG"])
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in container(objects)["volumeMounts"] if Path(m["mountPath"]) == config_path.parent)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    config_map = find(objects, "ConfigMap")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"] and mount.get("readOnly")
    assert yaml.safe_load(config_map["data"][config_path.name]) == (given(values).get("config") or {})


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_probes_ask_healthz_and_readyz_on_the_gateways_port(values):
    objects = rendered(values)
    spec = container(objects)
    port_names = {p["name"]: p["containerPort"] for p in spec["ports"]}
    assert spec["livenessProbe"]["httpGet"]["path"] == "/healthz"  # never waits for Redis
    assert spec["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert spec["startupProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert port_names[spec[probe]["httpGet"]["port"]] == int(env_values(objects)["NOTIFIER_PORT"])
    assert env_values(objects)["NOTIFIER_HOST"] == "0.0.0.0"  # the kubelet and the Service reach the pod's IP


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_the_container_is_non_root_read_only_and_without_capabilities(values):
    objects = rendered(values)
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    context = {**pod["securityContext"], **container(objects)["securityContext"]}
    assert context["runAsNonRoot"] is True
    assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0  # checkable by the kubelet
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"] and "add" not in context["capabilities"]
    assert context["seccompProfile"]["type"] == "RuntimeDefault"
    tmp = next(m for m in container(objects)["volumeMounts"] if m["mountPath"] == "/tmp")
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False  # else a Service "notifier" sets NOTIFIER_PORT=tcp://...


def test_the_image_runs_as_the_charts_numeric_user_and_writes_no_bytecode():
    user, _, group = image().user.partition(":")
    context = find(render(), "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert (int(user), int(group)) == (context["runAsUser"], context["runAsGroup"]) and int(user) > 0
    assert image().env["PYTHONDONTWRITEBYTECODE"] == "1"


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_the_grace_period_outlasts_the_pause_and_the_gateways_shutdown(values):
    objects = rendered(values)
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    pause = container(objects).get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    assert pod["terminationGracePeriodSeconds"] >= pause + SHUTDOWN


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_service_budget_autoscaler_and_monitor_find_the_pods(values):
    objects = rendered(values)
    deployment, service = find(objects, "Deployment"), find(objects, "Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selects({"matchLabels": service["spec"]["selector"]}, labels)
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {p["name"] for p in container(objects)["ports"]}
    assert selects(find(objects, "PodDisruptionBudget")["spec"]["selector"], labels)
    autoscalers = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    for hpa in autoscalers:
        assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
        assert "replicas" not in deployment["spec"]  # the autoscaler's, not reset by every upgrade
    if not autoscalers:
        assert deployment["spec"]["replicas"] == given(values).get("replicaCount", 2)
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        assert selects(monitor["spec"]["selector"], service["metadata"]["labels"])
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["path"] == "/metrics" and endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_each_optional_object_is_made_only_when_asked(tmp_path):
    kinds = {o["kind"] for o in render()}
    assert not kinds & {"HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy", "Secret"}
    asked = rendered(
        None,
        tmp_path,
        autoscaling={"enabled": True},
        serviceMonitor={"enabled": True},
        networkPolicy={"enabled": True},
        secrets={"NOTIFIER_API_TOKENS": "t"},
    )
    assert {"HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy", "Secret"} <= {o["kind"] for o in asked}


def allows(rules: list[dict], port: int, protocol: str = "TCP") -> list[dict]:
    """The rules of a NetworkPolicy direction that let ``port`` through (any peer)."""
    return [r for r in rules if any(p["port"] == port and p.get("protocol", "TCP") == protocol for p in r["ports"])]


@pytest.mark.parametrize("values", [v for v in VALUES if v and given(v).get("networkPolicy")], ids=ids)
def test_the_network_policy_lets_clients_in_and_the_gateway_out(values):
    objects = rendered(values)
    policy = find(objects, "NetworkPolicy")["spec"]
    labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["podSelector"], labels) and set(policy["policyTypes"]) == {"Ingress", "Egress"}
    port = int(env_values(objects)["NOTIFIER_PORT"])
    [ingress] = allows(policy["ingress"], port)
    assert ingress.get("from", []) == given(values)["networkPolicy"].get("ingressFrom", [])  # none: every client
    for needed, protocol in [(53, "UDP"), (53, "TCP"), (443, "TCP"), *((p, "TCP") for p in redis_ports(values))]:
        assert allows(policy["egress"], needed, protocol), f"the gateway cannot reach port {needed}/{protocol}"
    assert not allows(policy["egress"], 25), "egress is not restricted"


def redis_ports(values: Path) -> set[int]:
    """The ports the gateway talks to Redis and the Sentinels on, from the values."""
    redis = given(values).get("redis", {})
    ports = {int(s.rpartition(":")[2]) for s in redis.get("sentinels", [])}
    url = redis.get("url", "")
    return ports | ({int(url.rpartition(":")[2].split("/")[0])} if url.startswith("redis") else set()) | {6379}


@pytest.mark.parametrize("values", CI_VALUES, ids=ids)
def test_the_store_comes_from_the_redis_values(values):
    redis, env = given(values)["redis"], env_values(rendered(values))
    assert env["NOTIFIER_REDIS_MIN_REPLICAS"] == str(redis.get("minReplicas", 0))
    if redis.get("sentinels"):
        assert env["NOTIFIER_REDIS_SENTINELS"] == ",".join(redis["sentinels"])
        assert env["NOTIFIER_REDIS_SENTINEL_MASTER"] == redis.get("sentinelMaster", "notifier")
    else:
        assert env["NOTIFIER_REDIS_URL"].replace(":$(REDIS_PASSWORD)@", "") == redis["url"]
    assert env.get("NOTIFIER_REDIS_CLUSTER") == ("true" if redis.get("cluster") else None)


def checksums(objects: list[dict]) -> dict[str, str]:
    annotations = find(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    return {k: v for k, v in annotations.items() if k.startswith("checksum/")}


def test_a_change_of_the_secrets_rolls_the_pods_and_one_of_the_configuration_only_when_asked(tmp_path):
    base = {"config": {"routes": [{"match": {"category": "db"}, "channel": "#db"}]}, "secrets": {"A": "1"}}
    before = checksums(rendered(None, tmp_path, **base))
    assert checksums(rendered(None, tmp_path, **base)) == before  # the same values: no rollout
    moved = checksums(rendered(None, tmp_path, **{**base, "config": {"routes": []}}))
    assert moved == before and "checksum/config" not in moved  # the gateways reload the mounted file
    asked = {**base, "rollOnConfigChange": True}
    rolled = checksums(rendered(None, tmp_path, **{**asked, "config": {"routes": []}}))
    assert rolled["checksum/config"] != checksums(rendered(None, tmp_path, **asked))["checksum/config"]
    rotated = checksums(rendered(None, tmp_path, **{**base, "secrets": {"A": "2"}}))
    assert rotated["checksum/secrets"] != before["checksum/secrets"]


def test_env_names_the_chart_sets_are_taken_from_env_once(tmp_path):
    env = env_values(rendered(None, tmp_path, env={"NOTIFIER_PORT": 9000, "NOTIFIER_REPLICAS": "7"}))
    assert env["NOTIFIER_PORT"] == "9000" and env["NOTIFIER_REPLICAS"] == "7"


def test_notes_say_how_to_reach_the_gateway_and_its_console():
    said = notes()
    assert "kubectl port-forward --namespace default service/notifier 8080:8080" in said
    assert "The console is GET / of the gateway" in said and "http://127.0.0.1:8080/" in said
    assert "WARNING: neither redis.url nor redis.sentinels" in said  # the defaults have no Redis
    assert "WARNING" not in notes(CHART / "ci" / "single-values.yaml")


def test_the_app_token_of_socket_mode_is_a_secret_of_the_pods(tmp_path):
    token = "xapp-1-A0HELM-1-token"
    objects = rendered(None, tmp_path, secrets={"NOTIFIER_SLACK_APP_TOKEN": token})
    secret = find(objects, "Secret")
    assert base64.b64decode(secret["data"]["NOTIFIER_SLACK_APP_TOKEN"]).decode() == token
    deployment = find(objects, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"secretRef": {"name": secret["metadata"]["name"]}} in container["envFrom"]
    assert token not in yaml.safe_dump(deployment)  # only the Secret holds it


def test_one_gateway_process_per_pod_unless_asked(tmp_path):
    # Kubernetes scales by pods: NOTIFIER_WORKERS stays 1 unless workers (or env) says otherwise.
    assert env_values(rendered(None, tmp_path))["NOTIFIER_WORKERS"] == "1"
    with_redis = {"redis": {"url": "redis://redis:6379/0"}}
    assert env_values(rendered(None, tmp_path, workers="auto", **with_redis))["NOTIFIER_WORKERS"] == "auto"
    assert env_values(rendered(None, tmp_path, env={"NOTIFIER_WORKERS": 2}))["NOTIFIER_WORKERS"] == "2"
