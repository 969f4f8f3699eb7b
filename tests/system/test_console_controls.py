"""The console's controls in a real browser (Debian's chromium, Playwright), on gateway processes and real Redis.

Open alerts acknowledged from Slack or from the page, every action reached and worked with
the keyboard alone, nothing scrolling sideways at 375 pixels, windows opened and ended from
the page, and a token offered only what it may do. The browser and the pages are
``test_console.py``'s, which drives the rest of the page.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import test_console as console
from clicks import click
from helpers import http, wait_for
from playwright.sync_api import Page, expect

browser, watched = console.browser, console.watched  # the same fixtures as test_console.py
TOKEN, MARKUP = console.TOKEN, console.MARKUP
_gateway, _shot, _dead_letter = console._gateway, console._shot, console._dead_letter


# --- open alerts: acknowledged from Slack or from the page ---

SIGNING_SECRET = "0cc175b9c0f1b6a831c399e269772661"
SLACK_USER = "U0ALICE123"


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

        assert (
            click(second, slack, posted.ts, "ack", SLACK_USER, SIGNING_SECRET) == 200
        )  # in Slack, through the other replica
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
