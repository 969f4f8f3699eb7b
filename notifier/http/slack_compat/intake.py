"""A front-door message as an event: its source, category, channel, and the limits' decision.

Each message is an event of its source (the token's name): its category is the
category of the first route matching its source and the channel it names, else
the source's name; its channel the one it names (which the token's ``channels``
must allow), else the route's, else the default; its text its ``text`` or a plain
rendering. It then passes the tree like any event. A reply to a refused message is
refused as its parent was (counted as dropped), without asking the limits.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ...models import Decision, Event, Outcome
from ...policy import Policy
from ...routing import Path
from ..auth import Caller
from ..input import unknown_category
from ..state import Gateway
from .payload import Post, SlackError

_NOT_CATEGORY = re.compile(r"[^A-Za-z0-9_.:\-]+")


class Taken(NamedTuple):
    """What became of a message at the door: the decision, and the channel it goes to."""

    decision: Decision
    channel: str

    @property
    def dropped(self) -> bool:
        return self.decision.outcome is Outcome.DROPPED


def category_of(source: str, channel: str | None, policy: Policy) -> str:
    """The category of a front-door message: its route's ``category``, else its source's name (made valid)."""
    route = policy.router.match({"source": source, "channel": channel or ""})
    named = route.category if route is not None and route.category else source
    category = _NOT_CATEGORY.sub("_", named)[:64] or "slack"
    if unknown_category(category, policy):  # NOTIFIER_CATEGORIES names it not: this token may not send
        raise SlackError("action_prohibited", f"category {category!r} is not one NOTIFIER_CATEGORIES names")
    return category


def routed(gateway: Gateway, caller: Caller, post: Post, forbidden: str) -> tuple[Event, Path]:
    """The event of ``post`` and its path; ``forbidden`` (Slack's code) when the token may not post there."""
    admission = gateway.admission
    category = category_of(caller.name, post.channel, admission.limiter.policy)
    event = Event(category=category, text=post.text, title=None, dedup_key=None)
    path = admission.route(event, caller.name, post.channel)
    if not caller.may_post_to(path.channel):
        raise SlackError(forbidden, f"token {caller.name!r} may not post to {path.channel!r}")
    return event, path


async def take(gateway: Gateway, caller: Caller, post: Post, ts: str | None, forbidden: str) -> Taken:
    """Decide ``post`` from ``caller``, known to its client by the gateway ts ``ts`` (if any).

    A message with a ts always goes to the store, which records its fate under the ts with
    its decision (a replica's own refusal would leave none).
    """
    event, path = routed(gateway, caller, post, forbidden)
    admission = gateway.admission
    parent = post.message.get("thread_ts")
    refused_by = (await gateway.sent.fate(parent)).refused_by if parent else ""
    if refused_by:
        return Taken(admission.refuse(path, refused_by), path.channel)
    if ts is None:
        decision = admission.decide_here(event, path) or await admission.decide_in_store(
            event, path, caller.name, post.message
        )
    else:
        decision = await admission.decide_in_store(event, path, caller.name, {**post.message, "ts": ts})
    return Taken(decision, path.channel)


async def update(gateway: Gateway, caller: Caller, post: Post) -> Taken:
    """A ``chat.update`` of the message ``post.ts``: its edit is queued (the latest wins), or, for
    a refused message, refused as it was."""
    _, path = routed(gateway, caller, post, "channel_not_found")
    refused_by = await gateway.sent.update(str(post.ts), str(post.channel), post.message)
    if refused_by:
        return Taken(gateway.admission.refuse(path, refused_by), path.channel)
    return Taken(Decision(Outcome.ACCEPTED, ""), path.channel)
