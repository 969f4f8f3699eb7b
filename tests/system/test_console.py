"""The console at ``/`` in a real browser: Debian's chromium driven by Playwright, gateways on real Redis.

A panel whose route a gateway lacks (an older version) says so without an error. Screenshots go to
``$NOTIFIER_SCREENSHOTS`` (default: a folder under the system's temporary folder).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import Gateway, http, need, slack_env, wait_for
from playwright.sync_api import Browser, Page, expect, sync_playwright
from slack_standin import SlackStandin, block_actions_payload, signed_action_request

BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "s3cret-console"
SHOTS = Path(os.environ.get("NOTIFIER_SCREENSHOTS") or Path(tempfile.gettempdir()) / "notifier-console-shots")
MARKUP = '<script>window.injected = 1</script><img src=x onerror="window.injected = 2"><b>bold</b>'


@pytest.fixture(scope="module")
def browser():
    executable = need("chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=BROWSER_ARGS)
        yield launched
        launched.close()


class Watched:
    """A page with what it logged and asked for: console errors, script errors, every request."""

    def __init__(self, browser: Browser, width: int = 1280, height: int = 900) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("request", lambda r: self.requests.append((r.method, r.url, r.headers)))

    def open(self, gateway: Gateway) -> Page:
        self.page.goto(gateway.url + "/")
        expect(self.page.locator("#status")).to_have_text("Live: follows the gateway every second.")
        expect(self.page.locator("#levels > li").first).to_contain_text("global")
        return self.page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def watched(browser):
    opened: list[Watched] = []

    def make(width: int = 1280, height: int = 900) -> Watched:
        opened.append(Watched(browser, width, height))
        return opened[-1]

    yield make
    for one in opened:
        one.close()


def _gateway(redis_url: str, slack, tmp_path, **env: str) -> Gateway:
    return Gateway(slack_env(redis_url, slack, **env), log_dir=str(tmp_path)).start()


@pytest.fixture
def gateways(redis_url, slack, tmp_path):
    """Two replicas on one Redis: global 10/1h,100/1d with a 20% reserve for payments, categories 2/1h."""
    env = {
        "NOTIFIER_GLOBAL_LIMIT": "10/1h,100/1d",
        "NOTIFIER_CATEGORY_LIMIT": "2/1h",
        "NOTIFIER_CATEGORY_RESERVES": '{"payments": "20%"}',
    }
    pair = [_gateway(redis_url, slack, tmp_path, **env), _gateway(redis_url, slack, tmp_path, **env)]
    yield pair
    for gateway in pair:
        gateway.stop()


def _shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _dead_letter(gateway: Gateway, slack, text: str) -> str:
    """An event Slack refuses for good: a dead letter at once. Returns its id."""
    slack.script(("error", "channel_not_found"))
    token = {"Authorization": f"Bearer {TOKEN}"}
    status, body, _ = gateway.post({"category": "deploys", "text": text}, headers=token)
    assert status == 202, body
    wait_for(lambda: http("GET", gateway.url + "/v1/dead", headers=token)[1].get("count"), 10, what="the dead letter")
    return str(body["id"])


# --- serving ---


def test_page_and_assets_are_served_with_their_types_policy_and_validators(gateways):
    gateway = gateways[0]
    status, body, head = http("GET", gateway.url + "/")
    assert status == 200 and head["Content-Type"].startswith("text/html")
    page = body["_raw"]
    assert 'data-auth="open"' in page and "{{" not in page
    policy = head["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "unsafe-inline" not in policy and "http" not in policy
    assert head["X-Content-Type-Options"] == "nosniff"
    assert head["Cache-Control"] == "no-cache"
    for path, kind in (
        ("/console/console.js", "text/javascript"),
        ("/console/panels.js", "text/javascript"),
        ("/console/console.css", "text/css"),
        ("/favicon.ico", "image/x-icon"),
    ):
        status, _, head = http("GET", gateway.url + path)
        assert status == 200 and head["Content-Type"].startswith(kind), (path, head)
        assert head["Content-Security-Policy"] == policy
        again = http("GET", gateway.url + path, headers={"If-None-Match": head["ETag"]})
        assert again[0] == 304, path
    for missing in ("/console/nothing.js", "/console/index.html", "/console/../pyproject.toml", "/favicon.png"):
        status, body, _ = http("GET", gateway.url + missing)
        assert status == 404 and body.get("error"), missing


def test_assets_are_package_data_of_the_installed_package():
    from importlib import resources

    folder = resources.files("notifier").joinpath("console")
    names = {entry.name for entry in folder.iterdir()}
    assert {"index.html", "console.js", "api.js", "dom.js", "panels.js", "console.css", "favicon.ico"} <= names
    assert {"chart.js", "names.js", "audit.js", "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"} <= names


# --- what the page shows, and that it follows changes ---


def test_page_loads_without_errors_or_other_origins_and_shows_limits_with_shares(gateways, watched):
    gateway = gateways[0]
    for i in range(3):
        gateway.post({"category": "db", "text": f"db {i}"})  # the third is dropped by db's 2/1h
    gateway.post({"category": "payments", "text": "paid"})
    seen = watched()
    page = seen.open(gateway)
    level = page.locator("#levels > li").filter(has_text="global").first
    expect(level.locator(".rule").first).to_contain_text("10/1h")
    expect(level.locator(".rule").first).to_contain_text("3/10")
    expect(level.locator(".rule.shared").first).to_contain_text("2/8")  # 10 - 2 reserved = 8 shared
    expect(level.locator(".rule.reserve").first).to_contain_text("payments (20%)")
    expect(level.locator(".rule.reserve").first).to_contain_text("1/2")
    db = page.locator("#levels > li").filter(has=page.locator(".name", has_text=re.compile("^db$")))
    expect(db).to_contain_text("2/2")
    expect(db).to_contain_text("next free in")
    expect(page.locator("#drops li").filter(has_text="db")).to_contain_text("1 in all")
    for route, panel in (("/v1/alerts", "#alerts-panel"), ("/v1/windows", "#windows-panel")):
        if http("GET", gateway.url + route)[0] == 404:
            expect(page.locator(panel)).to_contain_text("Not available in this version")
    page.wait_for_timeout(2500)  # a few rounds of reading
    print("screenshot:", _shot(page, "desktop"))
    origin = urlsplit(gateway.url).netloc
    assert [url for _, url, _ in seen.requests if urlsplit(url).netloc != origin] == []
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")  # headless asks for no icon
    assert icon == gateway.url + "/favicon.ico"
    assert seen.errors == []


def test_drops_show_within_two_seconds_without_reload(gateways, watched):
    page = watched().open(gateways[0])
    expect(page.locator("#drops-since")).to_contain_text("0 dropped since")  # the first answer is shown
    expect(page.locator("#drops-empty")).to_be_visible()
    for i in range(4):
        gateways[1].post({"category": "web", "text": f"w {i}"})  # two admitted, two dropped
    expect(page.locator("#drops li").filter(has_text="web")).to_contain_text(
        re.compile(r"^web2 since .*, 2 in all$"), timeout=2000
    )


def test_mute_from_the_page_holds_on_another_replica_within_a_second_and_shows(gateways, watched):
    first, second = gateways
    page = watched().open(first)
    page.get_by_label("Category").fill("db")
    page.get_by_label("Duration").fill("15m")
    page.get_by_role("button", name="Mute", exact=True).click()
    expect(page.locator("#mute-form .note")).to_contain_text("Muted db until")
    answered = time.monotonic()
    refused = wait_for(
        lambda: (lambda s, b, _: b if s == 429 else None)(*second.post({"category": "db", "text": "muted?"})),
        1.0,
        0.02,
        what="the mute in force on the other replica",
    )
    assert time.monotonic() - answered <= 1.0 and refused["rule"] == "0/15m"
    row = page.locator("#overrides li").filter(has_text="db")
    expect(row).to_contain_text("muted (0/15m)")
    expect(row).to_contain_text(re.compile(r"1[45]m \d+s left"))

    row.get_by_role("button", name="Unmute", exact=True).click()
    expect(page.locator("#overrides li")).to_have_count(0)
    wait_for(lambda: second.post({"category": "db", "text": "again"})[0] == 202, 1.0, 0.02, what="the unmute")

    # A change made elsewhere shows on the page within 2 s, without a reload.
    status, _, _ = http("PUT", second.url + "/v1/limits/global", {"rules": "5/1m", "for": "1h"})
    assert status == 200
    expect(page.locator("#overrides li").filter(has_text="global")).to_contain_text("rules 5/1m", timeout=2000)
    expect(page.locator("#levels > li").first).to_contain_text("override 5/1m", timeout=2000)


def test_override_and_restore_a_level_from_the_page(gateways, watched):
    first, second = gateways
    page = watched().open(first)
    form = page.locator("#override-form")
    form.get_by_label("Level").fill("web")
    form.get_by_label("Rules").fill("1/1m")
    form.get_by_label("For").fill("10m")
    form.get_by_role("button", name="Override", exact=True).click()
    expect(page.locator("#override-form .note")).to_contain_text("web now 1/1m until")
    assert second.post({"category": "web", "text": "one"})[0] == 202
    assert second.post({"category": "web", "text": "two"})[1]["rule"] == "1/1m"
    form.get_by_label("Rules").fill("nonsense")
    form.get_by_role("button", name="Override", exact=True).click()
    expect(page.locator("#override-form .note")).to_contain_text("Refused: 422")
    page.locator("#overrides li").filter(has_text="web").get_by_role("button", name="Restore").click()
    expect(page.locator("#overrides-note")).to_contain_text("Restored web to 2/1h")
    wait_for(lambda: http("GET", second.url + "/v1/limits")[1]["overrides"] == {}, 1.5, what="the other replica")


TREE = """
levels:
  - {name: global, rules: 100/1h}
  - {name: channel, key: channel, rules: 5/1h, values: {"#incidents": 50/1h}}
  - {name: category, key: category, rules: 10/1h}
