"""Message templates through the gateway (contract: "Message templates"), against gateway processes,
real Redis and the Slack stand-in, which reads every message with slack-sdk's Block Kit models too.

The team's shape arrives with the event's values; values that try to mention, link or template
arrive as text; templates that try the published Jinja2 sandbox escapes never start or render
nothing of the gateway (a secret in its environment is looked for in every message); a template
that fails for some events leaves those in the built-in shape, counted, logged once; an alert in
a template's shape repeats, is acknowledged and resolved as any.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from helpers import Gateway, http, slack_env, wait_for
from slack_standin import SlackStandin, block_actions_payload, signed_action_request

SECRET = "tpl-" + os.urandom(12).hex()  # in the gateway's environment: never in a message
SIGNING = "9b1d6e0a52c2f1d4a3b5c7e9f0a1b2c3"
HEAD = re.compile(r":(information_source|warning|x|rotating_light): \[\w+\] ")  # the built-in shape's head

PAYMENTS = {
    "text": "{{ title or category }}: {{ text }}",
    "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "{{ title or category }}"}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": "*Service*\n{{ fields.service }}"},
                {"type": "mrkdwn", "text": "*Region*\n{{ fields.region|default('-') }}"},
                {"type": "mrkdwn", "text": "*Severity*\n{{ severity }}"},
            ],
        },
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": "{{ text }}\n<https://runbooks.example/payments|Runbook> <!subteam^S0PAY|@payments>"
                "{% for l in links %} {{ link(l.url, l.text) }}{% endfor %}",
            },
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ source }} → {{ channel }} · {{ id }}"}]},
    ],
}
AUTHOR = "<https://runbooks.example/payments|Runbook> <!subteam^S0PAY|@payments>"  # written in the template


def config(tmp_path, templates: dict, routes: list | None = None) -> str:
    path = tmp_path / "notifier.yml"
    routes = routes or [{"match": {"category": name}, "channel": "#alerts", "template": name} for name in templates]
    path.write_text(json.dumps({"routes": routes, "templates": templates}))  # JSON is YAML
    return str(path)


def start(redis_url: str, slack: SlackStandin, path: str, tmp_path, **extra: str) -> Gateway:
    env = slack_env(redis_url, slack, NOTIFIER_CONFIG=path, NOTIFIER_CHANNEL_RATE="50/1s", SECRET_OF_THE_TEST=SECRET)
    return Gateway({**env, **extra}, log_dir=str(tmp_path)).start()


def strings(value) -> list[str]:
    """Every text in a payload (not a button's url: Slack reads no mention or link there)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k != "url" for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def delivered(slack: SlackStandin, count: int) -> list:
    def all_there():
        assert slack.refusals == [], slack.refusals
        return len(slack.received()) >= count

    wait_for(all_there, 30, what=f"{count} messages")
    return slack.received()


def metric(gateway: Gateway, name: str) -> float:
    raw = gateway.get("/metrics")[1]["_raw"]
    match = re.search(rf"^{re.escape(name)} (\S+)$", raw, re.M)
    return float(match.group(1)) if match else 0.0


# ---------------------------------------------------------------- the team's shape


def test_the_team_s_shape_arrives_with_the_values_of_the_event(redis_url, slack, tmp_path):
    path = config(
        tmp_path,
        {"payments": PAYMENTS},
        [{"match": {"category": "pay"}, "channel": "#payments", "template": "payments"}],
    )
    gateway = start(redis_url, slack, path, tmp_path)
    try:
        dashboard = {"text": "Dashboard", "url": "https://grafana.example/d/pay?from=now-1h&to=now"}
        fields = {"region": "eu-west-1", "service": "checkout"}  # not in the template's order
        event = {"category": "pay", "title": "Card payments failing", "text": "3% of card payments fail"}
        event |= {"severity": "error", "fields": fields, "links": [dashboard]}
        status, answer, _ = gateway.post(event)
        assert status == 202, answer
        [message] = delivered(slack, 1)
    finally:
        gateway.stop()
    assert message.channel == "#payments" and message.text == "Card payments failing: 3% of card payments fail"
    header, fields, body, context, links = message.blocks
    assert header["text"] == {"type": "plain_text", "text": "Card payments failing"}
    assert [f["text"] for f in fields["fields"]] == ["*Service*\ncheckout", "*Region*\neu-west-1", "*Severity*\nerror"]
    assert body["text"]["text"] == (
        "3% of card payments fail\n" + AUTHOR + " <https://grafana.example/d/pay?from=now-1h&amp;to=now|Dashboard>"
    )
    assert context["elements"][0]["text"] == f"anonymous → #payments · {answer['id']}"
    assert links["block_id"] == "notifier-links" and links["elements"][0]["url"] == event["links"][0]["url"]


# ---------------------------------------------------------------- values that try to act


HOSTILE = ["<!channel>", "<@U123>", "<https://evil.example|click>", "&amp;", "{{ 7*7 }}", "{% if 1 %}x{% endif %}"]


def test_values_that_try_to_mention_link_or_template_arrive_as_text(redis_url, slack, tmp_path):
    path = config(tmp_path, {"payments": PAYMENTS}, [{"match": {}, "channel": "#alerts", "template": "payments"}])
    gateway = start(redis_url, slack, path, tmp_path)
    try:
        for i, hostile in enumerate(HOSTILE):
            event = {
                "category": f"inj{i}",
                "title": hostile,
                "text": f"#{i} {hostile}",
                "fields": {"service": hostile, "region": hostile},
                "links": [{"text": hostile, "url": "https://a.example/|<!here>"}],
            }
            assert gateway.post(event)[0] == 202
        received = delivered(slack, len(HOSTILE))
    finally:
        gateway.stop()
    for message in received:
        assert message.blocks[0]["type"] == "header", message.blocks  # the template's shape, not the built-in
        # The gateway's link buttons (plain_text labels, where Slack parses nothing) are not the template's.
        own = [b for b in message.raw["blocks"] if b.get("block_id") != "notifier-links"]
        for text in strings(message.raw.get("text")) + strings(own):
            without = text.replace(AUTHOR, "")
            without = re.sub(r"<https://a\.example/%7C%3C!here%3E\|[^<>]*>", "", without)  # what link() made
            assert "<" not in without and ">" not in without, text
    joined = json.dumps([m.raw for m in received])
    for escaped in ["&lt;!channel&gt;", "&lt;@U123&gt;", "&lt;https://evil.example|click&gt;", "&amp;amp;"]:
        assert escaped in joined
    [seven] = [m for m in received if "#4 " in m.text]
    assert seven.text == "{{ 7*7 }}: #4 {{ 7*7 }}" and "49" not in json.dumps(seven.blocks[:3])
    assert "#5 {% if 1 %}x{% endif %}" in joined


# ---------------------------------------------------------------- the sandbox


REFUSED = {
    "globals": "{{ cycler.__init__.__globals__.os.environ }}",
    "subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "context": "{{ self._TemplateReference__context.joiner.__init__.__globals__ }}",
    "format": "{{ '{0.__globals__}'.format(link) }}",
    "format_map": "{{ '{x.__class__}'.format_map(fields) }}",
    "attr": "{{ namespace|attr('__init__')|attr('__globals__') }}",
    "include": "{% include '/etc/passwd' %}",
}


def test_templates_trying_the_published_escapes_stop_start_up_naming_each(tmp_path):
    path = config(tmp_path, {name: {"text": source} for name, source in REFUSED.items()})
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "serve", "--config", path],
        env={"PATH": os.environ["PATH"], "SECRET_OF_THE_TEST": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == [f"templates.{name}.text" for name in REFUSED], lines
    assert all(": line 1: " in line for line in lines) and SECRET not in done.stderr


# Templates that compile and try at run time: each fails (its event arrives in the built-in shape)
# or renders something harmless; none renders anything of the gateway.
TRIED = {  # each after "{{ text }} ", so its message says which it is
    "getitem": "{{ text['__cla' ~ 'ss__'] }}",
    "walk": "{{ cycler['__in' ~ 'it__']['__glo' ~ 'bals__']['os']['environ'] }}",  # computed: not refused when compiled
    "format-item": "{{ ('{0.__class__.__init__.__globals__}')['for' ~ 'mat'](link) }}",
    "map-attribute": "{{ text|map(attribute='__class__')|list }} {{ [cycler]|map(attribute='__init__')|list }}",
    "mro": "{{ dict.mro() }}",
    "names": "{{ self }} {{ range }} {{ dict }} {{ cycler }} {{ joiner() }} {{ namespace(a=1) }} {{ link }}",
    "undefined": "{{ config }}{{ request }}{{ os }}{{ lipsum(3) }}",
    "mutate": "{{ fields.update({'a': 1}) }}",
    "huge-range": "{% for i in range(10**7) %}{% endfor %}",
    "loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "memory": "{{ text * 10**9 }}",
    "recursion": "{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s|length }}{% endmacro %}{{ f(text, 60) }}",
}


def test_templates_trying_the_escapes_at_run_time_leak_nothing_and_lose_no_event(redis_url, slack, tmp_path):
    path = config(tmp_path, {name: {"text": "{{ text }} " + source} for name, source in TRIED.items()})
    gateway = start(redis_url, slack, path, tmp_path, NOTIFIER_SLACK_SIGNING_SECRET=SECRET)
    try:
        for name in TRIED:
            status, answer, _ = gateway.post({"category": name, "text": f"tried {name}", "fields": {"a": "b"}})
            assert status == 202, answer
        received = delivered(slack, len(TRIED))
        time.sleep(0.5)  # one more, if any, would arrive now
        errors = metric(gateway, "notifier_template_errors_total" + '{template="loops"}')
    finally:
        gateway.stop()
    assert len(received) == len(TRIED)
    raw = json.dumps([m.raw for m in received])
    assert SECRET not in raw and "xoxb-" not in raw and "NOTIFIER_" not in raw
    assert "__globals__" not in raw.replace("{0.__class__.__init__.__globals__}", "")
    shapes = {re.search(r"tried ([\w-]+)", m.text).group(1): m for m in received}
    assert set(shapes) == set(TRIED), shapes.keys()
    failed = (
        "getitem",
        "walk",
        "format-item",
        "mro",
        "undefined",
        "mutate",
        "huge-range",
        "loops",
        "memory",
        "recursion",
    )
    for name in TRIED:  # failed: the built-in shape; else what the template made
        assert bool(HEAD.match(shapes[name].text)) == (name in failed), (name, shapes[name].text)
    assert errors == 1
    output = gateway.output()
    assert "template loops failed for an event" in output and "taking longer than 1s" in output
    assert "templates.loops: fails for a sample event" in output  # the warning at start-up, and it ran


# ---------------------------------------------------------------- failing for some events


def test_a_template_failing_for_some_events_leaves_them_in_the_built_in_shape_counted(redis_url, slack, tmp_path):
    path = config(tmp_path, {"payments": PAYMENTS}, [{"match": {}, "channel": "#alerts", "template": "payments"}])
    gateway = start(redis_url, slack, path, tmp_path)
    try:
        for i in range(6):
            fields = {"service": f"svc-{i}"} if i % 3 else {}  # 0 and 3 have none: an undefined value
            assert gateway.post({"category": "pay", "text": f"event-{i}", "fields": fields})[0] == 202
        received = delivered(slack, 6)
        errors = metric(gateway, 'notifier_template_errors_total{template="payments"}')
        output = gateway.output()
    finally:
        gateway.stop()
    shapes = {re.search(r"event-\d", m.text).group(): m for m in received}
    for i in range(6):
        message = shapes[f"event-{i}"]
        if i % 3:
            assert message.blocks[0]["type"] == "header" and f"svc-{i}" in json.dumps(message.blocks)
        else:
            assert HEAD.match(message.text) and message.blocks[-1]["elements"][0]["text"].startswith(":information")
    assert errors == 2
    assert output.count("template payments failed for an event") == 1, output  # once per template and reason
    assert "has no attribute 'service'" in output


def test_a_message_slack_refuses_for_its_blocks_is_posted_in_the_built_in_shape_not_dead_lettered(
    redis_url, slack, tmp_path
):
    path = config(tmp_path, {"payments": PAYMENTS}, [{"match": {}, "channel": "#alerts", "template": "payments"}])
    gateway = start(redis_url, slack, path, tmp_path)
    try:
        slack.script(("error", "invalid_blocks"))  # what the checks let by, Slack may still refuse
        assert gateway.post({"category": "pay", "text": "refused once", "fields": {"service": "x"}})[0] == 202
        [message] = delivered(slack, 1)
        dead = gateway.get("/v1/dead")[1]
        errors = metric(gateway, 'notifier_template_errors_total{template="payments"}')
    finally:
        gateway.stop()
    assert HEAD.match(message.text) and "refused once" in message.text and len(slack.calls) == 2
    assert dead["count"] == 0 and errors == 1
    assert "built-in shape: Slack refused its blocks (invalid_blocks)" in gateway.output()


# ---------------------------------------------------------------- an alert's life in a template's shape


def test_an_alert_in_a_template_s_shape_repeats_is_acknowledged_and_resolved(redis_url, slack, tmp_path):
    path = config(tmp_path, {"payments": PAYMENTS}, [{"match": {}, "channel": "#alerts", "template": "payments"}])
    gateway = start(redis_url, slack, path, tmp_path, NOTIFIER_SLACK_SIGNING_SECRET=SIGNING)
    alert = {
        "category": "pay",
        "text": "card payments failing",
        "dedup_key": "pay-1",
        "severity": "critical",
        "fields": {"service": "checkout"},
    }
    try:
        status, first, _ = gateway.post(alert)
        assert status == 202, first
        [post] = delivered(slack, 1)
        for _ in range(3):
            assert gateway.post(alert)[:2] == (200, {"status": "duplicate", "id": first["id"]})
        wait_for(lambda: "Seen 4 times" in slack.message(post.ts).text, 20, what="Seen 4 times")
        seen = slack.message(post.ts)
        message = slack.message_json(post.ts)
        payload = block_actions_payload("ack", _value(message, "ack"), "U0ALICE123", post.channel_id, post.ts, message)
        body, headers = signed_action_request(SIGNING, payload)
        assert http("POST", gateway.url + "/v1/slack/actions", body, headers)[0] == 200
        wait_for(lambda: "Acknowledged by <@U0ALICE123>" in slack.message(post.ts).text, 20, what="the ack shown")
        resolved = {**alert, "status": "resolved", "text": "card payments are back"}
        assert gateway.post(resolved)[:2] == (202, {"status": "resolved", "id": first["id"]})
        wait_for(lambda: slack.message(post.ts).text.startswith("Resolved: "), 20, what="the message resolved")
        reply = wait_for(lambda: (slack.replies(post.ts) or [None])[0], 20, what="the reply in the thread")
        final = slack.message(post.ts)
    finally:
        gateway.stop()
    assert slack.refusals == [] and len([m for m in slack.received() if m.thread_ts is None]) == 1
    for message in (seen, final):  # the template's blocks first, the gateway's parts after them, on every edit
        assert [b["type"] for b in message.blocks[:4]] == ["header", "section", "section", "context"]
        assert message.blocks[1]["fields"][0]["text"] == "*Service*\ncheckout"
    assert "Seen 4 times" in _texts(seen.blocks[4:]) and "Seen 4 times" in final.text
    assert "*Resolved*" in final.blocks[4]["text"]["text"] and "Acknowledged by <@U0ALICE123>" in _texts(final.blocks)
    assert "card payments are back" in reply.text and reply.thread_ts == post.ts


def _value(message: dict, action_id: str) -> str:
    for block in message["blocks"]:
        for element in block.get("elements") or []:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return element["value"]
    raise AssertionError(f"no {action_id} button in {message['blocks']}")


def _texts(blocks: list) -> str:
    return "\n".join(strings(blocks))


@pytest.fixture(autouse=True)
def _no_refusals(slack):
    yield
    assert slack.refusals == []
