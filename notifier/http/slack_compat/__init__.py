"""Slack-compatible front doors: Slack's incoming webhooks and Web API, answered as Slack answers.

A tool that already posts to Slack (Alertmanager, Grafana, Argo CD, Flux, CI jobs,
slack-sdk scripts) changes only its Slack URL: its messages become events of its
token, pass the limit tree, windows, digests and the outbox like any event, and are
posted as the client sent them. ``payload.py`` and ``shape.py`` read and check,
``usual.py`` reads the usual webhook message on a storm's path, ``intake.py`` decides,
``answers.py`` answers, ``doors.py`` holds the handlers.
"""

from __future__ import annotations

from aiohttp import web

from .doors import auth_test, chat_update, post_message, post_webhook, unknown_method

ROUTES = [
    web.post("/services/{a}/{b}/{secret}", post_webhook),
    web.post("/api/chat.postMessage", post_message),
    web.post("/api/chat.update", chat_update),
    web.post("/api/auth.test", auth_test),
    web.post("/api/{method}", unknown_method),
]
HANDLERS = frozenset(route.handler for route in ROUTES)  # they answer their own errors, in Slack's shapes
