"""The console's chart, Slack names and audit log in a real browser (Debian's chromium, Playwright),
on gateway processes and real Redis, as ``test_console.py`` drives the rest of the page.

The last hour is seeded in the store as ``lua/history.lua`` writes it (a record of cumulative
counters per minute), and the current minute is counted by the gateway from real events, so the
chart shows known numbers: the canvas must hold both series' colours, the legend the numbers of
the minute pointed at, and the level selector must switch the numbers to that level value.
"""

from __future__ import annotations

import re
import time

import redis
import test_console as console
from clicks import click
from helpers import Gateway, http, slack_env, wait_for
from playwright.sync_api import Page, expect

from notifier.store.history import KEEP_MS, MINUTE_MS
from notifier.store.keys import Keys

browser, watched = console.browser, console.watched  # the same chromium and pages as test_console.py
MARKUP, _shot = console.MARKUP, console._shot
KEYS = Keys("notifier")  # the gateway's default prefix
SIGNING_SECRET = "0cc175b9c0f1b6a831c399e269772661"
DANA = "U0DANA0001"
TOKEN = "s3cret-chart"
# Ten minutes before the current one, oldest first: (admitted, dropped) in all and for category db.
ALL = [(5, 0), (8, 1), (3, 0), (12, 4), (7, 2), (4, 0), (9, 0), (6, 3), (10, 1), (2, 0)]
DB = [(2, 0), (3, 1), (1, 0), (5, 3), (3, 1), (1, 0), (4, 0), (2, 2), (4, 1), (1, 0)]


def _seed(store: redis.Redis) -> int:
    """Records of the ten minutes before the current one, and the counters now; the current minute."""
    seconds, _ = store.time()
    if seconds % 60 > 40:  # the minute must not turn before the checks of the current one end
        time.sleep(61 - seconds % 60)
        seconds, _ = store.time()
    current = seconds // 60
    totals = {"accepted": 100, "dropped": 20, "level:category:accepted:db": 40, "level:category:dropped:db": 10}
    for minute, (everything, db) in enumerate(zip(ALL, DB, strict=True), start=current - 10):
        store.hset(KEYS.history(minute), mapping={"@at": minute * MINUTE_MS + 300, **totals})
        store.pexpire(KEYS.history(minute), KEEP_MS)
        grown = (*everything, *db)
        totals = {field: value + grown[i] for i, (field, value) in enumerate(totals.items())}
    web = {"level:category:accepted:web": totals["accepted"] - totals["level:category:accepted:db"]}
    store.hset(KEYS.stats, mapping={**totals, **web})
    return current


def _legend(page: Page) -> dict[str, str]:
    rows = page.locator("#history-chart .u-legend .u-series")
    expect(rows).to_have_count(3)
    cells = [(rows.nth(i).locator("th"), rows.nth(i).locator(".u-value")) for i in range(3)]
    return {label.inner_text().strip(): value.inner_text() for label, value in cells}


def _pixels(page: Page) -> dict[str, int]:
    """How many pixels of the chart's canvas are drawn in the admitted (green) and dropped (red) strokes."""
    return page.evaluate(
        """() => { const c = document.querySelector('#history-chart canvas');
                   const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                   let green = 0, red = 0;
                   for (let i = 0; i < d.length; i += 4) {
                     const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
                     if (a > 200 && g > r + 50 && g > b + 30) green++;
                     if (a > 200 && r > g + 80 && r > b + 60) red++;
                   }
                   return {green, red, width: c.width}; }"""
    )


