"""Acting from Slack (contract: "Acting from Slack"): the mute and unmute buttons, end to end.

Gateway processes post to the Slack stand-in; a click is the request Slack would send
(form-encoded ``payload``, signed with the app's signing secret), built from the
message as the stand-in shows it. The override it makes must hold on every replica
within 1 s of the click's answer, and the clicked message is edited in place. Clicks the
gateway refuses are in ``test_actions_refused.py``; the fleet both use in ``action_fleet.py``
(tests/support).
"""

from __future__ import annotations

import json
import time

import action_fleet
from action_fleet import SECRET, click, signed
from clicks import (
    AUTH,
    BOUND,
    CLICK_ANSWER,
    OTHER_USER,
    USER,
    buttons,
    chosen,
    context_texts,
    control,
    edited_to,
    is_admitted,
    is_muted,
    overrides,
    post_event,
    send,
    shown,
    the_button,
    until_every_replica,
)
from helpers import Gateway, http, wait_for
from slack_standin import block_actions_payload, signed_action_request

make_fleet = action_fleet.make_fleet  # a fixture, from tests/support/action_fleet.py


# ---------------------------------------------------------------- the tests


def test_mute_and_unmute_from_slack(make_fleet, slack):
    gateways = make_fleet()
    received = post_event(gateways[0], slack, "db", "replication lag 42s on db-3", title="Lag", severity="warning")
    ts, before = received.ts, slack.message_json(received.ts)
    print(f"\nBEFORE the mute:\n{shown(slack, ts)}")
    mute = the_button(before, "mute")
    assert json.loads(mute["value"])["category"] == "db", mute
    assert mute["text"]["type"] == "plain_text" and "db" in mute["text"]["text"], mute
    assert "replication lag 42s on db-3" in before["text"]
    assert slack.refusals == []

    status, answer, took, answered = click(gateways[1], slack, ts, "mute")
    assert status == 200, answer
    print(f"mute click answered in {took * 1000:.0f} ms: {answer}")
    assert took < CLICK_ANSWER
    times = until_every_replica(gateways, "db", is_muted("db"), answered)
    print(
        f"mute click -> db refused on every replica within {max(times) * 1000:.0f} ms of the answer "
        f"({', '.join(f'{t * 1000:.0f} ms' for t in times)})"
    )
    assert max(times) < BOUND
    status, body = send(gateways[2], "db")
    assert 0 < body["retry_after"] <= 3600, body
    assert is_admitted(*send(gateways[0], "web")), "the mute holds db only"

    override = overrides(gateways[2])["db"]
    assert override["rules"] == "0/1h" and f"<@{USER}>" in override["by"], override
    assert answered + 3600 - 5 <= override["until"] <= answered + 3600, override
    until = time.strftime("%H:%M UTC", time.gmtime(override["until"]))

    banner = f"Muted db until {until} by <@{USER}>"
    edited = wait_for(edited_to(slack, ts, banner), 20, what="the clicked message edited to the mute")
    after = slack.message_json(ts)
    print(f"AFTER the mute:\n{shown(slack, ts)}")
    assert edited.ts == ts and slack.updates[-1][2] == ts
    assert "replication lag 42s on db-3" in json.dumps(after["blocks"]), "the event is still shown"
    assert any(banner in text for text in context_texts(after)), after["blocks"]
    unmute = the_button(after, "unmute")
    assert json.loads(unmute["value"])["category"] == "db"
    assert not [b for b in buttons(after) if b["action_id"] == "mute"]
    assert [m.ts for m in slack.received() if "replication lag" in json.dumps(m.blocks)] == [ts], (
        "an edit, no new message"
    )

    unmute_from_slack(gateways, slack, ts)


def unmute_from_slack(gateways: list[Gateway], slack, ts: str) -> None:
    """The second half of ``test_mute_and_unmute_from_slack``: another user clicks unmute on the
    muted message ``ts``; db is admitted on every replica and the message is edited back."""
    status, answer, took, answered = click(gateways[2], slack, ts, "unmute", user=OTHER_USER)
    assert status == 200, answer
    print(f"unmute click answered in {took * 1000:.0f} ms: {answer}")
    assert took < CLICK_ANSWER
    times = until_every_replica(gateways, "db", is_admitted, answered)
    print(f"unmute click -> db admitted on every replica within {max(times) * 1000:.0f} ms of the answer")
    assert max(times) < BOUND
    assert all("db" not in overrides(g) for g in gateways)

    banner = f"Unmuted db by <@{OTHER_USER}>"
    wait_for(edited_to(slack, ts, banner), 20, what="the clicked message edited to the unmute")
    final = slack.message_json(ts)
    print(f"AFTER the unmute:\n{shown(slack, ts)}")
    assert any(banner in text for text in context_texts(final))
    assert not any("Muted db" in text for text in context_texts(final)), "the mute banner is replaced"
    assert json.loads(the_button(final, "mute")["value"])["category"] == "db"
    assert not [b for b in buttons(final) if b["action_id"] == "unmute"]
    assert [u[2] for u in slack.updates] == [ts, ts], slack.updates
    assert slack.refusals == []


