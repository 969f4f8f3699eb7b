"""Message templates (contract: "Message templates"): the render process, at start-up and from a terminal.

A template failing for one event, or whose blocks Slack refused, leaves that event in the
built-in shape; a render that takes too long or too much memory is stopped; the render process
has none of the gateway's environment. At start-up and from a terminal: a template that does not
compile stops ``serve`` and ``check-config``, and ``render`` prints Block Kit JSON. The sandbox
and the messages templates make are in ``test_templates.py``.

Every message is checked by the Slack stand-in's own checker (``slack_standin.check_message``,
with slack-sdk's Block Kit models), the code that refuses messages as Slack does in the system tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slack_standin import check_message
from template_values import KEY, entry

from notifier.config import TemplateConfig, parse_config
from notifier.errors import ConfigError, TemplateError
from notifier.slack import renderer
from notifier.slack.messages import MessageState, event_message
from notifier.slack.templates import Templates, check_templates, context

# ---------------------------------------------------------------- the render process


def test_a_template_failing_for_one_event_leaves_it_in_the_built_in_shape_counted_and_logged_once(caplog):
    failed: list[str] = []
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*{{ fields.service }}* {{ text }}"}}]

    async def run():
        templates = Templates({"team": TemplateConfig(text="{{ text }}", blocks=blocks)}, failed.append)
        try:
            good = await templates.message(entry("team", fields={"service": "pay"}), "#db", MessageState(key=KEY))
            bad = [await templates.message(entry("team", f"{i}-0"), "#db", MessageState(key=KEY)) for i in (2, 3, 4)]
            again = await templates.message(entry("team", "2-0"), "#db", MessageState(key=KEY))  # an edit: not counted
            gone = await templates.message(entry("removed", "5-0"), "#db", MessageState(key=KEY))
            return good, bad, again, gone
        finally:
            templates.close()

    with caplog.at_level(logging.WARNING, "notifier.slack.templates"):
        good, bad, again, gone = asyncio.run(run())
    assert good.blocks[0]["text"]["text"] == "*pay* disk full"
    built_in = event_message("#db", {**entry(None).event, "category": "db"}, MessageState(key=KEY))
    assert all(m == built_in for m in [*bad, again]) and gone.text == built_in.text
    assert failed == ["team", "team", "team", "removed"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "has no attribute 'service'" in lines[0] and "no template 'removed'" in lines[1]


def test_an_event_whose_template_s_blocks_slack_refused_takes_the_built_in_shape_from_then_on():
    failed: list[str] = []

    async def run():
        templates = Templates({"t": TemplateConfig(text="T {{ text }}")}, failed.append)
        try:
            shaped = await templates.message(entry("t"), "#db", MessageState(key=KEY))
            other = templates.refused(entry("t"), shaped, "channel_not_found")  # not about its blocks
            refused = templates.refused(entry("t"), shaped, "invalid_blocks")
            then = await templates.message(entry("t"), "#db", MessageState(key=KEY, seen=2))
            built_in = event_message("#db", {**entry(None).event, "category": "db"}, MessageState(key=KEY))
            return shaped, other, refused, then, templates.refused(entry("t"), built_in, "invalid_blocks")
        finally:
            templates.close()

    shaped, other, refused, then, again = asyncio.run(run())
    assert (shaped.shape, shaped.text) == ("t", "T disk full") and not other and refused and not again
    assert then.shape == "" and then.text.startswith(":x: [error] db: disk full\nSeen 2 times")
    assert failed == ["t"]


def test_a_render_that_takes_too_long_is_stopped_and_its_template_left_aside(monkeypatch):
    monkeypatch.setattr(renderer, "RENDER_SECONDS", 0.5)
    slow = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"

    async def run():
        templates = Templates({"slow": TemplateConfig(text=slow), "fine": TemplateConfig(text="{{ text }}")})
        try:
            started = time.monotonic()
            with pytest.raises(TemplateError, match=r"taking longer than 0\.5s"):
                await templates.render("slow", context(entry("slow")))
            stopped = time.monotonic() - started
            with pytest.raises(TemplateError, match="left aside"):
                await templates.render("slow", context(entry("slow")))
            fine = await templates.render("fine", context(entry("fine")))  # in a process started again
            return stopped, fine
        finally:
            templates.close()

    stopped, fine = asyncio.run(run())
    assert stopped < 5 and fine == ([], "disk full"), (stopped, fine)


@pytest.mark.parametrize("source", ["{{ 'x' * 10**9 }}", "{{ 'x'|center(1000000000) }}", "{{ text * 400000000 }}"])
def test_a_render_that_takes_too_much_memory_fails_there(source):
    async def run():
        templates = Templates({"big": TemplateConfig(text=source), "fine": TemplateConfig(text="ok {{ text }}")})
        try:
            with pytest.raises(TemplateError, match="used more than 256 MiB"):
                await templates.render("big", context(entry("big")))
            return await templates.render("fine", context(entry("fine")))
        finally:
            templates.close()

    assert asyncio.run(run()) == ([], "ok disk full")


def test_the_render_process_has_none_of_the_gateway_s_environment(monkeypatch):
    secret = "s3cret-" + os.urandom(8).hex()
    monkeypatch.setenv("NOTIFIER_SLACK_BOT_TOKEN", secret)

    async def run():
        templates = Templates({"t": TemplateConfig(text="{{ text }}")})
        try:
            await templates.render("t", context(entry("t")))
            process = templates._renderer._process  # the one process it started
            return Path(f"/proc/{process.pid}/environ").read_bytes()
        finally:
            templates.close()

    environ = asyncio.run(run())
    assert secret.encode() not in environ and b"NOTIFIER_" not in environ
    assert set(k.split(b"=")[0] for k in environ.split(b"\0") if k) <= {b"PYTHONPATH", b"LD_LIBRARY_PATH"}


# ---------------------------------------------------------------- at start-up, and from a terminal


def test_a_template_that_does_not_compile_names_its_place_and_line_one_that_fails_a_sample_is_a_warning():
    raw = {
        "templates": {
            "payments": {
                "text": "{{ text }}",
                "blocks": [{"type": "divider"}, {"type": "section", "text": {"type": "mrkdwn", "text": "a\n{{ x }"}}],
            },
            "ok": {"text": "{{ text }}"},
        }
    }
    with pytest.raises(ConfigError) as info:
        check_templates(parse_config(raw, "f.yml").templates, "f.yml")
    assert info.value.problems == ["f.yml: templates.payments.blocks[1].text.text: line 2: unexpected '}'"]
    raw["templates"]["payments"] = {"text": "{{ fields.service }} {{ titel }}"}
    warnings = check_templates(parse_config(raw, "f.yml").templates, "f.yml")
    assert warnings == [
        "f.yml: templates.payments: fails for a sample event (UndefinedError: 'titel' is undefined); "
        "the events it fails for are posted in the built-in shape"
    ]  # fields.service: a sample event has every field a template reads


def notifier(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notifier", *args],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


BAD = """\
routes:
  - {match: {category: pay}, channel: "#payments", template: payments}
