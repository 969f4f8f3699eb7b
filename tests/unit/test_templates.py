"""Message templates (contract: "Message templates"): the sandbox, the render process, the messages they make.

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
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError
from slack_standin import Rejection, check_message

from notifier.config import TemplateConfig, parse_config
from notifier.errors import ConfigError, TemplateError
from notifier.outbox import EventEntry
from notifier.slack import renderer
from notifier.slack.controls import ACK, MUTE
from notifier.slack.messages import MessageState, event_message, is_state_block
from notifier.slack.sandbox import compile_template, is_url, link, render
from notifier.slack.templates import Templates, check_templates, context, fit_block, refusal

KEY = b"k" * 32  # the fleet's control key in these tests

HOSTILE = ["<!channel>", "<@U123>", "<https://evil.example|click>", "&amp;", "{{ 7*7 }}", "{% raw %}x"]
ESCAPED = ["&lt;!channel&gt;", "&lt;@U123&gt;", "&lt;https://evil.example|click&gt;", "&amp;amp;", "{{ 7*7 }}"]
RUNBOOK = "<https://runbooks.example/db|runbook> <!subteam^S0DB|@db-oncall>"  # the author's: kept as written


def rendered(source: str, blocks: list | None = None, **values) -> tuple[str, list]:
    compiled, problems = compile_template(source, blocks)
    assert problems == [], problems
    return render(compiled, {"fields": {}, "links": [], "title": None, **values})


def fits(message) -> None:
    try:
        check_message({"channel": message.channel, "text": message.text, "blocks": message.blocks})
    except Rejection as exc:
        pytest.fail(f"Slack would refuse it: {exc.error} {exc.problems}")


def entry(template: str | None, id: str = "1-0", **event) -> EventEntry:
    body = {"text": "disk full", "severity": "error", "fields": {}, "status": "firing", **event}
    return EventEntry(id, "db", "#db", body, 0.0, template=template, source="ci")


# ---------------------------------------------------------------- values escaped where they are put


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_value_is_text_wherever_it_is_put_and_the_author_s_markup_stays(hostile):
    text, blocks = rendered(
        "{{ text }} " + RUNBOOK,
        [
            {"type": "header", "text": {"type": "plain_text", "text": "{{ title }}"}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "*{{ fields.who }}* {{ fields.who|upper }}"}]},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ [text, title]|join(', ') }}"}]},
        ],
        text=hostile,
        title=hostile,
        fields={"who": hostile},
    )
    strings = [text, json.dumps(blocks)]
    assert text.endswith(" " + RUNBOOK)
    for s in strings:
        without_author = s.replace(RUNBOOK, "")
        assert "<" not in without_author and ">" not in without_author, s
    if hostile in HOSTILE[:5]:
        assert text == f"{ESCAPED[HOSTILE.index(hostile)]} {RUNBOOK}"  # values are never templates themselves


def test_link_makes_a_link_of_values_and_nothing_more():
    assert link("https://a.example/x?a=1&b=2", "Run & <go>") == "<https://a.example/x?a=1&amp;b=2|Run &amp; &lt;go&gt;>"
    # A url cannot close the link or add a label; a label cannot close it either.
    assert link("https://a.example/|<!channel>", "a|b>c") == "<https://a.example/%7C%3C!channel%3E|a|b&gt;c>"
    assert link("javascript:alert(1)", "<!here>") == "&lt;!here&gt;"  # no http(s) URL: the text only
    text, _ = rendered(
        "{{ link(links[0].url, links[0].text) }} {{ link(text) }}",
        links=[{"text": "<@U1>", "url": "https://grafana.example/d?a=1&b=2"}],
        text="https://x.example/<!here>",
    )
    assert (
        text
        == "<https://grafana.example/d?a=1&amp;b=2|&lt;@U1&gt;> <https://x.example/%3C!here%3E|https://x.example/&lt;!here&gt;>"
    )


def test_strings_under_url_keys_are_urls_not_text():
    url = "https://grafana.example/d?var-host={{ fields.host }}&from=now-1h"
    _, blocks = rendered(
        "x", [{"type": "image", "image_url": url, "alt_text": "{{ fields.host }}"}], fields={"host": "a&b"}
    )
    assert blocks[0]["image_url"] == "https://grafana.example/d?var-host=a&b&from=now-1h"
    assert blocks[0]["alt_text"] == "a&amp;b"


def test_a_url_ending_in_a_newline_is_no_url():
    assert is_url("https://grafana.example/d") and not is_url("https://grafana.example/d\n")


def test_a_missing_value_is_a_failure_and_none_is_empty():
    with pytest.raises(Exception, match="has no attribute 'service'"):
        rendered("{{ fields.service }}")
    assert rendered("[{{ title }}] {{ fields.service|default('-') }}")[0] == "[] -"


# ---------------------------------------------------------------- the sandbox


REFUSED = [
    "{{ cycler.__init__.__globals__.os.environ }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ text.__class__.__base__.__subclasses__() }}",
    "{{ fields['__class__'] }}",
    "{{ '{0.__class__}'.format(text) }}",
    "{{ '{x}'.format_map(fields) }}",
    "{{ text|attr('__class__') }}",
    "{{ text|attr('format') }}",
    "{% include 'x' %}",
    "{% import 'x' as y %}",
    "{% extends 'x' %}",
    "{{ '%s'|format(text) }}",
    "{{ text|safe }}",
]


@pytest.mark.parametrize("source", REFUSED)
def test_published_sandbox_escapes_do_not_compile(source):
    _, problems = compile_template(source, None)
    assert len(problems) == 1 and problems[0].place == "text" and problems[0].message.startswith("line 1: ")


COMPILE_BUT_FAIL = [
    "{{ text['__cla' ~ 'ss__'] }}",  # computed: the sandbox refuses it when it runs
    "{{ ('{0}')['for' ~ 'mat'](text) }}",  # no str.format at all, not even Jinja2's sandboxed one
    "{{ ('{0.__class__}')['for' ~ 'mat'](text) }}",
    "{{ ('{x.__class__}')['format_' ~ 'map'](fields) }}",
    "{{ lipsum(5) }}",
    "{{ dict.mro() }}",
    "{{ config }}{{ request }}{{ os }}",
    "{% for i in range(10**6) %}{% endfor %}",  # past the sandbox's range limit
    "{{ fields.update({'a': 1}) }}",  # immutable
]


@pytest.mark.parametrize("source", COMPILE_BUT_FAIL)
def test_escapes_that_compile_fail_when_they_run(source):
    compiled, problems = compile_template(source, None)
    assert problems == []
    with pytest.raises((SecurityError, UndefinedError, OverflowError)):
        render(compiled, {"text": "x", "fields": {"a": "b"}})


def test_what_the_sandbox_hides_renders_as_nothing_of_python():
    source = "{{ text|map(attribute='__class__')|list }} {{ [fields]|map(attribute='__init__')|first is defined }}"
    assert rendered(source, text="ab", fields={})[0] == "[Undefined, Undefined] False"


# ---------------------------------------------------------------- Slack's limits


def test_what_a_template_renders_is_cut_to_slack_s_limits_never_inside_an_entity():
    long = "x" * 2998 + "&amp;&amp;"
    blocks = [
        fit_block({"type": "header", "text": {"type": "plain_text", "text": "h" * 500}}),
        fit_block({"type": "section", "text": {"type": "mrkdwn", "text": long}}),
        fit_block({"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2500}] * 14}),
        fit_block({"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 12}),
        fit_block(
            {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "b" * 90}}]}
        ),
    ]
    assert refusal(blocks) == ""
    check_message({"text": "t", "blocks": blocks})
    assert blocks[0]["text"]["text"] == "h" * 149 + "…"
    assert blocks[1]["text"]["text"] == "x" * 2998 + "…"  # not "...&am…"
    assert len(blocks[2]["fields"]) == 10 and blocks[2]["fields"][0]["text"] == "f" * 1999 + "…"
    assert len(blocks[3]["elements"]) == 10 and len(blocks[4]["elements"][0]["text"]["text"]) == 75


def test_a_message_in_a_template_s_shape_fits_whatever_the_values():
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "{{ title }}"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "{{ text }} {{ fields.a }}"}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "{{ fields.a }}{{ fields.a }}"}] * 12},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ text }}"}] * 11},
    ]

    async def run():
        templates = Templates({"t": TemplateConfig(text="{{ text * 20 }}", blocks=blocks)})
        try:
            event = entry("t", text="<" * 3000, title="&" * 150, fields={"a": "&" * 1000})
            return await templates.message(event, "#db", MessageState(key=KEY, seen=2, last_us=1))
        finally:
            templates.close()

    message = asyncio.run(run())
    fits(message)
    assert message.blocks[0]["text"]["text"] == "&amp;" * 29 + "…"  # the template's shape, cut
    assert len(message.blocks[2]["fields"]) == 10 and "Seen 2 times" in message.text


@pytest.mark.parametrize(
    "block,why",
    [
        ({"type": "sektion", "text": {"type": "mrkdwn", "text": "a"}}, "not a block Slack knows"),
        ({"type": "section", "text": "a"}, "would not read it as written"),
        ({"type": "section", "text": {"type": "mrkdwn", "text": "a"}, "colour": "red"}, "would not read it"),
        (
            {"type": "section", "text": {"type": "mrkdwn", "text": " "}, "fields": [{"type": "mrkdwn", "text": "f"}]},
            "empty",
        ),
        ({"type": "header", "text": {"type": "mrkdwn", "text": "a"}}, "takes plain_text"),
        ({"type": "image", "image_url": "file:///etc/passwd", "alt_text": "a"}, "not an http(s) URL"),
        ({"type": "divider", "block_id": "notifier-state-0"}, "the gateway's"),
        ({"type": "context", "elements": []}, "would not read it"),
        ({"type": "actions", "elements": 5}, "would not read it (TypeError"),  # slack-sdk raises: refused, not a crash
        ({"type": "section", "text": {"fields": "x"}}, "would not read it (KeyError"),
        ({"type": "section", "text": {"type": "mrkdwn", "text": {"a": 5}}}, "empty or not text"),
    ],
)
def test_a_block_slack_would_refuse_is_a_failure(block, why):
    assert why in refusal([block])


# ---------------------------------------------------------------- the gateway's parts after the template's


def test_the_gateway_s_parts_come_after_the_template_s_blocks_and_are_kept_when_it_is_long():
    async def run():
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f"{{{{ text }}}} {i}"}} for i in range(60)]
        templates = Templates({"long": TemplateConfig(text="T: {{ text }}", blocks=blocks)})
        record = "notifier:{notifier}:alert:db:" + "a" * 32
        state = MessageState(
            key=KEY,
            seen=4,
            last_us=1,
            resolved=True,
            acknowledged="Acknowledged by <@U1> at 14:05 UTC",
            button=MUTE,
            record=record,
            choices=("1h", "4h"),
            ack=ACK,
        )
        links = [{"text": "Runbook", "url": "https://runbooks.example/db"}]
        try:
            return await templates.message(entry("long", links=links), "C0DB", state)
        finally:
            templates.close()

    message = asyncio.run(run())
    fits(message)
    assert len(message.blocks) == 50
    assert message.text.startswith("Resolved: T: disk full\n") and "Seen 4 times" in message.text
    own = [b for b in message.blocks if not is_state_block(b)]
    assert own[0]["text"]["text"] == "disk full 0" and own[-2]["text"]["text"] == ":white_check_mark: *Resolved*"
    assert own[-1]["block_id"] == "notifier-links"
    added = message.blocks[len(own) :]
    assert [b["type"] for b in added] == ["context", "context", "actions"]
    assert [e["action_id"] for e in added[-1]["elements"]] == [ACK, MUTE]


def test_a_block_whose_every_text_renders_empty_is_left_out():
    optional = "{% if fields.runbook is defined %}<{{ fields.runbook }}|Runbook>{% endif %}"
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "{{ text }}"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": optional}, {"type": "mrkdwn", "text": " "}]},
        {"type": "divider"},
    ]

    async def run():
        templates = Templates({"t": TemplateConfig(text="{{ text }}", blocks=blocks)})
        try:
            return await templates.message(entry("t"), "#db", MessageState(key=KEY))
        finally:
            templates.close()

    message = asyncio.run(run())
    fits(message)
    assert [b["type"] for b in message.blocks] == ["section", "divider"]


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
