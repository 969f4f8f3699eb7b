"""What the repository's Dockerfile gives its container: environment, user, working folder, command.

Tests that run the gateway as a pod would (``pod.py``) start it with the image's ENV, USER and
WORKDIR taken from here, so the Dockerfile they check is the one that ships.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


@dataclass
class Image:
    """The container configuration the Dockerfile's last stage sets."""

    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = "/"
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, continuation lines joined, comments left out."""
    joined, pending = [], ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        joined.append((word.upper(), rest.strip()))
        pending = ""
    return joined


def image(path: Path = DOCKERFILE) -> Image:
    """The configuration of the Dockerfile's last stage (ENV pairs in the ``KEY=VALUE`` form)."""
    built = Image()
    for word, rest in instructions(path):
        if word == "FROM":
            built = Image()
        elif word == "ENV":
            built.env.update(pair.split("=", 1) for pair in shlex.split(rest))
        elif word == "USER":
            built.user = rest
        elif word == "WORKDIR":
            built.workdir = rest
        elif word in ("ENTRYPOINT", "CMD"):
            setattr(built, word.lower(), json.loads(rest))
    return built
