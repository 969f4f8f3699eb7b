"""The gateway's domain errors, in one place.

::

    NotifierError
    ├── SettingsError        a setting has a bad value; the message names the variable
    ├── ConfigError          the configuration file has problems; one line each, naming the place
    ├── TemplateError        a message template failed for one event: it takes the built-in shape
    ├── StoreUnavailable     the store did not answer (raised only by ``store.client``); nothing changed
    │   ├── ReplyLost        a call sent whose reply did not come: it may have run
    │   └── StoreFull        over maxmemory: the store refused a write
    ├── InDoubt              a 503 whose event may have been admitted; ``id`` names it
    │   ├── NotReplicated    the store took a write that too few replicas acknowledged in time
    │   └── OutcomeUnknown   the admission was sent and its reply did not come in time
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
    """The store did not answer, or refused the call; the call changed nothing and may be retried.

    Except a :class:`ReplyLost`, which may have changed something.
    """


class ReplyLost(StoreUnavailable):
    """A call reached the store (or may have) but its reply did not come: a timeout, a connection
    cut after it was sent. The store may have run it; callers that must know say so
    (the admission answers :class:`OutcomeUnknown`), the others retry as for any failure.
    """


class StoreFull(StoreUnavailable):
    """The store is over its ``maxmemory`` and refused a write (``OOM``): nothing changed.
    It answers again by itself once keys expire or the limit is raised."""


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


class InDoubt(NotifierError):
    """An event that may have been admitted, though its request failed: answered ``503`` naming it.

    Unlike :class:`StoreUnavailable`, something may have changed: ``id`` names the
    event; sending it again with the same ``dedup_key`` never posts it twice.
    """

    def __init__(self, event_id: str, message: str) -> None:
        super().__init__(message)
        self.id = event_id


class NotReplicated(InDoubt):
    """The store took a write but fewer than ``NOTIFIER_REDIS_MIN_REPLICAS`` replicas acknowledged it in
    time; ``id`` is the event's (the alert's first event for a repeat)."""

    def __init__(self, event_id: str) -> None:
        super().__init__(event_id, f"event {event_id} was not replicated in time")


class OutcomeUnknown(InDoubt):
    """The event's admission was sent to the store, and no reply came in time (a late reply, a reply
    lost in a failover): the script may have admitted it, or not; ``id`` is the id it was sent with."""

    def __init__(self, event_id: str) -> None:
        super().__init__(event_id, f"the store's answer about event {event_id} was lost; it may have been admitted")