routes:
  - {match: {severity: critical}, channel: "#incidents"}
"""


def test_the_tree_shows_and_a_level_value_is_overridden_and_restored_from_the_page(redis_url, slack, tmp_path, watched):
    config = tmp_path / "tree.yaml"
    config.write_text(TREE)
    gateway = _gateway(redis_url, slack, tmp_path, NOTIFIER_CONFIG=str(config))
    try:
        assert gateway.post({"category": "db", "text": "disk", "severity": "critical"})[0] == 202
        page = watched().open(gateway)
        levels = page.locator("#levels > li")
        expect(levels.filter(has_text="channel #incidents")).to_contain_text("1/50")  # a value with its own rules
        expect(levels.filter(has_text="db")).to_contain_text("1/10")  # a category shows by its name
        form = page.locator("#override-form")
        form.get_by_label("Level").fill("channel=#incidents")
        form.get_by_label("Rules").fill("1/1m")
        form.get_by_role("button", name="Override", exact=True).click()
        expect(page.locator("#override-form .note")).to_contain_text("channel now 1/1m until")
        refused = gateway.post({"category": "web", "text": "down", "severity": "critical"})[1]
        assert (refused["limit"], refused["value"], refused["rule"]) == ("channel", "#incidents", "1/1m")
        expect(levels.filter(has_text="channel #incidents")).to_contain_text("override 1/1m")
        page.locator("#overrides li").filter(has_text="channel=#incidents").get_by_role(
            "button", name="Restore"
        ).click()
        expect(page.locator("#overrides-note")).to_contain_text("Restored channel to 50/1h")
        assert http("GET", gateway.url + "/v1/limits")[1]["overrides"] == {}
        _shot(page, "tree")
    finally:
        gateway.stop()


# --- event content: as text, and behind the token ---


def test_event_text_is_shown_as_text_and_a_dead_letter_requeued(redis_url, slack, tmp_path, watched):
    gateway = _gateway(redis_url, slack, tmp_path, NOTIFIER_API_TOKENS=TOKEN)
    try:
        event_id = _dead_letter(gateway, slack, MARKUP)
        seen = watched()
        page = seen.open(gateway)
        page.evaluate("token => sessionStorage.setItem('notifier.token', token)", TOKEN)
        page.reload()
        entry = page.locator("#dead li").filter(has_text=event_id)
        expect(entry.locator(".text")).to_have_text(MARKUP)
        assert page.locator("#dead b, #dead img, #dead script").count() == 0
        assert page.evaluate("window.injected") is None
        entry.get_by_role("button", name="Requeue", exact=True).click()
        expect(page.locator("#dead-note")).to_contain_text("Requeued 1")
        wait_for(
            lambda: any("window.injected = 1" in t for t in slack.texts()), 10, what="the requeued event delivered"
        )
        expect(page.locator("#dead li")).to_have_count(0)
        assert seen.errors == []
    finally:
        gateway.stop()


def test_with_tokens_counts_show_and_an_action_without_the_token_is_refused(redis_url, slack, tmp_path, watched):
    gateway = _gateway(redis_url, slack, tmp_path, NOTIFIER_API_TOKENS=TOKEN, NOTIFIER_CATEGORY_LIMIT="2/1h")
    try:
        event_id = _dead_letter(gateway, slack, "lost event")
        seen = watched()
        page = seen.open(gateway)  # the counts show without a token
        expect(page.locator("#levels")).to_contain_text("deploys")
        expect(page.locator("#dead-panel")).to_contain_text("Enter the API token to see the dead letters")
        expect(page.locator("#dead li")).to_have_count(0)
        token_field = page.get_by_label("API token")
        assert token_field.get_attribute("type") == "password"
        page.wait_for_timeout(1500)
        assert seen.errors == [], "no request for content before a token is given"

        page.get_by_label("Category").fill("deploys")
        page.get_by_role("button", name="Mute", exact=True).click()
        expect(page.locator("#mute-form .note")).to_contain_text("needs the API token (401)")
        expect(token_field).to_be_focused()
        assert http("GET", gateway.url + "/v1/limits")[1]["overrides"] == {}
        assert [e for e in seen.errors if "401" not in e] == []  # the browser's own note of the 401 only

        token_field.fill(TOKEN)
        token_field.press("Enter")
        expect(page.locator("#dead li").filter(has_text=event_id)).to_contain_text("lost event")
        page.get_by_role("button", name="Mute", exact=True).click()
        expect(page.locator("#mute-form .note")).to_contain_text("Muted deploys")
        assert "deploys" in http("GET", gateway.url + "/v1/limits")[1]["overrides"]

        assert page.evaluate("sessionStorage.getItem('notifier.token')") == TOKEN
        assert page.evaluate("localStorage.length") == 0 and seen.context.cookies() == []
        assert not any(TOKEN in url for _, url, _ in seen.requests)
        sent = [h.get("authorization") for m, _, h in seen.requests if m == "PUT"]
        assert sent[-1] == f"Bearer {TOKEN}"

        page.evaluate("sessionStorage.setItem('notifier.token', 'wrong')")
        expect(page.locator("#token-note")).to_contain_text("refused the token (401)", timeout=3000)
        expect(page.locator("#dead li")).to_have_count(0)
    finally:
        gateway.stop()


# --- open alerts: acknowledged from Slack or from the page ---

SIGNING_SECRET = "0cc175b9c0f1b6a831c399e269772661"
SLACK_USER = "U0ALICE123"


def _click_ack(gateway: Gateway, slack: SlackStandin, ts: str) -> int:
    """A click on the message's Acknowledge button, signed as Slack sends it."""
    message = slack.message_json(ts)
    button = next(
        e
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for e in block.get("elements") or []
        if e.get("action_id") == "ack"
    )
    payload = block_actions_payload("ack", button["value"], SLACK_USER, slack.channel_id("#alerts"), ts, message)
    body, headers = signed_action_request(SIGNING_SECRET, payload)
    return http("POST", gateway.url + "/v1/slack/actions", body, headers)[0]


