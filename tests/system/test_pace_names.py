"""One Slack channel under two spellings keeps one pace, whichever replica knows the id and whichever sends first.

A replica that has not learnt ``#alerts`` -> ``C0123`` yet paces the name alone; one that has
paces the id and keeps clear of the name's slots. The CI caught the other order: a send under the
id first, then one under the name on a replica that had not learnt it, both at once.
"""

from __future__ import annotations

from notifier.delivery.pacing import Bucket, widened
from notifier.rules import parse_rules
from notifier.store.keys import Keys
from notifier.store.scripts import Scripts
from notifier.store.topology import connect

SLACK = parse_rules("1/1s")


async def test_a_send_under_the_id_holds_back_a_replica_that_paces_the_name(redis_url):
    keys = Keys("pace-names")
    store = connect(redis_url, False, 5.0)
    scripts = Scripts(store.redis)
    name = (keys.pace("#alerts"), keys.cooldown("#alerts"))
    by_id = Bucket(keys.pace("C0123ABCD"), keys.cooldown("C0123ABCD"), keys.cooldown_all, SLACK, name)
    by_name = Bucket(*name, keys.cooldown_all, SLACK)

    async def wait_ms(bucket: Bucket) -> float:
        return int(await store.run(scripts.pace, bucket.keys, widened(bucket.rules))) / 1000

    try:
        assert await wait_ms(by_id) == 0
        assert 1000 < await wait_ms(by_name) <= 1100  # the id's send is in the name's log too
        assert 2100 < await wait_ms(by_id) <= 2200  # and the name's in the id's view
    finally:
        await store.close()