def _point_at(page: Page, index: int, of: int = 60) -> None:
    """Point the mouse at the ``index``-th minute of the chart."""
    box = page.locator("#history-chart .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * index / (of - 1), box["y"] + box["height"] / 2)


def test_the_chart_library_is_served_by_the_gateway_under_the_same_policy(redis_url, slack, tmp_path):
    gateway = Gateway(slack_env(redis_url, slack), log_dir=str(tmp_path)).start()
    try:
        policy = http("GET", gateway.url + "/")[2]["Content-Security-Policy"]
        assert policy.startswith("default-src 'self';") and "unsafe" not in policy
        for path, kind in (("/console/uPlot.iife.min.js", "text/javascript"), ("/console/uPlot.min.css", "text/css")):
            status, _, head = http("GET", gateway.url + path)
            assert status == 200 and head["Content-Type"].startswith(kind), (path, head)
            assert head["Content-Security-Policy"] == policy
        for unserved in ("/console/uPlot.LICENSE", "/console/VENDORED.txt", "/console/uPlot.js"):
            assert http("GET", gateway.url + unserved)[0] == 404, unserved
    finally:
        gateway.stop()


def test_the_chart_draws_the_last_hour_and_the_level_selector_changes_it(redis_url, slack, tmp_path, watched):
    store = redis.Redis.from_url(redis_url)
    _seed(store)
    env = slack_env(redis_url, slack, NOTIFIER_CATEGORY_LIMIT="2/1h")
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        seconds, _ = store.time()
        wait_for(lambda: store.exists(KEYS.history(seconds // 60)), 10, what="the current minute's record")
        for category in ("db", "db", "db", "web"):  # db: two admitted, one dropped
            gateway.post({"category": category, "text": "x"})
        seen = watched()
        page = seen.open(gateway)
        summary = page.locator("#history-summary")
        expect(summary).to_contain_text("Last hour, the whole tree: 69 admitted, 12 dropped")
        drawn = _pixels(page)
        assert drawn["green"] > 100 and drawn["red"] > 50, drawn
        assert _legend(page)["admitted"] == "3" and _legend(page)["dropped"] == "1"  # this minute so far
        _point_at(page, 53)  # six minutes ago: the fifth seeded minute
        expect(page.locator("#history-chart .u-legend")).to_contain_text("7")
        assert (_legend(page)["admitted"], _legend(page)["dropped"]) == ("7", "2")

        page.get_by_label("Level value").select_option(label="category db")
        expect(summary).to_contain_text("Last hour, category db: 28 admitted, 9 dropped")
        _point_at(page, 52)
        _point_at(page, 53)
        assert (_legend(page)["admitted"], _legend(page)["dropped"]) == ("3", "1")
        assert _pixels(page) != drawn
        page.mouse.move(0, 0)
        print("screenshot:", _shot(page, "console-chart"))
        assert seen.errors == []
    finally:
        gateway.stop()


def test_slack_users_and_channels_show_by_name_asked_once_and_the_audit_log_as_text(
    redis_url, slack, tmp_path, watched
):
    slack.directory.add_user(DANA, "dana", "Dana Kim")
    env = slack_env(redis_url, slack, NOTIFIER_SLACK_SIGNING_SECRET=SIGNING_SECRET)
    first, second = (Gateway(env, log_dir=str(tmp_path)).start() for _ in range(2))
    try:
        assert first.post({"category": "db", "text": "disk full", "dedup_key": "disk-1", "severity": "error"})[0] == 202
        posted = wait_for(lambda: next((m for m in slack.received() if m.ts), None), 10, what="the alert's message")
        assert click(second, slack, posted.ts, "ack", DANA, SIGNING_SECRET) == 200
        window = {"for": "1h", "categories": ["billing"], "note": MARKUP}
        assert http("PUT", first.url + "/v1/windows/upgrade", window)[0] == 200
        pages = [watched().open(first), watched().open(second)]
        channel = slack.channel_id("#alerts")
        for page in pages:
            alert = page.locator("#alerts li").filter(has_text="disk-1")
            expect(alert).to_contain_text(f"Acknowledged by dana ({DANA}) at")
            expect(alert).to_contain_text(f"in #alerts ({channel})")
            ack = page.locator("#audit li").filter(has_text="ack")
            expect(ack).to_contain_text(f"by dana ({DANA}) via slack")
            expect(ack).to_contain_text("dedup_key=disk-1")
            opened = page.locator("#audit li").filter(has_text="window.open")
            expect(opened).to_contain_text("<b>bold</b>")
            expect(opened).to_contain_text("by anonymous via api")
            assert page.locator("#audit b, #audit img, #audit script").count() == 0
            assert page.evaluate("window.injected") is None
        pages[0].wait_for_timeout(2000)  # more rounds of reading on both pages
        assert sorted(slack.directory.asked) == [("conversations.info", channel), ("users.info", DANA)]
        store = redis.Redis.from_url(redis_url)
        assert store.get(KEYS.name(DANA)) == b"dana"
        assert 23 * 3600 * 1000 < store.pttl(KEYS.name(DANA)) <= 24 * 3600 * 1000
        print("screenshot:", _shot(pages[0], "console-names"))
    finally:
        first.stop()
        second.stop()


def test_with_tokens_the_chart_and_audit_log_wait_for_a_token_with_read(redis_url, slack, tmp_path, watched):
    gateway = Gateway(slack_env(redis_url, slack, NOTIFIER_API_TOKENS=TOKEN), log_dir=str(tmp_path)).start()
    try:
        seen = watched()
        page = seen.open(gateway)
        expect(page.locator("#history-panel .locked")).to_have_text("Enter the API token to see the last hour.")
        expect(page.locator("#audit-panel .locked")).to_be_visible()
        expect(page.locator("#history-chart")).to_be_hidden()
        page.wait_for_timeout(1500)
        asked = [url for _, url, _ in seen.requests if re.search(r"/v1/(stats/history|audit|names)", url)]
        assert asked == []  # nothing asked that would answer 401
        page.get_by_label("API token").fill(TOKEN)
        page.get_by_label("API token").press("Enter")
        expect(page.locator("#history-summary")).to_contain_text("Last hour, the whole tree: 0 admitted, 0 dropped")
        expect(page.locator("#history-chart canvas")).to_be_visible()
        expect(page.locator("#audit-empty")).to_be_visible()
        assert seen.errors == []
    finally:
        gateway.stop()
