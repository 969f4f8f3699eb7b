"""Message templates (contract: "Message templates"): the sandbox and the messages templates make.

Values escaped where they are put, the sandbox, Slack's limits, and the gateway's parts after
the template's blocks. The render process and the checks at start-up and from a terminal are
in ``test_templates_render.py``.

Every message is checked by the Slack stand-in's own checker (``slack_standin.check_message``,
with slack-sdk's Block Kit models), the code that refuses messages as Slack does in the system tests.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError
from slack_standin import Rejection, check_message
from template_values import KEY, entry

from notifier.config import TemplateConfig
from notifier.slack.controls import ACK, MUTE
from notifier.slack.messages import MessageState, is_state_block
from notifier.slack.sandbox import compile_template, is_url, link, render
from notifier.slack.templates import Templates, fit_block, refusal

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
