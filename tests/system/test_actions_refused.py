"""Acting from Slack (contract: "Acting from Slack"): clicks the gateway refuses, end to end.

Clicks without a valid signature, unreadable ones (a body that is not UTF-8 among them) are
refused and change nothing; without a signing secret there are no buttons and no actions.
Gateway processes post to the Slack stand-in; a click is the request Slack would send
(form-encoded ``payload``, signed with the app's signing secret). The buttons that work are
in ``test_actions.py``; the fleet both use in ``action_fleet.py`` (tests/support).
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import action_fleet
from action_fleet import SECRET, click, signed
from clicks import (
    AUTH,
    BOUND,
    USER,
    buttons,
    is_admitted,
    is_muted,
    overrides,
    post_event,
    send,
    shown,
    the_button,
    until_every_replica,
)
from helpers import http
from slack_standin import block_actions_payload, signed_action_request

make_fleet = action_fleet.make_fleet  # a fixture, from tests/support/action_fleet.py


def unauthorized_clicks(good: dict) -> list[tuple[str, bytes, dict]]:
    """Requests for the click ``good`` that are not Slack's, each to be answered 401: (what, body, headers)."""
    body, headers = signed_action_request(SECRET, good)
    unsigned = {"Content-Type": "application/x-www-form-urlencoded"}
    stale_body, stale = signed_action_request(SECRET, good, timestamp=time.time() - 360)
    future_body, future = signed_action_request(SECRET, good, timestamp=time.time() + 360)
    wrong_body, wrong = signed_action_request("not-the-secret", good)
    return [
        ("wrong secret", wrong_body, wrong),
        ("tampered body", body.replace(b"U0ALICE123", b"U0MALLORY1"), headers),
        ("stale timestamp (6 min old)", stale_body, stale),
        ("timestamp 6 min ahead", future_body, future),
        ("no headers", body, unsigned),
        ("no signature", body, {**unsigned, "X-Slack-Request-Timestamp": headers["X-Slack-Request-Timestamp"]}),
        ("no timestamp", body, {**unsigned, "X-Slack-Signature": headers["X-Slack-Signature"]}),
        ("signature not v0", body, {**headers, "X-Slack-Signature": headers["X-Slack-Signature"][3:]}),
        ("timestamp not a number", body, {**headers, "X-Slack-Request-Timestamp": "soon"}),
        ("bearer token instead", body, {**unsigned, **AUTH}),
    ]


def unreadable_clicks(good: dict) -> list[tuple[str, tuple[bytes, dict]]]:
    """Correctly signed requests that are no readable click (variations of ``good``), each to be
    answered 400: (what, (body, headers))."""

    def payload(**change: object) -> dict:
        return {**good, **change}

    def action(**change: object) -> dict:
        return payload(actions=[{**good["actions"][0], **change}])

    return [
        ("not a form", signed(raw=b"%%%garbage&&==")),
        ("no payload field", signed(raw=b"data=%7B%7D")),
        ("payload not JSON", signed(raw=b"payload=%7Bnot+json")),
        ("payload a list", signed(raw=urlencode({"payload": "[1, 2]"}).encode())),
        ("empty body", signed(raw=b"")),
        ("not block_actions", signed(payload(type="view_submission"))),
        ("no actions", signed(payload(actions=[]))),
        ("unknown action_id", signed(action(action_id="delete"))),
        ("value not JSON", signed(action(value="db"))),
        ("value without category", signed(action(value=json.dumps({"record": ""})))),
        ("category not valid", signed(action(value=json.dumps({"category": "db; DROP", "record": ""})))),
        ("record of no alert", signed(action(value=json.dumps({"category": "db", "record": "other:key"})))),
        ("user not an id", signed(payload(user={"id": "<!channel>"}))),
        ("no container", signed({k: v for k, v in good.items() if k != "container"})),
    ]


def test_bad_clicks_are_refused_and_change_nothing(make_fleet, slack):
    gateways = make_fleet(replicas=2)
    ts = post_event(gateways[0], slack, "db", "cpu 99% on db-1").ts
    message = slack.message_json(ts)
    value = the_button(message, "mute")["value"]
    channel = slack.channel_id("#alerts")
    good = block_actions_payload("mute", value, USER, channel, ts, message)
    url = gateways[1].url + "/v1/slack/actions"

    for what, raw, head in unauthorized_clicks(good):
        status, answer, _ = http("POST", url, raw, head)
        assert status == 401, (what, status, answer)
        assert "error" in answer, (what, answer)

    for what, (raw, head) in unreadable_clicks(good):
        status, answer, _ = http("POST", url, raw, head)
        assert status == 400, (what, status, answer)
        assert "error" in answer, (what, answer)

    time.sleep(1.5)  # anything a refused click had started would show by now
    for gateway in gateways:
        assert overrides(gateway) == {}
        assert is_admitted(*send(gateway, "db"))
    assert slack.updates == [] and slack.message(ts).edits == [], "no message was edited"
    assert slack.refusals == []

    # The same click, correctly signed and without any bearer token, is accepted.
    status, answer, _, answered = click(gateways[1], slack, ts, "mute")
    assert status == 200, answer
    assert max(until_every_replica(gateways, "db", is_muted("db"), answered)) < BOUND


def test_a_body_that_is_not_utf8_is_unreadable(make_fleet, slack):
    """Slack's requests are UTF-8, and slack-sdk's verifier reads the body as such: a body that is
    not cannot be a click, signed or not (400), and nothing changes."""
    gateways = make_fleet(replicas=1)
    for secret in (None, "not-the-secret"):
        raw, headers = signed(raw=b"payload=\xff\xfe", **({"secret": secret} if secret else {}))
        status, answer, _ = http("POST", gateways[0].url + "/v1/slack/actions", raw, headers)
        assert status == 400, (status, answer)
    assert overrides(gateways[0]) == {} and slack.updates == []


def test_without_a_signing_secret_there_are_no_buttons_and_no_actions(make_fleet, slack):
    gateways = make_fleet(replicas=1, secret=None)
    ts = post_event(gateways[0], slack, "db", "no buttons here").ts
    message = slack.message_json(ts)
    print(f"\nwithout a signing secret:\n{shown(slack, ts)}")
    assert buttons(message) == [] and not [b for b in message["blocks"] if b.get("type") == "actions"]
    for secret in (SECRET, ""):
        payload = block_actions_payload(
            "mute", json.dumps({"category": "db", "record": ""}), USER, slack.channel_id("#alerts"), ts, message
        )
        body, headers = signed_action_request(secret or "x", payload)
        status, answer, _ = http("POST", gateways[0].url + "/v1/slack/actions", body, headers)
        assert 400 <= status < 500 and "error" in answer, (status, answer)
    time.sleep(1.0)
    assert overrides(gateways[0]) == {}
    assert is_admitted(*send(gateways[0], "db"))
    assert slack.updates == [] and slack.refusals == []
