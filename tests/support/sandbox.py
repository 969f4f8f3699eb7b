"""A container's file systems and user on this machine: a mount namespace set up by a shell script.

``Sandbox(stage, user, group, read_only)`` collects what a pod's container sees, then
:meth:`Sandbox.script` is the ``sh`` script that, run by ``unshare --mount --propagation private``
as root, sets it up and ends in ``exec setpriv ...``:

1. paths the container needs under an emptyDir's mount point (a test venv in /tmp) are held by
   bind mounts in the stage, to be put back once the emptyDir covers them;
2. with ``read_only``, every mounted file system but /proc, /sys and /dev is remounted read-only
   (only in this namespace): the container's root file system is read-only;
3. folders on the way to the interpreter that others may not enter (/root is 0700) are shown
   through a read-only overlay whose top layer is an empty 0755 folder: their content unchanged;
4. each volume appears at its mount path: a mount path that does not exist is made by a read-only
   overlay of its nearest existing parent with a layer holding the missing folders; an emptyDir is
   a tmpfs, ConfigMap and Secret keys are files bound there read-only;
5. ``setpriv`` drops to ``user:group`` with no supplementary groups and no capabilities.

The stage is the script's working folder from start to end, so it stays reachable by relative
paths when an emptyDir covers it (/tmp). Linux only, and root (a mount namespace of the machine's
own users): it fails, never skips, elsewhere.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from helpers import need

KERNEL = ("/proc", "/sys", "/dev")  # left as they are: a container has its own, writable where it must be


@dataclass
class Volume:
    path: PurePosixPath
    source: str | None  # the folder in the stage with its files; None: an emptyDir (tmpfs)
    size: str | None = None


def mounts() -> list[tuple[str, str]]:
    """(mount point, options) of each mount of this process, octal escapes decoded."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        found.append((point, fields[5]))
    return found


def under(path: PurePosixPath | str, folder: PurePosixPath | str) -> bool:
    path, folder = PurePosixPath(path), PurePosixPath(folder)
    return path == folder or folder in path.parents


def tmpfs_size(limit: str | None) -> str:
    """A Kubernetes quantity (64Mi) as tmpfs's size option (64m); empty when there is none."""
    match = re.fullmatch(r"([0-9]+)([KMGT])i?", limit or "")
    return f",size={match.group(1)}{match.group(2).lower()}" if match else ""


