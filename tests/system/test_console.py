"""The console at ``/`` in a real browser: Debian's chromium driven by Playwright, gateways on real Redis.

Here: serving the page and its assets, what the page shows and that it follows changes, and event
content as text and behind the token. The controls (acknowledgements, the keyboard, small screens,
windows, what a token may do) are in ``test_console_controls.py``, the chart in
``test_console_chart.py``; both use this file's browser and pages.

A panel whose route a gateway lacks (an older version) says so without an error. Screenshots go to
``$NOTIFIER_SCREENSHOTS`` (default: a folder under the system's temporary folder).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import Gateway, http, need, slack_env, wait_for
from playwright.sync_api import Browser, Page, expect, sync_playwright

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
