"""What a child process reports to the launcher once, over its start-up pipe: ready or failed."""

from __future__ import annotations

import msgspec


class SchedulerReady(msgspec.Struct, frozen=True):
    """The scheduler loaded its model: the facts the HTTP process is built from."""

    max_total_tokens: int
    context_length: int
    device: str
    dtype: str
    is_embedding: bool


class DetokenizerReady(msgspec.Struct, frozen=True):
    """The detokenizer loaded its tokenizer and bound its sockets."""


class TokenizerWorkerReady(msgspec.Struct, frozen=True):
    """An extra tokenizer worker loaded its tokenizer and built its app; it serves next."""


class TPWorkerReady(msgspec.Struct, frozen=True):
    """A tensor-parallel worker joined the group and loaded its shard of the model."""

    rank: int


class StartupFailed(msgspec.Struct, frozen=True):
    """A child could not start; ``message`` is one line for the operator."""

    message: str


ChildReady = SchedulerReady | DetokenizerReady | TokenizerWorkerReady | TPWorkerReady
StartupReport = ChildReady | StartupFailed
