"""The error raised for malformed or out-of-range sampling parameters."""

from __future__ import annotations


class InvalidSamplingParams(ValueError):
    """A request's sampling parameters are malformed or out of range.

    The message is user-facing (an API layer can return it as a 400); `field` names the
    offending parameter so it can also fill OpenAI's `error.param`.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
