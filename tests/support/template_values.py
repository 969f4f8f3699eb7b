"""Values and helpers shared by test_templates.py and test_templates_render.py (message templates)."""

from __future__ import annotations

from notifier.outbox import EventEntry

KEY = b"k" * 32  # the fleet's control key in these tests


def entry(template: str | None, id: str = "1-0", **event) -> EventEntry:
    body = {"text": "disk full", "severity": "error", "fields": {}, "status": "firing", **event}
    return EventEntry(id, "db", "#db", body, 0.0, template=template, source="ci")
