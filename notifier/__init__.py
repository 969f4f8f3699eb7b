"""notifier: a Slack notification gateway with hierarchical, fleet-wide rate limits."""

__version__ = "0.1.0"
