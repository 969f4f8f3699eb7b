"""One pod of the rendered chart, run on this machine as the kubelet would run it: no cluster.

``Pod(objects)`` takes the Deployment among the objects ``helm template`` printed and runs its
container's command with the installed ``notifier`` (the test venv's bin/ first on PATH, where the
image has /usr/local/bin):

- with the environment the kubelet builds: the image's ENV (``dockerfile.py``), the Service links
  unless ``enableServiceLinks: false``, ``envFrom``, then ``env`` (values from Secrets, ConfigMaps
  and the pod's own fields; ``$(VAR)`` expanded from the variables defined before it);
- in a mount namespace of its own (``sandbox.py``): its volumes at their mount paths (ConfigMap
  and Secret keys as read-only files, an emptyDir as a tmpfs) and, with
  ``readOnlyRootFilesystem``, every other file system read-only;
- as ``runAsUser:runAsGroup`` with every capability dropped (and no new privileges unless
  ``allowPrivilegeEscalation``), its hostname the pod's name;
- with ``trace=True`` under ``strace``: each file operation refused for a read-only file system
  or a permission is a write the gateway tried (:meth:`Pod.refused_writes`).

Not done: pulling or running the image (the venv stands in for it), seccomp, cgroup limits, a
kubelet's probing (tests ask the probe's path themselves: :meth:`Pod.probe_url`), preStop hooks.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dockerfile import image
from helpers import http, need, wait_for
from sandbox import Sandbox

SERVICE_IP = "10.96.0.10"  # where a Service's links point: nothing listens there
REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class Pod:
    """The first container of the Deployment in ``objects`` (``extra``: objects made beforehand,
    such as the Secret named by ``existingSecret``), run in a sandbox."""

    def __init__(
        self, objects: list[dict], extra: list[dict] | tuple = (), name: str = "notifier-0", trace: bool = False
    ) -> None:
        self.objects = [*objects, *extra]
        deployment = self._one("Deployment")
        self.spec = deployment["spec"]["template"]["spec"]
        self.container = self.spec["containers"][0]
        self.name, self.namespace, self.trace = name, deployment["metadata"].get("namespace", "default"), trace
        self.stage = Path(tempfile.mkdtemp(prefix="notifier-pod-"))
        self.stage.chmod(0o755)  # the pod's user reads its volumes through here
        self.log_path = self.stage / "container.log"
        self.proc: subprocess.Popen | None = None
        self.trace_logs: list[Path] = []

    # -- what the manifests say

    def _one(self, kind: str, name: str | None = None) -> dict:
        found = [o for o in self.objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
        assert len(found) == 1, f"{len(found)} {kind} objects named {name or '(any)'}: the kubelet would not start"
        return found[0]

    def _security(self, key: str, default: object = None) -> object:
        """A securityContext field: the container's, else the pod's."""
        for context in (self.container.get("securityContext") or {}, self.spec.get("securityContext") or {}):
            if key in context:
                return context[key]
        return default

    def port(self, port: int | str) -> int:
        """A container port given by number or by name."""
        if isinstance(port, int):
            return port
        named = [p["containerPort"] for p in self.container.get("ports", []) if p.get("name") == port]
        assert named, f"the container has no port named {port!r}"
        return named[0]

    def probe_url(self, kind: str) -> str:
        """The URL the kubelet asks for the ``kind`` probe (``readinessProbe``, ``livenessProbe``, ...)."""
        probe = self.container[kind]["httpGet"]
        return f"http://127.0.0.1:{self.port(probe['port'])}{probe['path']}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port('http')}"

    # -- the environment

    def environment(self) -> dict[str, str]:
        """The container's variables, as the image and the kubelet make them."""
        env = dict(image().env)
        if self.spec.get("enableServiceLinks", True):
            for service in (o for o in self.objects if o["kind"] == "Service"):
                env.update(service_links(service))
        for source in self.container.get("envFrom", []):
            env.update(self._env_from(source))
        for var in self.container.get("env", []):
            env[var["name"]] = self._value(var, env)
        return env

    def _env_from(self, source: dict) -> dict[str, str]:
        prefix = source.get("prefix", "")
        if "secretRef" in source:
            return {prefix + k: v for k, v in self._secret(source["secretRef"]["name"]).items()}
        return {prefix + k: v for k, v in self._config_map(source["configMapRef"]["name"]).items()}

    def _value(self, var: dict, env: dict[str, str]) -> str:
        if "value" in var:
            return expand(str(var["value"]), env)
        source = var["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            data = self._secret(ref["name"])
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = self._config_map(ref["name"])
        else:
            fields = {"metadata.name": self.name, "metadata.namespace": self.namespace, "status.podIP": "127.0.0.1"}
            return fields[source["fieldRef"]["fieldPath"]]
        assert ref["key"] in data, f"{var['name']}: no key {ref['key']!r} in {ref['name']}: the kubelet would not start"
        return data[ref["key"]]

    def _secret(self, name: str) -> dict[str, str]:
        secret = self._one("Secret", name)
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        return {**data, **(secret.get("stringData") or {})}

    def _config_map(self, name: str) -> dict[str, str]:
        return dict(self._one("ConfigMap", name).get("data") or {})

    # -- volumes

    def _volume_files(self, volume: dict) -> dict[str, str] | None:
        """The files of a ConfigMap or Secret volume, None for an emptyDir."""
        if "emptyDir" in volume:
            return None
        if "configMap" in volume:
            return self._config_map(volume["configMap"]["name"])
        return self._secret(volume["secret"]["secretName"])

    def _sandbox(self) -> Sandbox:
        user, group = self._identity()
        stage = Path(tempfile.mkdtemp(dir=self.stage, prefix="sandbox-"))  # one per start: a restart gets its own
        stage.chmod(0o755)
        sandbox = Sandbox(stage, user, group, read_only=bool(self._security("readOnlyRootFilesystem", False)))
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        for mount in self.container.get("volumeMounts", []):
            assert "subPath" not in mount, "subPath mounts are not supported here"
            volume = volumes[mount["name"]]
            files = self._volume_files(volume)
            if files is None:
                sandbox.empty_dir(mount["mountPath"], volume["emptyDir"].get("sizeLimit"))
            else:
                mode = (volume.get("configMap") or volume.get("secret") or {}).get("defaultMode", 0o644)
                sandbox.files(mount["mountPath"], files, mode)
        sandbox.keep_readable(Path(sys.prefix), Path(os.path.realpath(sys.base_prefix)))
        return sandbox

    def _identity(self) -> tuple[int, int]:
        """runAsUser and runAsGroup (else the image's USER): numbers, as Kubernetes needs them."""
        user, _, group = image().user.partition(":")
        user, group = self._security("runAsUser", user), self._security("runAsGroup", group or user)
        assert str(user).isdigit() and str(group).isdigit(), f"user {user!r}:{group!r} is not numeric"
        if self._security("runAsNonRoot", False):
            assert int(user) != 0, "runAsNonRoot with user 0: the kubelet would not start the container"
        return int(user), int(group)

    # -- running

    def command(self) -> list[str]:
        """The container's argv: command (else ENTRYPOINT) and args (else CMD)."""
        built = image()
        entrypoint = self.container.get("command", built.entrypoint)
        return [*entrypoint, *self.container.get("args", built.cmd if "command" not in self.container else [])]

    def _argv(self, command: list[str]) -> list[str]:
        """unshare, the sandbox's script, and ``command`` run as the container runs its own."""
        env = {"PATH": f"{Path(sys.prefix) / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        env |= {"HOME": "/", "HOSTNAME": self.name, **self.environment()}  # HOME: the runtime's without one
        workdir = self.container.get("workingDir", image().workdir)
        sandbox = self._sandbox()
        run = sandbox.setpriv(no_new_privileges=not self._security("allowPrivilegeEscalation", True))
        run += ["env", "-i", "-C", workdir, *(f"{k}={v}" for k, v in env.items()), *command]
        if self.trace:  # strace stays root: it writes its log in a folder the container cannot
            log = sandbox.keep_writable("trace") + "/strace.log"
            self.trace_logs.append(sandbox.stage / log)
            run = [need("strace"), "-f", "--seccomp-bpf", "-qq", "-Z", "-e", "trace=%file", "-o", log, *run]
        script = sandbox.script(self.name) + "exec " + shlex.join(run)
        return [need("unshare"), "--mount", "--uts", "--propagation", "private", "--", "sh", "-c", script]

    def start(self, ready: bool = True) -> Pod:
        """Start the container; wait until its startup probe (and readiness probe) answers 200."""
        with open(self.log_path, "ab") as out:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                self._argv(self.command()), cwd=self.stage, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        for kind in ("startupProbe", "readinessProbe") if ready else ("startupProbe",):
            wait_for(lambda kind=kind: self._answers(kind), 30, what=f"{kind} of the pod ({self.probe_url(kind)})")
        return self

    def exec(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        """``command`` in a container of its own made like this one (volumes, user, environment)."""
        return subprocess.run(self._argv(command), cwd=self.stage, capture_output=True, text=True, timeout=60)

    def _answers(self, kind: str) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the container exited with {self.proc.returncode}:\n{self.output()}")
        try:
            return http("GET", self.probe_url(kind), timeout=1)[0] == 200
        except OSError:
            return False

    def gateway_pid(self) -> int:
        """The gateway's process: the sandbox's own, or strace's child."""
        assert self.proc is not None
        if not self.trace:
            return self.proc.pid
        children = wait_for(lambda: Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split())
        return int(children[0])

    def stop(self, grace: float | None = None) -> tuple[int | None, float]:
        """SIGTERM, then SIGKILL after the pod's grace period: (exit status, seconds it took)."""
        grace = float(self.spec.get("terminationGracePeriodSeconds", 30)) if grace is None else grace
        if self.proc is None or self.proc.poll() is not None:
            return (self.proc.returncode if self.proc else None), 0.0
        began = time.monotonic()
        os.kill(self.gateway_pid(), signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        return self.proc.returncode, time.monotonic() - began

    def close(self) -> None:
        """Kill what is left and remove the stage."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        shutil.rmtree(self.stage, ignore_errors=True)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def refused_writes(self) -> list[str]:
        """strace's lines of file operations refused with EROFS or EACCES (``trace=True``)."""
        assert self.trace_logs, "no strace log: the pod was not started with trace=True"
        lines = [line for log in self.trace_logs for line in log.read_text(errors="replace").splitlines()]
        return [line for line in lines if " EROFS " in line or " EACCES " in line]


def expand(value: str, env: dict[str, str]) -> str:
    """``$(VAR)`` replaced by a variable defined before, as Kubernetes does; ``$$`` is ``$``."""
    return REFERENCE.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def service_links(service: dict) -> dict[str, str]:
    """The variables a pod gets for a Service of its namespace (docker links style)."""
    name = service["metadata"]["name"].upper().replace("-", "_")
    ports = service["spec"]["ports"]
    links = {f"{name}_SERVICE_HOST": SERVICE_IP, f"{name}_SERVICE_PORT": str(ports[0]["port"])}
    links[f"{name}_PORT"] = f"tcp://{SERVICE_IP}:{ports[0]['port']}"
    for port in ports:
        base = f"{name}_PORT_{port['port']}_{port.get('protocol', 'TCP')}"
        links |= {base: f"tcp://{SERVICE_IP}:{port['port']}", f"{base}_ADDR": SERVICE_IP}
        links |= {f"{base}_PORT": str(port["port"]), f"{base}_PROTO": port.get("protocol", "TCP").lower()}
    return links
