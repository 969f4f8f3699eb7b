"""The front doors driven by Slack's Node clients from npm: ``@slack/web-api`` (which posts forms,
with blocks and attachments as JSON strings) and ``@slack/webhook``."""

from __future__ import annotations

import re

from front_doors import arrived, start, stats, token, webhook_url
from node_clients import run_node

SCRIPT = r"""
const { WebClient } = require('@slack/web-api');
const { IncomingWebhook } = require('@slack/webhook');
const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: '*node* parent' } }];
const attachments = [{ color: '#36a64f', title: 'from node', text: 'attached', fields: [{ title: 'k', value: 'v' }] }];
(async () => {
  const web = new WebClient(process.env.TOKEN, { slackApiUrl: process.env.API_URL, retryConfig: { retries: 0 } });
  const parent = await web.chat.postMessage({
    channel: '#node', text: 'node parent', blocks, attachments, username: 'node-bot', icon_url: 'https://example.com/n.png',
  });
  const reply = await web.chat.postMessage({ channel: parent.channel, text: 'node reply', thread_ts: parent.ts });
  const updated = await web.chat.update({ channel: parent.channel, ts: parent.ts, text: 'node parent updated' });
  const hook = new IncomingWebhook(process.env.WEBHOOK_URL);
  const sent = await hook.send({ text: 'node webhook', attachments, icon_emoji: ':node:' });
  console.log(JSON.stringify({ parent, reply, updated, sent }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_slacks_node_clients_post_reply_update_and_hook(redis_url, slack, tmp_path):
    gateway = start(redis_url, slack, tmp_path)
    try:
        env = {"TOKEN": token("ci"), "API_URL": f"{gateway.url}/api/", "WEBHOOK_URL": webhook_url(gateway, "ci")}
        ran = run_node(SCRIPT, env)
        seen = ran["result"]
        assert ran["stderr"] == ""  # the clients logged no error and no warning
        assert seen["parent"]["ok"] and re.fullmatch(r"\d{10}\.\d{6}", seen["parent"]["ts"])
        assert seen["reply"]["ok"] and seen["updated"]["ok"] and seen["sent"] == {"text": "ok"}

        parent = arrived(slack, "node parent updated")  # posted as sent, then edited
        assert parent.raw["blocks"][0]["text"]["text"] == "*node* parent"
        assert parent.attachments[0]["title"] == "from node" and parent.username == "node-bot"
        assert parent.icon_url == "https://example.com/n.png" and parent.channel == "#node"
        assert arrived(slack, "node reply").thread_ts == parent.ts
        hooked = arrived(slack, "node webhook")
        assert hooked.attachments[0]["fields"] == [{"title": "k", "value": "v"}] and hooked.icon_emoji == ":node:"
        assert sorted(slack.texts()) == ["node parent updated", "node reply", "node webhook"]
        assert slack.refusals == [] and stats(gateway)["accepted"] == 3
    finally:
        gateway.stop()
