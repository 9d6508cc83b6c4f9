"""Errors the engine reports to its callers as a client mistake (HTTP 400)."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """A request the engine refuses before scheduling it; the message is user-facing."""
