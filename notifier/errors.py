"""The gateway's domain errors, in one place.

::

    NotifierError
    ├── SettingsError        a setting has a bad value; the message names the variable
    ├── ConfigError          the configuration file has problems; one line each, naming the place
    ├── TemplateError        a message template failed for one event: it takes the built-in shape
    ├── StoreUnavailable     the store did not answer (raised only by ``store.client``)
    ├── NotReplicated        the store took a write that too few replicas acknowledged in time
    └── DeliveryError        Slack did not take a call
        ├── RateLimited      429: wait ``retry_after`` seconds
        ├── Transient        5xx, timeout, broken connection: try again later
        └── Permanent        refused for good (``channel_not_found``, ``invalid_blocks``...)
            └── MessageGone  an edit of a message Slack no longer knows

HTTP answers are not domain errors: ``http.answers`` maps these to status codes.
"""

from __future__ import annotations


class NotifierError(Exception):
    """Base of every error the gateway raises on purpose."""


class SettingsError(NotifierError):
    """A setting has a bad value; the message is one line naming the variable."""


class ConfigError(NotifierError):
    """The configuration file has problems: ``problems`` holds one line each, naming the file and place."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class TemplateError(NotifierError):
    """A message template failed for one event (an undefined value, a block Slack would refuse, too slow).

    The event is not lost: it is posted in the built-in shape. The message says why, once per
    template and reason in the log.
    """


class StoreUnavailable(NotifierError):
    """The store did not answer; the request changed nothing and may be retried."""


class DeliveryError(NotifierError):
    """Slack did not take the call."""


class RateLimited(DeliveryError):
    """Slack answered 429: wait ``retry_after`` seconds before the next call."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited for {retry_after}s")
        self.retry_after = retry_after


class Transient(DeliveryError):
    """A 5xx, a timeout or a broken connection: try again later."""


class Permanent(DeliveryError):
    """Slack refused the call for good."""


class MessageGone(Permanent):
    """An edit or reply named a message Slack no longer knows (``message_not_found``)."""


class NotReplicated(NotifierError):
    """The store took a write but fewer than ``NOTIFIER_REDIS_MIN_REPLICAS`` replicas acknowledged it in time.

    Unlike :class:`StoreUnavailable`, something may have changed: ``id`` names the
    event (the alert's first event for a repeat); sending it again with the same
    ``dedup_key`` never posts it twice.
    """

    def __init__(self, event_id: str) -> None:
        super().__init__(f"event {event_id} was not replicated in time")
        self.id = event_id
