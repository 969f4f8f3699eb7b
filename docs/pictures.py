"""The docs' pictures, made from the real thing: a gateway, the Slack stand-in, Debian's chromium.

    python docs/pictures.py [FOLDER]      (default: docs/images; run it where the package and the
                                           test extra are installed, e.g. .venv-test/bin/python)

Writes ``first-event.txt`` (a first event: curl's answer and the gateway's line), ``console.png``
(the console of a gateway with a tree, reserves, the last hour per minute, a mute, a window, open
alerts, one acknowledged from Slack by a user shown by name, and the audit log),
``slack-message.png`` (an alert's message after a repeat and its resolution, with its thread) and
``status.txt`` (what ``notifier status`` printed for that gateway) and ``docs-site.png`` (a page of
these docs as ``mkdocs serve`` serves them, styled by the theme). The message is the Block Kit
JSON the gateway sent to the Slack stand-in, drawn by ``slack-message.html`` in the manner of
Slack's client: its words, fields and buttons are the message's own, the look an approximation.

The gateway runs on a redis-server of its own. The hour before the picture is written into it as
the gateway records minutes (``lua/history.lua``: the counters at the start of each minute), from
a made-up day of traffic with an incident; the current minute is the gateway's own counting of the
events sent here.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import redis  # noqa: E402
from helpers import Gateway, RedisServer, free_port, http, need, wait_for  # noqa: E402  (tests/support is on the path now)
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402
from slack_standin import TOKEN, SlackStandin, block_actions_payload, signed_action_request  # noqa: E402

from notifier.store.history import KEEP_MS, MINUTE_MS  # noqa: E402
from notifier.store.keys import Keys  # noqa: E402

BROWSER_ARGS = [  # nothing but the pages asks the network: no updates, sync or QUIC of chromium's own
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INDIGO = "rgb(64, 81, 181)"  # the header of mkdocs-material's indigo palette: #4051b5
TREE = """\
levels:
  - name: global
    rules: 100/1h
    reserves: {critical: 10%}
  - name: channel
    key: channel
    rules: 50/1h
  - name: team
    key: field:team
    rules: 20/1h
    values: {web: 3/1h}
  - name: category
    key: category
    rules: 10/1h
routes:
  - match: {"field:team": db}
    channel: "#team-db"
"""
ALERT = {
    "category": "db",
    "title": "Replica lag",
    "text": "replica lag 30s on db-eu-1",
    "severity": "error",
    "fields": {"team": "db", "cluster": "eu-1"},
    "dedup_key": "lag-eu-1",
    "links": [{"text": "Runbook", "url": "https://runbooks.example/db-lag"}],
}
# Slack's emoji as badges of glyphs every system font has (the machine may have no emoji font).
EMOJI = {
    "x": ("\u2715", "#e01e5a"),
    "warning": ("!", "#ecb22e"),
    "information_source": ("i", "#1264a3"),
    "rotating_light": ("!", "#e01e5a"),
    "white_check_mark": ("\u2713", "#2eb67d"),
    "construction": ("\u2692", "#ecb22e"),
}
SIGNING_SECRET = "signing-secret-of-the-pictures"
ONCALL = ("U07ONCALL42", "Dana Kim")  # the Slack user who acknowledges the disk alert
KEYS = Keys("notifier")  # the gateway's default prefix


def first_event(folder: Path) -> None:
    """A gateway with no settings, one event: what curl got and what the gateway printed."""
    gateway = Gateway({}).start()
    try:
        status, body, _ = gateway.post({"category": "deploy", "text": "api v42 is live"})
        assert status == 202, body
        wait_for(lambda: "[notifier ->" in gateway.output(), 10, what="the printed message")
        printed = [line for line in gateway.output().splitlines() if "[notifier ->" in line]
    finally:
        gateway.stop()
    curl = "$ curl -s localhost:8080/v1/events -H 'Content-Type: application/json' \\\n"
    curl += """       -d '{"category": "deploy", "text": "api v42 is live"}'\n"""
    answer = json.dumps(body)
    (folder / "first-event.txt").write_text(
        f"{curl}{answer}\n\n# and in the terminal of notifier serve:\n{printed[0]}\n"
    )


def last_hour(store: redis.Redis) -> None:
    """The records of the hour before this minute, as the gateway writes them, and the counters now."""
    seconds, _ = store.time()
    if seconds % 60 > 45:  # the gateway records the current minute soon after it starts: not the next
        time.sleep(61 - seconds % 60)
        seconds, _ = store.time()
    current = seconds // 60
    totals = {"accepted": 5210, "dropped": 430}
    for ago in range(59, 0, -1):
        minute = current - ago
        store.hset(KEYS.history(minute), mapping={"@at": minute * MINUTE_MS + 250, **totals})
        store.pexpire(KEYS.history(minute), KEEP_MS)
        incident = 24 <= ago <= 32  # a storm: the limits drop what the channel could not take
        admitted = 22 + round(9 * math.sin(ago / 6)) + (48 if incident else 0) - (ago % 5)
        dropped = (35 + 7 * (ago % 3) if incident else 0) + (2 if ago % 11 == 0 else 0)
        totals = {"accepted": totals["accepted"] + admitted, "dropped": totals["dropped"] + dropped}
    store.hset(KEYS.stats, mapping=totals)


def fleet_gateway(slack: SlackStandin, work: Path, redis_url: str) -> Gateway:
    """A gateway with a four-level tree, a critical reserve and Slack controls, posting to the stand-in."""
    (work / "notifier.yaml").write_text(TREE)
    env = {
        "NOTIFIER_REDIS_URL": redis_url,
        "NOTIFIER_CONFIG": str(work / "notifier.yaml"),
        "NOTIFIER_SLACK_BOT_TOKEN": TOKEN,
        "NOTIFIER_SLACK_API_URL": slack.api_url,
        "NOTIFIER_SLACK_CHANNEL": "#alerts",
        "NOTIFIER_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "NOTIFIER_DIGEST_INTERVAL": "0",
    }
    return Gateway(env, log_dir=str(work)).start()


def traffic(gateway: Gateway, slack: SlackStandin) -> str:
    """An alert that repeats and resolves, some plain events (one team over its budget), a mute, a window
    and an open alert. Returns the alert message's ts."""
    assert gateway.post(ALERT)[0] == 202
    ts = wait_for(lambda: next((m.ts for m in slack.received() if "replica lag" in m.text), None), 10)
    assert gateway.post(ALERT)[0] == 200
    assert gateway.post({**ALERT, "text": "replica lag back to 0s", "status": "resolved"})[0] == 202
    for i in range(5):
        gateway.post({"category": "web", "text": f"deploy {i} of web", "fields": {"team": "web"}})
    gateway.post({"category": "disk", "text": "disk 95% full on db-eu-2", "severity": "critical", "dedup_key": "disk"})
    http("PUT", gateway.url + "/v1/limits/category/debug", {"rules": "0/1h", "for": "2h"})
    window = {"for": "2h", "categories": ["billing"], "note": "upgrading PostgreSQL"}
    http("PUT", gateway.url + "/v1/windows/pg-17", window)
    acknowledge_in_slack(gateway, slack)
    wait_for(lambda: any("Resolved" in e.text for e in slack.message(ts).edits) and slack.replies(ts), 20)
    return str(ts)


