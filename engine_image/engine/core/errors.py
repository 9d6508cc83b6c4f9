"""Errors the engine reports to its callers."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """A request the engine refuses before scheduling it (HTTP 400); the message is user-facing."""


class UnsupportedModelError(ValueError):
    """The model directory holds an architecture or feature the engine cannot run."""
