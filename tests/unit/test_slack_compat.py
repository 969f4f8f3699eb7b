"""Reading front-door messages as real clients write them, and what Slack would refuse."""

from __future__ import annotations

import pytest

from notifier.http.slack_compat.payload import (
    SlackError,
    api_body,
    plain_text,
    quieted,
    read_post,
    webhook_body,
)
from notifier.http.slack_compat.shape import attachment_problems, block_problems

FORM = "application/x-www-form-urlencoded"


def read(body: dict, mentions: bool = False):
    return read_post(body, "invalid_arguments", "msg_too_long", mentions)


def test_forms_and_json_strings_as_slacks_clients_send_them():
    raw = b"channel=%23ops&text=hi&blocks=%5B%7B%22type%22%3A%22divider%22%7D%5D&unfurl_links=false&mrkdwn=1&token=t"
    body = api_body(raw, FORM)
    post = read(body)
    assert post.channel == "#ops" and body["token"] == "t"
    assert post.message == {"text": "hi", "blocks": [{"type": "divider"}], "unfurl_links": False, "mrkdwn": True}
    assert webhook_body(b"payload=%7B%22text%22%3A%22x%22%7D", FORM) == {"text": "x"}
    assert webhook_body(b'{"text": "curl -d"}', FORM) == {"text": "curl -d"}  # JSON sent as a form
    assert webhook_body(b'{"text": "y"}', "text/plain") == {"text": "y"}


def test_empty_strings_are_absent_fields_and_numbers_are_ts():
    post = read({"text": "x", "username": "", "thread_ts": 1712345678.5, "icon_emoji": None})
    assert post.message == {"text": "x", "thread_ts": "1712345678.500000"}


@pytest.mark.parametrize(
    "body, code",
    [
        ({"text": 5}, "invalid_arguments"),
        ({"text": "x", "mrkdwn": "yes"}, "invalid_arguments"),
        ({"text": "x", "blocks": "[broken"}, "invalid_blocks"),
        ({"text": "x", "metadata": "[1]"}, "invalid_arguments"),
        ({}, "no_text"),
        ({"text": "x" * 40_001}, "msg_too_long"),
        ({"blocks": [{"type": "divider"}] * 51}, "invalid_blocks"),
        ({"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}]}, "invalid_blocks"),
        ({"blocks": [{"type": "section", "text": "plain string"}]}, "invalid_blocks"),
        ({"blocks": [{"type": "blink"}]}, "invalid_blocks"),
        ({"attachments": [{"blocks": [{"type": "blink"}]}]}, "invalid_blocks"),
        ({"attachments": [{"title": 5}]}, "invalid_blocks"),
    ],
)
def test_what_slack_refuses_is_refused_with_its_code(body, code):
    with pytest.raises(SlackError) as raised:
        read(body)
    assert raised.value.code == code


def test_ten_thousand_blocks_cost_no_more_than_fifty_one():
    assert block_problems([{"type": "blink"}] * 10_000) == ["no more than 50 items allowed [json-pointer:/blocks]"]
    assert attachment_problems([{}] * 101)[0].startswith("no more than 100 items")


def test_broadcast_mentions_become_text_unless_allowed():
    body = {
        "text": "<!here> and <!channel|@channel> and <@U1>",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "<!everyone>"}},
            {"type": "header", "text": {"type": "plain_text", "text": "<!here>"}},
        ],
        "attachments": [{"text": "<!HERE|here>"}],
    }
    quiet = read(body).message
    assert quiet["text"] == "&lt;!here&gt; and &lt;!channel|@channel&gt; and <@U1>"
    assert quiet["blocks"][0]["text"]["text"] == "&lt;!everyone&gt;"
    assert quiet["blocks"][1]["text"]["text"] == "&lt;!here&gt;"  # every text: nothing trusted for its type
    assert quiet["attachments"][0]["text"] == "&lt;!HERE|here&gt;"
    assert read(body, mentions=True).message["text"] == body["text"]
    assert "link_names" not in quieted({"text": "@here now", "link_names": True})
    assert quieted({"text": "mail me@here.org", "link_names": True})["link_names"] is True


def test_plain_rendering_of_blocks_and_attachments():
    message = {
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy*"}}],
        "attachments": [{"title": "build 7", "text": "passed", "fields": [{"title": "env", "value": "prod"}]}],
    }
    assert plain_text(message) == "*Deploy*\nbuild 7\npassed\nenv\nprod"
    assert plain_text({"text": "given"}) == "given"
    assert (
        len(plain_text({"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "z" * 2999}}] * 3})) == 3000
    )
    assert plain_text({"blocks": [{"type": "divider"}]}) == "(a message without text)"


def test_a_mention_escaped_in_json_or_a_form_is_found():
    for raw, content_type in (
        (rb'{"text": "\u003c!here>"}', "application/json"),
        (b"payload=%7B%22text%22%3A%22%3C%21here%3E%22%7D", FORM),
    ):
        post = read_post(webhook_body(raw, content_type), "invalid_payload", "invalid_blocks", False)
        assert post.message["text"] == "&lt;!here&gt;"
    plain = b'{"text": "no one to call"}'
    assert read_post(webhook_body(plain, "application/json"), "x", "y", False).message["text"] == "no one to call"


def test_nesting_past_what_the_walks_take_is_refused_for_every_token():
    deep: list = []
    inner = deep
    for _ in range(600):
        inner.append([])
        inner = inner[0]
    for mentions in (False, True):
        with pytest.raises(SlackError) as raised:
            read({"text": "x", "metadata": {"event_type": "e", "event_payload": {"deep": deep}}}, mentions)
        assert raised.value.code == "invalid_arguments"