def acknowledge_in_slack(gateway: Gateway, slack: SlackStandin) -> None:
    """The on-call engineer clicks Acknowledge on the disk alert's message, as Slack sends the click."""
    disk = wait_for(lambda: next((m for m in slack.received() if "disk 95%" in m.text and m.ts), None), 10)
    slack.directory.add_user(ONCALL[0], ONCALL[1].split()[0].lower(), ONCALL[1])
    message = slack.message_json(disk.ts)
    payload = block_actions_payload("ack", _button(message, "ack"), ONCALL[0], disk.channel_id, disk.ts, message)
    body, headers = signed_action_request(SIGNING_SECRET, payload)
    assert http("POST", gateway.url + "/v1/slack/actions", body, headers)[0] == 200


def _button(message: dict[str, Any], action_id: str) -> str:
    actions = [b for b in message.get("blocks") or [] if b.get("type") == "actions"]
    return str(next(e["value"] for b in actions for e in b["elements"] if e.get("action_id") == action_id))


def status(gateway: Gateway, folder: Path) -> None:
    """What ``notifier status`` prints for the gateway, as a user runs it."""
    command = [str(Path(sys.executable).parent / "notifier"), "status", "--url", gateway.url]
    shown = subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout
    (folder / "status.txt").write_text("$ notifier status\n" + shown.replace(gateway.url, "http://127.0.0.1:8080"))