def test_mute_of_an_alert_from_slack(make_fleet, slack):
    """An alert's message (dedup_key): the button names its record; the edit keeps its state."""
    gateways = make_fleet(replicas=2)
    received = post_event(gateways[0], slack, "disk", "disk 91% on web-1", dedup_key="disk-web-1")
    ts = received.ts
    value = json.loads(the_button(slack.message_json(ts), "mute")["value"])
    assert value["category"] == "disk" and value["record"], value

    status, answer, took, answered = click(gateways[1], slack, ts, "mute")
    assert status == 200 and took < CLICK_ANSWER, answer
    assert max(until_every_replica(gateways, "disk", is_muted("disk"), answered)) < BOUND
    until = time.strftime("%H:%M UTC", time.gmtime(overrides(gateways[0])["disk"]["until"]))
    wait_for(edited_to(slack, ts, f"Muted disk until {until} by <@{USER}>"), 20, what="the alert's message edited")
    muted = slack.message_json(ts)
    assert "disk 91% on web-1" in muted["text"]
    the_button(muted, "unmute")

    # A repeat is answered as a duplicate (it counts against no limit) and shows on the same message.
    status, body, _ = gateways[0].post(
        {"category": "disk", "text": "disk 91% on web-1", "dedup_key": "disk-web-1"}, headers=AUTH
    )
    assert status == 200 and body["status"] == "duplicate", body
    wait_for(edited_to(slack, ts, "Seen 2 times"), 20, what="the repeat shown")
    both = slack.message_json(ts)
    assert f"Muted disk until {until}" in both["text"], "the banner stays with the repeat count"
    the_button(both, "unmute")

    status, answer, took, answered = click(gateways[0], slack, ts, "unmute")
    assert status == 200 and took < CLICK_ANSWER, answer
    assert max(until_every_replica(gateways, "disk", is_admitted, answered)) < BOUND
    wait_for(edited_to(slack, ts, f"Unmuted disk by <@{USER}>"), 20, what="the alert's message edited again")
    the_button(slack.message_json(ts), "mute")
    assert len([m for m in slack.received() if m.thread_ts is None and "disk 91%" in m.text]) == 1
    assert slack.refusals == []


def test_an_edited_message_still_carries_the_event_text(make_fleet, slack):
    """After a click, the message's text (Slack's fallback: notifications, clients without blocks)
    is still the event's, with the banner after it: a title or a multi-line text must not cut it."""
    gateways = make_fleet(replicas=1)
    event_line = "replica db-7 is 93 s behind"
    ts = post_event(gateways[0], slack, "db", f"replication lag\n{event_line}", title="Replication").ts
    before = slack.message_json(ts)["text"]
    assert event_line in before, before
    status, answer, _, _ = click(gateways[0], slack, ts, "mute")
    assert status == 200, answer
    until = time.strftime("%H:%M UTC", time.gmtime(overrides(gateways[0])["db"]["until"]))
    banner = f"Muted db until {until} by <@{USER}>"
    wait_for(edited_to(slack, ts, banner), 20, what="the clicked message edited")
    after = slack.message_json(ts)
    print(f"\ntext before the click: {before!r}\ntext after the click:  {after['text']!r}")
    assert event_line in json.dumps(after["blocks"])
    assert after["text"] == f"{before}\n{banner}", "the event's text is cut from the message's text"


def test_buttons_keep_the_largest_message_within_slack_limits(make_fleet, slack):
    gateways = make_fleet(replicas=1)
    text = "big-event " + "<&>" * 996  # 2998 characters, about 12,000 once escaped
    fields = {f"k{i:02}-{'<' * 96}": "&" * 1000 for i in range(20)}
    received = post_event(gateways[0], slack, "big", text, title="T" * 150, fields=fields)
    assert slack.refusals == []
    message = slack.message_json(received.ts)
    payload = block_actions_payload(
        "mute", the_button(message, "mute")["value"], USER, slack.channel_id("#alerts"), received.ts, message
    )
    body, _ = signed_action_request(SECRET, payload)
    print(f"\nthe click on the largest message is a {len(body)}-byte request (Slack sends the whole message)")
    status, answer, _, _ = click(gateways[0], slack, received.ts, "mute")
    assert status == 200, ("a click on a message the gateway posted must be readable", status, answer)
    wait_for(edited_to(slack, received.ts, "Muted big until"), 20, what="the big message edited")
    the_button(slack.message_json(received.ts), "unmute")
    assert slack.refusals == []


# ---------------------------------------------------------------- mute choices and links


