"""A post is settled before anything else is asked of the store: a store that stops answering right
after Slack took a message must not make the gateway take it for unsent and post it again.

The first post to a channel given by name teaches its id (``delivery/channels.py``); that lesson
was once written before the settle, so a store gone at that moment raised between the two and the
entry was posted again once the store came back (``test_durability``'s SIGKILL rounds caught it).
"""

from __future__ import annotations

import time

from helpers import Gateway, RedisServer, slack_env, wait_for
from slack_standin import SlackStandin
from topology import freeze, thaw


def test_a_store_that_stops_answering_after_a_post_does_not_make_it_post_twice(tmp_path):
    slack = SlackStandin(post_latency=1.0).start()  # the post is in flight while the store stops
    server = RedisServer().start()
    env = slack_env(server.url, slack, NOTIFIER_REDIS_TIMEOUT="300ms")
    gateway = Gateway(env, log_dir=str(tmp_path)).start()
    try:
        assert gateway.post({"category": "db", "text": "once-only"})[0] == 202
        wait_for(lambda: slack.in_flight == 1, 10, what="the post in flight")
        freeze(server)  # Slack answers (with #alerts' id) while the store does not
        wait_for(lambda: slack.in_flight == 0, 5, what="Slack's answer")
        time.sleep(1.5)  # every store call after the post times out meanwhile
        thaw(server)
        wait_for(lambda: gateway.get("/v1/stats")[1].get("delivered") == 1, 20, what="the delivery settled")
        time.sleep(2)  # a second post of the entry would come by now
        assert [t for t in slack.texts() if "once-only" in t] != []
        assert len([t for t in slack.texts() if "once-only" in t]) == 1, slack.texts()
    finally:
        gateway.stop()
        thaw(server)
        server.stop()
        slack.stop()