class Sandbox:
    """What one container sees; :meth:`script` sets it up."""

    def __init__(self, stage: Path, user: int, group: int, read_only: bool) -> None:
        if os.geteuid() != 0:
            pytest.fail("running a pod's container needs root (a mount namespace): run tests/run as root or with sudo")
        self.stage, self.user, self.group, self.read_only = stage, user, group, read_only
        self.volumes: list[Volume] = []
        self.needed: list[Path] = []
        self.writable: list[str] = []  # stage folders kept writable for the test's own tools (strace's log)
        self._made = 0

    def _folder(self, kind: str) -> str:
        """A new folder in the stage, as a path relative to it."""
        self._made += 1
        relative = f"{kind}/{self._made}"
        (self.stage / relative).mkdir(parents=True, mode=0o755)
        (self.stage / relative).chmod(0o755)
        return relative

    def files(self, path: str, files: dict[str, str], mode: int) -> None:
        """A ConfigMap or Secret volume: one file per key, read-only, at ``path``."""
        source = self._folder("volume")
        for key, text in files.items():
            (self.stage / source / key).write_text(text)
            (self.stage / source / key).chmod(mode)
        self.volumes.append(Volume(PurePosixPath(path), source))

    def empty_dir(self, path: str, size: str | None) -> None:
        self.volumes.append(Volume(PurePosixPath(path), None, size))

    def keep_readable(self, *paths: Path) -> None:
        """Folders the container's user must read (the interpreter, the venv)."""
        self.needed += [Path(os.path.realpath(p)) for p in paths]

    def keep_writable(self, folder: str) -> str:
        """A stage folder that stays writable (for root only: it is 0755)."""
        (self.stage / folder).mkdir(mode=0o755, exist_ok=True)
        self.writable.append(folder)
        return folder

    # -- the script

    def script(self, hostname: str) -> str:
        """The setup; the caller appends ``exec`` of :meth:`setpriv` and the command."""
        empty_dirs = [v.path for v in self.volumes if v.source is None]
        held = [(p, self._folder("hold")) for p in self.needed if any(under(p, d) for d in empty_dirs)]
        lines = ["set -eu", f"cd {shlex.quote(str(self.stage))}", f"hostname {shlex.quote(hostname)}"]
        lines += [f"mount --bind {shlex.quote(str(p))} {h} && mount -o remount,bind,ro {h}" for p, h in held]
        lines += [f"mount --bind {w} {w}" for w in self.writable]
        if self.read_only:
            lines += self._read_only()
        lines += self._traversable(empty_dirs)
        # Missing mount points first: their overlays name stage folders by absolute paths, which an
        # emptyDir at /tmp would cover.
        lines += [self._make(v.path) for v in self.volumes if not Path(v.path).exists()]
        for volume in sorted(self.volumes, key=lambda v: len(v.path.parts)):
            lines += self._mount(volume)
        for path, hold in held:  # the emptyDir covered them: put them back, read-only
            quoted = shlex.quote(str(path))
            lines += [f"mkdir -p {quoted}", f"mount --bind {hold} {quoted}", f"mount -o remount,bind,ro {quoted}"]
        return "\n".join(lines) + "\n"

    def setpriv(self, no_new_privileges: bool) -> list[str]:
        """The argv prefix that starts a command as the container's user, without capabilities."""
        argv = [need("setpriv"), f"--reuid={self.user}", f"--regid={self.group}", "--clear-groups"]
        argv += ["--inh-caps=-all", "--bounding-set=-all"]
        return argv + (["--no-new-privs"] if no_new_privileges else [])

    def _read_only(self) -> list[str]:
        """Every mount (of those there now) read-only, but the kernel's own."""
        lines = []
        for point, options in mounts():
            if any(under(point, k) for k in KERNEL) or "ro" in options.split(","):
                continue
            lines.append(f"mount -o remount,bind,ro {shlex.quote(point)}")
        return lines

    def _traversable(self, empty_dirs: list[PurePosixPath]) -> list[str]:
        """Overlays that let the container's user enter the folders on the way to what it needs."""
        closed: set[Path] = set()
        for path in self.needed:
            for folder in [*reversed(path.parents), path]:
                if any(under(folder, d) for d in empty_dirs) or folder == Path("/"):
                    continue
                if not folder.stat().st_mode & 0o001:
                    closed.add(folder)
        lines = []
        for folder in sorted(closed, key=lambda f: len(f.parts)):
            lines.append(self._overlay(PurePosixPath(folder), self._folder("layer")))
        return lines

    def _overlay(self, folder: PurePosixPath, layer: str) -> str:
        """A read-only overlay of ``folder`` with ``layer`` (a stage folder) on top."""
        inner = [p for p, _ in mounts() if under(p, folder) and PurePosixPath(p) != folder]
        if inner:
            pytest.fail(f"an overlay of {folder} would hide the mounts {inner}: choose other mount paths")
        options = f"lowerdir={self.stage / layer}:{folder}"
        return f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(str(folder))}"

    def _mount(self, volume: Volume) -> list[str]:
        target = shlex.quote(str(volume.path))
        if volume.source is None:
            return [f"mount -t tmpfs -o mode=0777{tmpfs_size(volume.size)} tmpfs {target}"]
        return [f"mount --bind {volume.source} {target}", f"mount -o remount,bind,ro {target}"]

    def _make(self, path: PurePosixPath) -> str:
        """An overlay of ``path``'s nearest existing parent, with a layer where ``path`` exists."""
        parent = next(p for p in path.parents if Path(p).exists())
        layer = self._folder("layer")
        (self.stage / layer / path.relative_to(parent)).mkdir(parents=True, mode=0o755)
        return self._overlay(parent, layer)
