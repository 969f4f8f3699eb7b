"""A front-door message as an event: its source, category, channel, and the limits' decision.

Each message is an event of its source (the token's name): its category is the
category of the first route matching its source and the channel it names, else
the source's name; its channel the one it names (which the token's ``channels``
must allow), else the route's, else the default; its text its ``text`` or a plain
rendering. It then passes the tree like any event. A reply to a refused message is
refused as its parent was (counted as dropped), without asking the limits. A reply
(``thread_ts``) and an update name a message the same token sent through the gateway,
or are ``message_not_found``, with nothing written.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ...gateway_ts import Fate
from ...models import Decision, Event, Outcome
from ...policy import Policy
from ...routing import Path, Router
from ..auth import Caller
from ..input import unknown_category
from ..state import Gateway
from .payload import Post, SlackError
from .usual import read_usual

_NOT_CATEGORY = re.compile(r"[^A-Za-z0-9_.:\-]+")
ANYWHERE = ("*",)  # a token's channels when it names none
TS = re.compile(r"\d{1,16}\.\d{1,9}")  # a ts as Slack writes one (match it whole); nothing else names a record
UNREAD = "(not read yet)"  # the text of an event until it goes to the store (see ``with_text``)


class Taken(NamedTuple):
    """What became of a message at the door: the decision, and the channel it goes to."""

    decision: Decision
    channel: str

    @property
    def dropped(self) -> bool:
        return self.decision.outcome is Outcome.DROPPED


def category_of(source: str, channel: str | None, policy: Policy) -> str:
    """The category of a front-door message: its route's ``category``, else its source's name (made valid)."""
    category = _category(policy.router, source, channel or "")
    if unknown_category(category, policy):  # NOTIFIER_CATEGORIES names it not: this token may not send
        raise SlackError("action_prohibited", f"category {category!r} is not one NOTIFIER_CATEGORIES names")
    return category


@functools.lru_cache(maxsize=1024)  # a storm's messages come from a few tokens to a few channels
def _category(router: Router, source: str, channel: str) -> str:
    route = router.door_route(source, channel)
    named = route.category if route is not None and route.category else source
    return _NOT_CATEGORY.sub("_", named)[:64] or "slack"


Routed = tuple[Event, Path]
# (router, token name, channel named) -> the event of such messages before their text is read, and its
# path: both depend on nothing else (policy snapshots share one router, which interns paths). Events
# are frozen: one serves every message. The storm path of the webhook door: one lookup.
_routed: dict[tuple[Router, str, str | None], Routed] = {}
MAX_ROUTED = 1024


def routed(gateway: Gateway, caller: Caller, channel: str | None, forbidden: str) -> Routed:
    """The event of a message naming ``channel`` and its path; ``forbidden`` (Slack's code) when the
    token may not post there.

    The event's text comes with :func:`with_text` when it goes to the store (a refused message's
    text is never read).
    """
    admission = gateway.admission
    key = (admission.limiter.policy.router, caller.name, channel)
    known = _routed.get(key)
    if known is None:
        category = category_of(caller.name, channel, admission.limiter.policy)
        event = Event(category=category, text=UNREAD, title=None, dedup_key=None)
        if len(_routed) >= MAX_ROUTED:
            _routed.clear()
        known = _routed[key] = (event, admission.route(event, caller.name, channel))
    goes_to = known[1].channel
    if caller.channels != ANYWHERE and not caller.may_post_to(goes_to):  # a glob match costs 0.9 us
        raise SlackError(forbidden, f"token {caller.name!r} may not post to {goes_to!r}")
    return known


def refused_on_sight(gateway: Gateway, caller: Caller, raw: bytes, content_type: str) -> tuple[Decision | None, bool]:
    """The refusal of a webhook message of the usual shape (``usual.py``) this replica decides by
    itself (no I/O, counted), else None: then read the message with ``payload.py``. And whether
    this replica was asked: then :func:`take` sends the message to the store without asking again.

    The storm path: a plain call, so a storm's refusals await nothing (as ``POST /v1/events``),
    and read no more of the body than Slack's checks and the channel.
    """
    usual = read_usual(raw, content_type)
    if usual is None:
        return None, False
    event, path = routed(gateway, caller, usual.channel or None, "action_prohibited")
    return gateway.admission.decide_here(event, path), True


async def take(
    gateway: Gateway, caller: Caller, post: Post, ts: str | None, forbidden: str, asked: bool = False
) -> Taken:
    """Decide ``post`` from ``caller``, known to its client by the gateway ts ``ts`` (if any);
    ``asked``: this replica was asked already and could not decide it (``refused_on_sight``).

    A message with a ts always goes to the store, which records its fate under the ts with
    its decision (a replica's own refusal would leave none).
    """
    parent = str(post.message.get("thread_ts") or "")
    fate = await own_fate(gateway, caller, parent) if parent else None
    if fate is not None:  # a reply to its own message: checked and counted where that went
        post = post._replace(channel=fate.channel)
    event, path = routed(gateway, caller, post.channel, forbidden)
    if ts:
        await gateway.sent.own(ts, caller.name, path.channel)
    admission = gateway.admission
    refused_by = fate.refused_by if fate is not None else ""
    if refused_by:
        if ts:
            await gateway.sent.refused(ts, refused_by)
        return Taken(admission.refuse(path, refused_by), path.channel)
    decision = admission.decide_here(event, path) if ts is None and not asked else None
    if decision is None:
        message = {**post.message, "ts": ts} if ts else post.message
        decision = await admission.decide_in_store(with_text(event, post), path, caller.name, message)
    return Taken(decision, path.channel)


def with_text(event: Event, post: Post) -> Event:
    """``event`` with the message's text (or its plain rendering): what digests, the console and hand-overs show."""
    return event.model_copy(update={"text": post.text})


async def update(gateway: Gateway, caller: Caller, post: Post) -> Taken:
    """A ``chat.update`` of the message ``post.ts``: its edit is queued (the latest wins), or, for
    a refused message, refused as it was. Only a message this token sent through the gateway."""
    fate = await own_fate(gateway, caller, str(post.ts))
    _, path = routed(gateway, caller, fate.channel, "channel_not_found")  # the token must still be allowed there
    refused_by = await gateway.sent.update(str(post.ts), post.message)
    if refused_by is None:  # gone since it was read
        raise SlackError("message_not_found", "no message of this token has this ts")
    if refused_by:
        return Taken(gateway.admission.refuse(path, refused_by), path.channel)
    return Taken(Decision(Outcome.ACCEPTED, ""), path.channel)


async def own_fate(gateway: Gateway, caller: Caller, ts: str) -> Fate:
    """What became of the message ``ts`` that ``caller`` sent through the gateway, else Slack's
    ``message_not_found``: a token edits and replies to its own messages only (as a bot on Slack),
    never to the gateway's alerts or another token's messages, whose ``ts`` it may have seen."""
    fate = await gateway.sent.fate(ts) if TS.fullmatch(ts) else None
    if fate is None or not fate.known or fate.sender != caller.name or not fate.channel:
        raise SlackError("message_not_found", "no message of this token has this ts")
    return fate
