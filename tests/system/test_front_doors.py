"""The Slack-compatible front doors driven by slack-sdk and curl, as their users configure them."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from front_doors import arrived, mute, start, stats, token, webhook_url
from helpers import http, need, wait_for
from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError
from slack_standin import SlackStandin

TS = re.compile(r"\d{10}\.\d{6}")
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "*deploy* of web"}}
ATTACHMENT = {
    "color": "good",
    "title": "build 7",
    "text": "passed",
    "fields": [{"title": "env", "value": "prod", "short": True}],
}


def web_client(gateway, name: str) -> WebClient:
    return WebClient(token=token(name), base_url=f"{gateway.url}/api/")


def test_slack_sdk_posts_replies_and_updates_as_sent(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        hook = WebhookClient(url=webhook_url(gateway, "ci"))
        body = {"text": "deploy <!here|here> done", "attachments": [ATTACHMENT], "username": "ci-bot"}
        sent = hook.send_dict({**body, "icon_emoji": ":rocket:"})
        assert (sent.status_code, sent.body) == (200, "ok")
        assert sent.headers["Content-Type"].startswith("text/plain")

        web = web_client(gateway, "ci")
        parent = web.chat_postMessage(channel="#deploys", text="deploying", blocks=[SECTION], username="deployer")
        assert parent["ok"] and TS.fullmatch(parent["ts"]) and parent["channel"] == "#deploys"
        reply = web.chat_postMessage(channel=parent["channel"], text="step 1 of 2", thread_ts=parent["ts"])
        assert reply["ok"] and reply["ts"] != parent["ts"]
        edited = web.chat_update(channel=parent["channel"], ts=parent["ts"], text="deployed", blocks=[SECTION])
        assert edited["ok"] and edited["ts"] == parent["ts"]

        hooked = arrived(slack, "deploy &lt;!here|here&gt; done")  # the ci token may not mention
        assert hooked.channel == "#alerts" and hooked.attachments == [ATTACHMENT]
        assert (hooked.username, hooked.icon_emoji) == ("ci-bot", ":rocket:")
        posted = slack.message_json(arrived(slack, "deployed").ts)  # the parent, edited
        assert posted["blocks"][0]["text"] == SECTION["text"] and posted["username"] == "deployer"
        child = arrived(slack, "step 1 of 2")
        assert child.thread_ts == posted["ts"] and child.channel_id == slack.channel_id("#deploys")
        time.sleep(0.5)  # nothing more arrives: each message once
        assert sorted(slack.texts()) == sorted(["deploy &lt;!here|here&gt; done", "deployed", "step 1 of 2"])
        assert slack.refusals == [] and stats(gateway)["accepted"] == 3
    finally:
        gateway.stop()


def test_a_token_with_mentions_keeps_them(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        for name in ("loud", "ci"):
            text = f"<!channel> from {name}, <!everyone>"
            assert web_client(gateway, name).chat_postMessage(channel="#ops", text=text, link_names=True)["ok"]
        assert arrived(slack, "<!channel> from loud, <!everyone>").raw.get("link_names") is True
        assert arrived(slack, "&lt;!channel&gt; from ci, &lt;!everyone&gt;").raw.get("link_names") is True
    finally:
        gateway.stop()


def test_refusals_look_like_success_and_are_counted_and_digested(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path, NOTIFIER_CATEGORY_LIMIT="2/1h", NOTIFIER_DIGEST_INTERVAL="1s")
    try:
        hook = WebhookClient(url=webhook_url(gateway, "ci"))
        answers = [hook.send(text=f"hook {i}") for i in range(3)]
        assert [(a.status_code, a.body) for a in answers] == [(200, "ok")] * 3
        assert [a.headers.get("X-Notifier-Outcome") for a in answers] == ["accepted", "accepted", "dropped"]

        web = web_client(gateway, "loud")
        mute(gateway, "loud")
        refused = web.chat_postMessage(channel="#api", text="api 0")
        assert refused["ok"] and TS.fullmatch(refused["ts"]) and refused.headers["X-Notifier-Outcome"] == "dropped"
        mute(gateway, "loud", on=False)
        # A reply to, and an update of, the refused message are refused too (counted, never posted),
        # though the limits have room again.
        reply = web.chat_postMessage(channel="#api", text="reply to 0", thread_ts=refused["ts"])
        update = web.chat_update(channel="#api", ts=refused["ts"], text="api 0 edited")
        assert reply["ok"] and update["ok"]
        assert reply.headers.get("X-Notifier-Outcome") == update.headers.get("X-Notifier-Outcome") == "dropped"
        assert web.chat_postMessage(channel="#api", text="api 1").headers["X-Notifier-Outcome"] == "accepted"

        counts = wait_for(lambda: (s := stats(gateway))["dropped"] == 4 and s, 5, what="four drops counted")
        assert counts["accepted"] == 3 and counts["by_category"]["loud"] == {"accepted": 1, "dropped": 3}
        for channel, drops in (("#alerts", 1), ("#api", 3)):
            wait_for(
                lambda c=channel, n=drops: suppressed(slack, c) == n, 10, what=f"{drops} drops digested in {channel}"
            )
        assert not {"hook 2", "api 0", "reply to 0", "api 0 edited"} & set(slack.texts())
        assert arrived(slack, "api 1").channel == "#api"
    finally:
        gateway.stop()


def suppressed(slack, channel: str) -> int:
    """Drops told in the digests of ``channel`` so far."""
    texts = [m.text for m in slack.received() if m.channel == channel]
    return sum(int(found.group(1)) for t in texts if (found := re.match(r"Suppressed (\d+)", t)))


def test_a_token_that_asks_for_429_gets_slacks_own(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path, NOTIFIER_CATEGORY_LIMIT="1/1h")
    try:
        hook = WebhookClient(url=webhook_url(gateway, "strict"))
        assert hook.send(text="first").status_code == 200
        refused = hook.send(text="second")
        assert refused.status_code == 429 and json.loads(refused.body) == {"ok": False, "error": "rate_limited"}
        assert int(refused.headers["Retry-After"]) >= 1
        web = WebClient(token=token("strict"), base_url=f"{gateway.url}/api/")
        with pytest.raises(SlackApiError) as raised:
            web.chat_postMessage(channel="#x", text="third")
        assert raised.value.response.status_code == 429 and raised.value.response["error"] == "ratelimited"
        assert int(raised.value.response.headers["Retry-After"]) >= 1
        assert wait_for(lambda: stats(gateway)["dropped"] == 2, 5)
    finally:
        gateway.stop()


def test_curl_with_slacks_documented_form(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        payload = '{"channel": "#curl", "username": "webhookbot", "text": "posted with curl", "icon_emoji": ":ghost:"}'
        command = [
            need("curl"),
            "-sS",
            "-X",
            "POST",
            "--data-urlencode",
            f"payload={payload}",
            webhook_url(gateway, "ci"),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (0, "ok", "")
        message = arrived(slack, "posted with curl")
        assert (message.channel, message.username, message.icon_emoji) == ("#curl", "webhookbot", ":ghost:")
    finally:
        gateway.stop()


BIG = {"text": "x" * (1024 * 1024)}
MANY = {"text": "many", "blocks": [{"type": "divider"}] * 10_000}
FIFTY_ONE = {"text": "51", "blocks": [{"type": "divider"}] * 51}
LONG_SECTION = {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}]}
UNKNOWN_TYPE = {"blocks": [{"type": "marquee", "text": "hi"}]}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
DEEP = b'{"text": "deep", "channel": "#x", "attachments": [{"fields": ' + b"[" * 600 + b"]" * 600 + b"}]}"

WEBHOOK_CASES = [  # (token, body, headers, status, answer)
    ("ci", {"text": 5}, None, 400, "invalid_payload"),
    ("ci", [1, 2], None, 400, "invalid_payload"),
    ("ci", b"{not json", None, 400, "invalid_payload"),
    ("ci", {"text": "x", "attachments": "nope"}, None, 400, "invalid_blocks"),
    ("ci", {"text": "x", "mrkdwn": "maybe"}, None, 400, "invalid_payload"),
    ("ci", {"username": "nobody"}, None, 400, "no_text"),
    ("ci", {"text": ""}, None, 400, "no_text"),
    ("ci", FIFTY_ONE, None, 400, "invalid_blocks"),
    ("ci", LONG_SECTION, None, 400, "invalid_blocks"),
    ("ci", UNKNOWN_TYPE, None, 400, "invalid_blocks"),
    ("ci", MANY, None, 413, None),
    ("ci", BIG, None, 413, None),
    ("ci", b"payload=%7Bbroken", FORM, 400, "invalid_payload"),
    ("ci", DEEP, None, 400, "invalid_payload"),
    ("nobody", {"text": "x"}, None, 404, "no_service"),
    ("reader", {"text": "x"}, None, 403, "action_prohibited"),
    ("payments", {"text": "x", "channel": "#general"}, None, 403, "action_prohibited"),
]
API_CASES = [  # (token or None, body, headers, answer)
    ("ci", {"channel": "#x", "text": 5}, None, "invalid_arguments"),
    ("ci", b"{broken", None, "invalid_json"),
    ("ci", b"channel=%23x&blocks=%5Bbroken", FORM, "invalid_blocks"),
    ("ci", b"channel=%23x&text=hi&unfurl_links=perhaps", FORM, "invalid_arguments"),
    ("ci", {"channel": "#x", **FIFTY_ONE}, None, "invalid_blocks"),
    ("ci", {"channel": "#x", **LONG_SECTION}, None, "invalid_blocks"),
    ("ci", {"channel": "#x", **UNKNOWN_TYPE}, None, "invalid_blocks"),
    ("ci", {"channel": "#x"}, None, "no_text"),
    ("ci", DEEP, None, "invalid_arguments"),
    (None, {"channel": "#x", "text": "x"}, None, "not_authed"),
    ("nobody", {"channel": "#x", "text": "x"}, None, "invalid_auth"),
    ("reader", {"channel": "#x", "text": "x"}, None, "missing_scope"),
    ("payments", {"channel": "#general", "text": "x"}, None, "channel_not_found"),
]


def _raw(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def test_bad_input_is_answered_as_slack_would_and_counts_nothing(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        for name, body, headers, status, answer in WEBHOOK_CASES:
            url = f"{gateway.url}/services/T0/B0/{token(name)}"  # "nobody" has a token no one knows
            got, parsed, head = http("POST", url, _raw(body), headers)
            assert got == status, (name, str(body)[:80], got, parsed)
            if answer:
                assert parsed == {"_raw": answer} and head["Content-Type"].startswith("text/plain"), parsed
        for name, body, headers, answer in API_CASES:
            auth = {"Authorization": f"Bearer {token(name)}"} if name else {}
            got, parsed, _ = http(
                "POST", f"{gateway.url}/api/chat.postMessage", _raw(body), {**auth, **(headers or {})}
            )
            assert (got, parsed.get("ok"), parsed.get("error")) == (200, False, answer), (str(body)[:80], parsed)
            if answer == "invalid_blocks" and body is not API_CASES[2][1]:  # Slack says where, in its words
                assert "[json-pointer:/blocks" in parsed["errors"][0], parsed
        got, parsed, _ = http(
            "POST", f"{gateway.url}/api/chat.postMessage", _raw(BIG), {"Authorization": "Bearer " + token("ci")}
        )
        assert got == 413 and parsed["ok"] is False
        time.sleep(0.3)
        counts = stats(gateway)
        assert counts["accepted"] == counts["dropped"] == 0 and slack.received() == []
    finally:
        gateway.stop()


def test_auth_test_names_the_token(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        answer = web_client(gateway, "payments").auth_test()
        assert answer["ok"] and answer["user"] == "payments"
        with pytest.raises(SlackApiError) as raised:
            WebClient(token="xoxb-unknown", base_url=f"{gateway.url}/api/").auth_test()
        assert raised.value.response["error"] == "invalid_auth"
    finally:
        gateway.stop()


def test_a_reply_waits_for_its_parent_on_another_replica(redis_url, tmp_path):
    """The parent's post is slow; its reply, sent to another replica and naming another channel,
    waits for it and lands in its thread; an update through a third gateway started afterwards
    (the ts lives in the store) edits it."""
    slow = SlackStandin(post_latency=1.0).start()
    first = start(redis_url, slow, tmp_path, NOTIFIER_REPLICA_ID="a")
    second = start(redis_url, slow, tmp_path, NOTIFIER_REPLICA_ID="b")
    try:
        parent = web_client(first, "ci").chat_postMessage(channel="#slow", text="slow parent")
        reply = web_client(second, "ci").chat_postMessage(
            channel="#other", text="waiting reply", thread_ts=parent["ts"]
        )
        assert reply["ok"]
        posted = arrived(slow, "slow parent")
        child = arrived(slow, "waiting reply")
        assert (child.thread_ts, child.channel_id) == (posted.ts, posted.channel_id) and child.at > posted.at
        second.stop()
        third = start(redis_url, slow, tmp_path, NOTIFIER_REPLICA_ID="c")
        try:
            assert web_client(third, "ci").chat_update(channel="#slow", ts=parent["ts"], text="slow parent, edited")[
                "ok"
            ]
            assert arrived(slow, "slow parent, edited").ts == posted.ts
        finally:
            third.stop()
        assert slow.refusals == [] and len(slow.received()) == 2
    finally:
        first.stop()
        second.stop()
        slow.stop()
