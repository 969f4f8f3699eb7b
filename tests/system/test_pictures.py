"""docs/pictures.py still makes the docs' pictures from a real gateway, Slack stand-in and chromium.

It runs into a temporary folder (the committed pictures are made by hand: ``python docs/pictures.py``),
and checks each picture is there and shows what its page says it shows.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from helpers import need

PICTURES = Path(__file__).resolve().parents[2] / "docs" / "pictures.py"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_pictures_are_made_from_a_running_gateway(tmp_path):
    need("chromium")
    made = subprocess.run([sys.executable, str(PICTURES), str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stdout + made.stderr
    assert _png_size(tmp_path / "console.png")[0] == 1100
    assert _png_size(tmp_path / "docs-site.png") == (1400, 900)
    width, height = _png_size(tmp_path / "slack-message.png")
    assert width > 300 and height > 150
    status = (tmp_path / "status.txt").read_text()
    assert "team (per field:team)" in status and "debug" in status and "Totals" in status
    first = (tmp_path / "first-event.txt").read_text()
    assert '"status": "accepted"' in first and "[notifier -> default]" in first and "api v42 is live" in first
