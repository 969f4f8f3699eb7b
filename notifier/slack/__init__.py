"""Slack: where messages go (``sinks``) and what they look like (``messages``)."""