def mrkdwn(text: str) -> str:
    """Slack's mrkdwn as HTML: the text is escaped for Slack already (``&amp; &lt; &gt;``)."""
    text = text.replace('"', "&quot;")
    text = re.sub(r"<(https?://[^|>]+)\|([^>]+)>", r'<a href="\1">\2</a>', text)
    text = re.sub(r"<@(U\w+)>", r'<span class="mention">@\1</span>', text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*([^*\n]+)\*", r"<b>\1</b>", text)
    text = re.sub(r"(?<!\w)_([^_\n]+)_(?!\w)", r"<i>\1</i>", text)
    text = re.sub(r":([a-z_]+):", _emoji, text)
    return text.replace("\n", "<br>")


def _emoji(match: re.Match[str]) -> str:
    glyph, colour = EMOJI.get(match[1], ("?", "#616061"))
    return f'<span class="emoji" style="background:{colour}">{glyph}</span>'


def element(item: dict[str, Any]) -> str:
    """A button or a menu of an actions block."""
    if item["type"] == "static_select":
        return f'<span class="menu">{html.escape(item["placeholder"]["text"])} \u25be</span>'
    label = html.escape(item["text"]["text"])
    kind = "link" if "url" in item else item.get("style", "plain")
    return f'<span class="button {kind}">{label}</span>'


def block(item: dict[str, Any]) -> str:
    """One Block Kit block as HTML."""
    kind = item["type"]
    if kind == "section" and "fields" in item:
        cells = "".join(f"<div>{mrkdwn(f['text'])}</div>" for f in item["fields"])
        return f'<div class="fields">{cells}</div>'
    if kind == "section":
        return f'<div class="section">{mrkdwn(item["text"]["text"])}</div>'
    if kind == "context":
        return '<div class="context">' + " ".join(mrkdwn(e.get("text", "")) for e in item["elements"]) + "</div>"
    if kind == "actions":
        return '<div class="actions">' + "".join(element(e) for e in item["elements"]) + "</div>"
    if kind == "header":
        return f'<div class="header">{html.escape(item["text"]["text"])}</div>'
    return '<hr class="divider">'


def message_html(message: Any, replies: list[Any]) -> str:
    """The message and its thread, as a page in the manner of Slack's client."""
    style = (Path(__file__).parent / "slack-message.css").read_text()
    body = "".join(block(b) for b in message.blocks) or f'<div class="section">{mrkdwn(message.text)}</div>'
    thread = "".join(
        f'<div class="reply"><span class="app">notifier</span> <span class="app-tag">APP</span>'
        f'<div class="section">{mrkdwn(r.text)}</div></div>'
        for r in replies
    )
    head = '<span class="app">notifier</span> <span class="app-tag">APP</span> <span class="time">14:05</span>'
    count = f'<div class="thread-count">{len(replies)} repl{"y" if len(replies) == 1 else "ies"}</div>'
    return (
        f"<!doctype html><meta charset=utf-8><style>{style}</style>"
        f'<div id="message"><div class="avatar">N</div><div class="content">{head}{body}{count}'
        f'<div class="thread">{thread}</div></div></div>'
    )


def slack_picture(page: Page, slack: SlackStandin, ts: str, folder: Path) -> None:
    """The alert's message as the stand-in holds it now, with its thread."""
    message = slack.message(ts)
    page.set_content(message_html(message, slack.replies(ts)))
    page.locator("#message").screenshot(path=str(folder / "slack-message.png"))


def console_picture(page: Page, gateway: Gateway, folder: Path) -> None:
    """The console, once it has read the gateway a few times."""
    page.goto(gateway.url + "/")
    # A locator, not wait_for_function: the console's CSP forbids the eval its polling would need.
    expect(page.locator("#status")).to_contain_text("Live", timeout=20_000)
    expect(page.locator("#history-chart canvas")).to_be_visible()
    expect(page.locator("#alerts")).to_contain_text(f"Acknowledged by dana ({ONCALL[0]})")  # asked of Slack
    page.wait_for_timeout(2500)
    page.screenshot(path=str(folder / "console.png"), full_page=True)


def docs_site_picture(page: Page, folder: Path) -> None:
    """A page of this site as ``mkdocs serve`` serves it: the theme's header, navigation and styles."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "mkdocs"), "serve", "--no-livereload", "-a", f"127.0.0.1:{port}"]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/integrations/front-doors/"
        wait_for(lambda: _serves(url), 120, what="mkdocs serve")
        elsewhere: list[str] = []  # what the page asks of another host, or does not get
        page.on("request", lambda r: elsewhere.extend([] if r.url.startswith(f"http://127.0.0.1:{port}/") else [r.url]))
        page.on("response", lambda r: elsewhere.extend([f"{r.status} {r.url}"] if r.status >= 400 else []))
        page.goto(url, wait_until="networkidle")
        expect(page.locator("header.md-header")).to_have_css("background-color", INDIGO)  # the theme's CSS is in
        expect(page.locator("nav.md-nav--primary")).to_be_visible()
        if elsewhere:
            raise RuntimeError(f"the docs page loads from elsewhere, or misses: {elsewhere}")
        page.screenshot(path=str(folder / "docs-site.png"))
    finally:
        server.terminate()
        server.wait(10)


def _serves(url: str) -> bool:
    try:
        return http("GET", url, timeout=2)[0] == 200
    except OSError:
        return False


def main(folder: Path) -> None:
    """Make every picture into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    first_event(folder)
    slack, server = SlackStandin().start(), RedisServer().start()
    with tempfile.TemporaryDirectory(prefix="notifier-pictures-") as work, sync_playwright() as playwright:
        store = redis.Redis.from_url(server.url)
        last_hour(store)
        gateway = fleet_gateway(slack, Path(work), server.url)
        browser = playwright.chromium.launch(executable_path=need("chromium"), args=BROWSER_ARGS)
        try:
            seconds, _ = store.time()
            wait_for(lambda: store.exists(KEYS.history(seconds // 60)), 10, what="the minute recorded")
            ts = traffic(gateway, slack)
            status(gateway, folder)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            console_picture(page, gateway, folder)
            slack_picture(browser.new_page(viewport={"width": 720, "height": 600}), slack, ts, folder)
            docs_site_picture(browser.new_page(viewport={"width": 1400, "height": 900}), folder)
        finally:
            browser.close()
            gateway.stop()
            slack.stop()
            store.close()
            server.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "images")