def test_alerts_show_as_text_and_acknowledgements_from_slack_and_from_the_page(redis_url, slack, tmp_path, watched):
    env = {"NOTIFIER_API_TOKENS": TOKEN, "NOTIFIER_SLACK_SIGNING_SECRET": SIGNING_SECRET}
    first, second = _gateway(redis_url, slack, tmp_path, **env), _gateway(redis_url, slack, tmp_path, **env)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        for key, text, severity in (("disk-db1", MARKUP, "critical"), ("lag/eu 1", "lag 30s", "warning")):
            body = {"category": "db", "text": text, "dedup_key": key, "severity": severity}
            assert first.post(body, headers=auth)[0] == 202
        posted = wait_for(
            lambda: next((m for m in slack.received() if "window.injected = 1" in m.text and m.ts), None),
            10,
            what="the alert's message",
        )
        seen = watched()
        page = seen.open(first)
        page.get_by_label("API token").fill(TOKEN)
        page.get_by_label("API token").press("Enter")
        disk = page.locator("#alerts li").filter(has_text="disk-db1")
        expect(disk.locator(".text")).to_have_text(MARKUP)
        assert page.locator("#alerts b, #alerts img, #alerts script").count() == 0
        assert page.evaluate("window.injected") is None
        expect(disk).to_contain_text("not acknowledged")

        assert _click_ack(second, slack, posted.ts) == 200  # in Slack, through the other replica
        expect(disk).to_contain_text(f"Acknowledged by <@{SLACK_USER}> at", timeout=2000)
        disk.get_by_role("button", name="Unacknowledge", exact=True).click()
        expect(disk).to_contain_text("not acknowledged")

        page.get_by_label("Acknowledge as").fill("dana")
        lag = page.locator("#alerts li").filter(has_text="lag/eu 1")
        lag.get_by_role("button", name="Acknowledge", exact=True).click()
        expect(lag).to_contain_text("Acknowledged by dana at")
        expect(lag).to_contain_text("(via console)")
        alerts = http("GET", second.url + "/v1/alerts", headers=auth)[1]["alerts"]
        assert {a["dedup_key"]: a["acknowledged_by"] for a in alerts} == {"disk-db1": None, "lag/eu 1": "dana"}
        assert {a["dedup_key"]: a["acknowledged_via"] for a in alerts} == {"disk-db1": None, "lag/eu 1": "console"}
        assert seen.errors == []
    finally:
        first.stop()
        second.stop()