templates:
  payments:
    text: "{{ text }}"
    blocks:
      - {type: header, text: {type: plain_text, text: "{{ title }}"}}
      - {type: section, text: {type: mrkdwn, text: "*{{ fields.service }*"}}
"""


@pytest.mark.parametrize("command", [["check-config"], ["serve", "--config"]])
def test_serve_and_check_config_stop_on_a_template_that_does_not_compile(tmp_path, command):
    path = tmp_path / "notifier.yml"
    path.write_text(BAD)
    done = notifier(*command, str(path))
    assert done.returncode == 2, done
    assert done.stderr == f"notifier: {path}: templates.payments.blocks[1].text.text: line 1: unexpected '}}'\n"


def test_render_prints_block_kit_json_and_says_where_to_paste_it(tmp_path):
    path = tmp_path / "notifier.yml"
    path.write_text(BAD.replace("*{{ fields.service }*", "*{{ fields.service }}* {{ text }}"))
    done = notifier(
        "render",
        "--config",
        str(path),
        "payments",
        "category=pay",
        "text=disk <!channel> full",
        "title=Pay",
        "field:service=db",
        "link:Runbook=https://runbooks.example/db",
    )
    assert done.returncode == 0, done
    blocks = json.loads(done.stdout)["blocks"]
    check_message({"text": "x", "blocks": blocks})
    assert blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": "Pay"}}
    assert blocks[1]["text"]["text"] == "*db* disk &lt;!channel&gt; full"
    assert blocks[2]["elements"][0]["url"] == "https://runbooks.example/db"
    assert "https://app.slack.com/block-kit-builder" in done.stderr
    failing = notifier("render", "--config", str(path), "payments", "text=x")
    assert failing.returncode == 2 and "has no attribute 'service'" in failing.stderr, failing
