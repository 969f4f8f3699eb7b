"""mkdocs hooks: the generated reference put into its pages at every build (see ``docs/reference.py``).

mkdocs loads this file with its folder on ``sys.path`` (so ``reference`` imports); the checkout's
root goes first too, so the reference is made from the code of this tree, not from an older install.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference import expand


def on_page_markdown(markdown: str, **_: Any) -> str:
    """A page's markdown with its ``<!-- reference: NAME -->`` markers replaced by the generated text."""
    return expand(markdown)
