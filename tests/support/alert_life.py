"""Helpers of the alert lifecycle tests (test_lifecycle*.py): a fleet on the Slack stand-in, alerts, what it shows."""

from __future__ import annotations

import contextlib
import re
import time

from helpers import Gateway, replicas, slack_env
from slack_standin import SlackStandin

SEEN = re.compile(r"Seen (\d+) times, last at (\d\d):(\d\d):(\d\d) UTC")


# ---------------------------------------------------------------- helpers


def _fleet(env: dict[str, str], tmp_path, names=("a",)):
    """One gateway (replica "a") unless more are named."""
    return replicas(env, tmp_path, names)


def _env(redis_url: str, standin: SlackStandin, **extra: str) -> dict[str, str]:
    return slack_env(redis_url, standin, **{"NOTIFIER_CHANNEL_RATE": "20/1s", **extra})


@contextlib.contextmanager
def _standin(**kwargs):
    standin = SlackStandin(**kwargs).start()
    try:
        yield standin
    finally:
        standin.stop()


def _alert(key: str, text: str, category: str = "db", status: str | None = None, **extra) -> dict:
    body = {"category": category, "text": text, "dedup_key": key, **extra}
    if status:
        body["status"] = status
    return body


def _posts(standin: SlackStandin, needle: str) -> list:
    """Top-level messages (not thread replies) whose text holds ``needle``."""
    return [m for m in standin.received() if m.thread_ts is None and needle in m.text]


def _one_post(standin: SlackStandin, needle: str):
    posts = _posts(standin, needle)
    return posts[0] if len(posts) == 1 else None


def _blocks_text(blocks: list) -> str:
    """Every text of a message's blocks, one per line."""
    out = []
    for block in blocks:
        if isinstance(block.get("text"), dict):
            out.append(block["text"]["text"])
        for element in block.get("elements") or []:
            text = element.get("text", "") if isinstance(element, dict) else ""
            out.append(text.get("text", "") if isinstance(text, dict) else text)  # a button's text is an object
        out += [f.get("text", "") for f in block.get("fields") or []]
    return "\n".join(out)


def _seen(text: str) -> int:
    """N of ``Seen N times`` (1 when the message does not say it)."""
    match = SEEN.search(text)
    return int(match.group(1)) if match else 1


def _shows(standin: SlackStandin, ts: str, seen: int, resolved: bool = False) -> bool:
    """The message ``ts`` shows ``Seen seen times`` (and ``Resolved``) in its text and its blocks."""
    message = standin.message(ts)
    blocks = _blocks_text(message.blocks)
    ok = _seen(message.text) == seen and _seen(blocks) == seen
    if resolved:
        ok = ok and message.text.startswith("Resolved: ") and "*Resolved*" in blocks
    return ok


def _metric(gateway: Gateway, name: str, labels: str = "") -> float:
    """A sample of the replica's /metrics (0 when absent)."""
    raw = gateway.get("/metrics")[1]["_raw"]
    match = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", raw, re.M)
    return float(match.group(1)) if match else 0.0


def _life(standin: SlackStandin, ts: str) -> str:
    """One message's life as the stand-in recorded it: post, edits, replies, in time order."""
    message = standin.message(ts)

    def stamp(at: float) -> str:
        return f"{time.strftime('%H:%M:%S', time.gmtime(at))}.{int(at % 1 * 1000):03d} UTC (+{at - message.at:.3f}s)"

    events = [
        (message.at, f"post  {stamp(message.at)} ts={ts} channel={message.channel_id}: {message.raw.get('text')!r}")
    ]
    events += [(e.at, f"edit  {stamp(e.at)}: {e.text!r}") for e in message.edits]
    events += [
        (r.at, f"reply {stamp(r.at)} ts={r.ts} thread_ts={r.thread_ts}: {r.text!r}") for r in standin.replies(ts)
    ]
    return "\n".join(line for _, line in sorted(events))
