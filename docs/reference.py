"""The generated parts of the docs, by the marker that places each in a page, and ``settings.example.env``.

A page holds a marker such as ``<!-- reference: settings -->`` on a line of its own; ``docs/hooks.py``
puts the generated text in its place when mkdocs builds the site, so the reference is made from
the code at every build and cannot drift. By hand::

    PYTHONPATH=. python docs/reference.py settings.example.env    # write the example settings file again
    PYTHONPATH=. python docs/reference.py settings                # print one generated part
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from ref_cli import cli_markdown
from ref_config import config_markdown
from ref_http import http_markdown
from ref_settings import env_file, settings_markdown

PARTS: dict[str, Callable[[], str]] = {
    "settings": settings_markdown,
    "http": http_markdown,
    "configuration": config_markdown,
    "cli": cli_markdown,
}
MARKER = re.compile(r"^<!-- reference: ([a-z-]+) -->$", re.MULTILINE)


def expand(markdown: str) -> str:
    """``markdown`` with each marker replaced by its generated part; an unknown marker is an error."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise KeyError(f"no generated part named {name!r} (known: {', '.join(PARTS)})")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


def main(argv: list[str]) -> int:
    """Write ``settings.example.env`` (given its path), or print the part named."""
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0].endswith(".env"):
        Path(argv[0]).write_text(env_file())
        return 0
    print(PARTS[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