# --- keyboard and small screens ---


def _focused(page: Page) -> str:
    return page.evaluate(
        """() => { const e = document.activeElement;
                   return e && e !== document.body ? (e.id || (e.tagName + ':' + e.textContent.trim() + ':'
                     + (e.getAttribute('aria-describedby') || ''))) : ''; }"""
    )


def _controls(page: Page) -> set[str]:
    return set(
        page.evaluate(
            """() => [...document.querySelectorAll('a[href], button, input, select, textarea')]
                 .filter(e => e.checkVisibility() && !e.disabled)
                 .map(e => e.id || (e.tagName + ':' + e.textContent.trim() + ':'
                   + (e.getAttribute('aria-describedby') || '')))"""
        )
    )


def _tab_to(page: Page, wanted: str, limit: int = 60) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if _focused(page).startswith(wanted):
            return
    raise AssertionError(f"Tab never reached {wanted}")


def test_keyboard_alone_reaches_and_works_every_action(redis_url, slack, tmp_path, watched):
    gateway = _gateway(redis_url, slack, tmp_path, NOTIFIER_API_TOKENS=TOKEN)
    try:
        _dead_letter(gateway, slack, "for the keyboard")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        http("PUT", gateway.url + "/v1/limits/web", {"rules": "0/1h", "for": "1h"}, headers=auth)
        http("PUT", gateway.url + "/v1/limits/global", {"rules": "50/1h"}, headers=auth)
        page = watched().open(gateway)
        page.keyboard.press("Tab")
        assert _focused(page) == "token"
        page.keyboard.type(TOKEN)
        page.keyboard.press("Enter")
        expect(page.locator("#dead li")).to_have_count(1)
        expect(page.locator("#overrides li")).to_have_count(2)

        controls = _controls(page)
        reached: list[str] = []
        for _ in range(len(controls) + 10):
            page.keyboard.press("Tab")
            reached.append(_focused(page))
        assert controls <= set(reached), controls - set(reached)

        page.locator("#mute-category").focus()  # a start point only; the rest is keys
        page.keyboard.type("db")
        page.keyboard.press("Tab")
        page.keyboard.press("ControlOrMeta+A")
        page.keyboard.type("24h")
        page.keyboard.press("Tab")
        assert _focused(page).startswith("BUTTON:Mute")
        page.keyboard.press("Enter")
        expect(page.locator("#mute-form .note")).to_contain_text("Muted db")
        assert http("GET", gateway.url + "/v1/limits")[1]["overrides"]["db"]["rules"] == "0/24h"

        page.locator("#overrides-title").focus()
        _tab_to(page, "BUTTON:Unmute")
        page.keyboard.press("Enter")
        expect(page.locator("#overrides li")).to_have_count(2)  # one of the two mutes lifted
        page.locator("#dead-title").focus()
        _tab_to(page, "BUTTON:Requeue:")
        page.keyboard.press("Enter")
        expect(page.locator("#dead-note")).to_contain_text("Requeued 1")
    finally:
        gateway.stop()


