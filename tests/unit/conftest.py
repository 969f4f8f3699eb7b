"""Fixtures of the unit tests shared by several files."""

from doors_app import make_doors  # noqa: F401 (an in-process gateway with front-door tokens)