def test_mute_choices_are_a_menu_and_the_chosen_one_is_applied(make_fleet, slack):
    """The default NOTIFIER_MUTE_CHOICES (1h, 4h, 24h): a menu; picking 4h mutes for 4 hours, fleet-wide."""
    gateways = make_fleet(replicas=2, choices=None)
    ts = post_event(gateways[0], slack, "db", "replication lag 12s on db-2", dedup_key="lag-db-2").ts
    menu = control(slack.message_json(ts), "mute")
    print(f"\nthe mute menu:\n{shown(slack, ts)}")
    durations = [o["value"].partition("~")[0] for o in menu["options"]]
    assert menu["type"] == "static_select" and durations == ["1h", "4h", "24h"]

    status, answer, took, answered = click(gateways[1], slack, ts, "mute", choice="4h")
    assert status == 200 and took < CLICK_ANSWER, answer
    assert max(until_every_replica(gateways, "db", is_muted("db", "0/4h"), answered)) < BOUND
    override = overrides(gateways[0])["db"]
    assert override["rules"] == "0/4h" and answered + 4 * 3600 - 5 <= override["until"] <= answered + 4 * 3600
    assert override["until"] == round(override["until"], 3), "until: unix seconds with a millisecond fraction"
    until = time.strftime("%H:%M UTC", time.gmtime(override["until"]))
    wait_for(edited_to(slack, ts, f"Muted db until {until} by <@{USER}>"), 20, what="the mute shown")
    assert control(slack.message_json(ts), "unmute")["type"] == "button"

    status, answer, _, answered = click(gateways[0], slack, ts, "unmute")
    assert status == 200, answer
    assert max(until_every_replica(gateways, "db", is_admitted, answered)) < BOUND
    wait_for(edited_to(slack, ts, f"Unmuted db by <@{USER}>"), 20, what="the unmute shown")
    assert control(slack.message_json(ts), "mute")["type"] == "static_select", "the menu is back"
    assert slack.refusals == []


def test_a_menu_click_that_names_no_control_or_duration_is_refused(make_fleet, slack):
    gateways = make_fleet(replicas=1, choices="1h,2h")
    ts = post_event(gateways[0], slack, "db", "cpu 97% on db-4").ts
    message = slack.message_json(ts)
    two_hours = chosen(control(message, "mute"), "2h")
    good = block_actions_payload("mute", two_hours, USER, slack.channel_id("#alerts"), ts, message)
    action = good["actions"][0]
    bad = [
        ("a block of another app", {**action, "block_id": "abc"}),
        ("a record digest not hex", {**action, "block_id": "notifier-state-actions:db:" + "z" * 32}),
        ("an invalid category", {**action, "block_id": "notifier-state-actions:d b:"}),
        ("no duration", {**action, "selected_option": {"text": action["selected_option"]["text"], "value": "ever"}}),
        ("a duration of 0", {**action, "selected_option": {"text": action["selected_option"]["text"], "value": "0s"}}),
    ]
    for what, changed in bad:
        status, answer, _ = http("POST", gateways[0].url + "/v1/slack/actions", *signed({**good, "actions": [changed]}))
        assert status == 400 and "error" in answer, (what, status, answer)
    assert overrides(gateways[0]) == {} and slack.updates == []
    status, answer, _ = http("POST", gateways[0].url + "/v1/slack/actions", *signed(good))
    assert status == 200 and overrides(gateways[0])["db"]["rules"] == "0/2h", answer


def test_links_are_buttons_kept_by_every_edit_and_a_click_on_one_changes_nothing(make_fleet, slack):
    gateways = make_fleet(replicas=1)
    links = [
        {"text": "Runbook", "url": "https://runbooks.example/db/lag"},
        {"text": "Dash", "url": "http://g.example/d"},
    ]
    ts = post_event(gateways[0], slack, "db", "lag 30s on db-5", dedup_key="lag-db-5", links=links).ts

    def shown_links() -> list[tuple[str, str]]:
        message = slack.message_json(ts)
        return [
            (e["text"]["text"], e["url"])
            for b in message["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if "url" in e
        ]

    assert shown_links() == [(k["text"], k["url"]) for k in links]
    message = slack.message_json(ts)
    link = control(
        message, next(e["action_id"] for b in message["blocks"] for e in b.get("elements", []) if "url" in e)
    )
    payload = block_actions_payload(link["action_id"], None, USER, slack.channel_id("#alerts"), ts, message)
    status, answer, _ = http("POST", gateways[0].url + "/v1/slack/actions", *signed_action_request(SECRET, payload))
    assert status == 200, answer
    time.sleep(1.0)
    assert overrides(gateways[0]) == {} and slack.updates == [], "a link click changes nothing"

    status, body, _ = gateways[0].post({"category": "db", "text": "lag 30s", "dedup_key": "lag-db-5"}, headers=AUTH)
    assert status == 200 and body["status"] == "duplicate", body
    wait_for(edited_to(slack, ts, "Seen 2 times"), 20, what="the repeat shown")
    assert shown_links() == [(k["text"], k["url"]) for k in links], "the repeat's edit keeps the links"
    assert click(gateways[0], slack, ts, "mute")[0] == 200
    wait_for(edited_to(slack, ts, "Muted db until"), 20, what="the mute shown")
    assert shown_links() == [(k["text"], k["url"]) for k in links], "the mute's edit keeps the links"
    assert slack.refusals == []