def test_at_375_pixels_nothing_scrolls_sideways_and_every_control_is_on_screen(redis_url, slack, tmp_path, watched):
    gateway = _gateway(
        redis_url,
        slack,
        tmp_path,
        NOTIFIER_GLOBAL_LIMIT="10/1s,1000/1h,100000/1d",
        NOTIFIER_CATEGORY_RESERVES='{"payments-and-billing-with-a-long-name": "12.5%"}',
    )
    try:
        long_name = "c" * 64
        _dead_letter(gateway, slack, "x" * 3000)  # one word, 3000 characters
        for category in (long_name, "payments-and-billing-with-a-long-name", "db"):
            gateway.post({"category": category, "text": "y"})
        http("PUT", gateway.url + f"/v1/limits/{long_name}", {"rules": "0/1h", "for": "1h"})
        seen = watched(375, 740)
        page = seen.open(gateway)
        expect(page.locator("#dead li")).to_have_count(1)
        expect(page.locator("#overrides li")).to_have_count(1)
        sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert sizes[0] <= sizes[1] == 375, sizes
        outside = page.evaluate(
            """() => [...document.querySelectorAll('a[href], button, input, select, textarea, h2, .bar')]
                 .filter(e => e.checkVisibility())
                 .map(e => [e.id || e.tagName + ':' + e.textContent.trim(), e.getBoundingClientRect()])
                 .filter(([, r]) => r.left < 0 || r.right > document.documentElement.clientWidth || r.width === 0)
                 .map(([name, r]) => name + ' ' + r.left + '..' + r.right)"""
        )
        assert outside == []
        print("screenshot:", _shot(page, "narrow-375"))
        assert seen.errors == []
    finally:
        gateway.stop()


