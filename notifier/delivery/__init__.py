"""Delivery: every replica consumes the shared outbox and posts each entry to Slack.

``worker`` reads, holds and sends (one sender per channel); ``group`` is the
consumer group (reading, claims, settling); ``pacing`` hands out send slots and
honours Slack's cooldowns; ``digests`` claims due digests; ``dead_letters``
lists and requeues what could not be sent.
"""