# --- windows (needs /v1/windows) ---


def test_windows_open_and_end_from_the_page_and_quiet_hours_show(redis_url, slack, tmp_path, watched):
    env = {"NOTIFIER_API_TOKENS": TOKEN, "NOTIFIER_QUIET_HOURS": '{"#team-db": "00:00-23:59 UTC"}'}
    first = _gateway(redis_url, slack, tmp_path, **env)
    second = _gateway(redis_url, slack, tmp_path, **env)
    try:
        seen = watched()
        page = seen.open(first)
        page.get_by_label("API token").fill(TOKEN)
        page.get_by_label("API token").press("Enter")
        quiet = page.locator("#windows li").filter(has_text="#team-db")
        expect(quiet).to_contain_text("quiet hours")
        expect(quiet).to_contain_text("00:00-23:59 UTC")
        expect(quiet.get_by_role("button", name="End window")).to_be_hidden()
        form = page.locator("#window-form")
        form.get_by_label("Name").fill("db-upgrade")
        form.get_by_label("For").fill("30m")
        form.get_by_label("Categories").fill("db, web")
        form.get_by_label("Note").fill("<i>pg 17</i>")
        form.get_by_role("button", name="Open window").click()
        expect(form.locator(".note")).to_contain_text("Window db-upgrade open until")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        wait_for(
            lambda: (
                [w["name"] for w in http("GET", second.url + "/v1/windows", headers=auth)[1]["maintenance"]]
                == ["db-upgrade"]
            ),
            1.5,
            what="the window on the other replica",
        )
        window = page.locator("#windows li").filter(has_text="db-upgrade")
        expect(window).to_contain_text(re.compile(r"in force, (29m|30m) \d+s left"))
        expect(window).to_contain_text("categories: db, web")
        expect(window.locator(".text")).to_have_text("<i>pg 17</i>")
        window.get_by_role("button", name="End window").click()
        expect(page.locator("#windows li").filter(has_text="db-upgrade")).to_have_count(0)
        wait_for(
            lambda: http("GET", second.url + "/v1/windows", headers=auth)[1]["maintenance"] == [],
            1.5,
            what="the end on the other replica",
        )
        assert seen.errors == []
    finally:
        first.stop()
        second.stop()


# --- what a token may do: only that is offered ---

ONCALL, CI = "oncall-Secret-1", "ci-Secret-2"


def _tokens_file(tmp_path: Path) -> Path:
    """``oncall`` may read and acknowledge, ``ci`` may only send; NOTIFIER_API_TOKENS (env-1) may do all."""
    digest = lambda token: hashlib.sha256(token.encode()).hexdigest()  # noqa: E731
    path = tmp_path / "tokens.yaml"
    path.write_text(
        "tokens:\n"
        f"  oncall: {{sha256: {digest(ONCALL)}, scopes: [read, ack]}}\n"
        f"  ci: {{sha256: {digest(CI)}, scopes: [send]}}\n"
    )
    return path


def _use_token(page: Page, token: str) -> None:
    page.get_by_label("API token").fill(token)
    page.get_by_label("API token").press("Enter")


def test_a_token_is_offered_only_what_it_may_do_and_a_403_says_why(redis_url, slack, tmp_path, watched):
    env = {"NOTIFIER_API_TOKENS": TOKEN, "NOTIFIER_CONFIG": str(_tokens_file(tmp_path))}
    gateway = _gateway(redis_url, slack, tmp_path, **env)
    try:
        everything = {"Authorization": f"Bearer {TOKEN}"}
        alert = {"category": "db", "text": "disk full", "dedup_key": "disk-db1", "severity": "error"}
        assert gateway.post(alert, headers=everything)[0] == 202
        _dead_letter(gateway, slack, "lost on the way")
        http("PUT", gateway.url + "/v1/limits/web", {"rules": "0/1h", "for": "1h"}, headers=everything)
        seen = watched()
        page = seen.open(gateway)
        _use_token(page, ONCALL)
        expect(page.locator("#token-note")).to_have_text(
            "Token oncall: may read alerts and dead letters, acknowledge alerts."
        )
        disk = page.locator("#alerts li").filter(has_text="disk-db1")
        expect(disk.get_by_role("button", name="Acknowledge", exact=True)).to_be_visible()
        expect(page.locator("#dead li")).to_have_count(1)
        for name in ("Mute", "Override", "Open window", "Requeue", "Requeue all", "Unmute"):
            expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        expect(page.locator("#overrides li").filter(has_text="web")).to_contain_text("muted (0/1h)")

        disk.get_by_role("button", name="Acknowledge", exact=True).click()  # no name given: the token's
        expect(disk).to_contain_text("Acknowledged by oncall at")

        # Scopes can change under an open page (a new file on the gateway): a 403 then says why.
        page.evaluate("document.getElementById('mute-form').hidden = false")
        page.get_by_label("Category").fill("db")
        page.get_by_role("button", name="Mute", exact=True).click()
        expect(page.locator("#mute-form .note")).to_have_text("Refused: 403 token 'oncall' lacks scope 'admin'")
        assert http("GET", gateway.url + "/v1/limits")[1]["overrides"].keys() == {"web"}
        assert [e for e in seen.errors if "403" not in e] == []  # the browser's own note of that 403 only

        page.get_by_role("button", name="Forget token").click()
        _use_token(page, CI)
        expect(page.locator("#token-note")).to_have_text("Token ci: may send events.")
        expect(page.locator("#alerts-panel .locked")).to_have_text(
            "Token ci lacks scope read: it may not see event content."
        )
        expect(page.locator("#alerts li")).to_have_count(0)
        expect(page.locator("#dead li")).to_have_count(0)
        expect(page.get_by_role("button", name="Acknowledge", exact=True)).to_have_count(0)
        page.wait_for_timeout(2500)  # reads go on: none of them for content this token may not see
        by_ci = [url for _, url, head in seen.requests if head.get("authorization") == f"Bearer {CI}"]
        assert any("/v1/stats" in url for url in by_ci)
        assert not any("/v1/alerts" in url or "/v1/dead" in url for url in by_ci)

        _use_token(page, "not-a-token")
        expect(page.locator("#token-note")).to_have_text("The gateway does not know this token (401): enter it again.")
        expect(page.get_by_label("API token")).to_be_focused()
    finally:
        gateway.stop()
