"""ZMQ endpoints of one server instance: IPC socket paths in a private temp directory."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import zmq

# NOTE: a sync context makes sync sockets, an asyncio one sockets whose send/recv are awaited.
_SocketT = TypeVar("_SocketT", bound="zmq.Socket[Any]")


@dataclass(frozen=True)
class PortArgs:
    """Where each process listens. Every socket is PUSH (many writers) → PULL (one reader)."""

    scheduler_input: str  # tokenizer managers → scheduler
    detokenizer_input: str  # scheduler → detokenizer
    tokenizer_inputs: tuple[str, ...]  # detokenizer → tokenizer manager, one per tokenizer worker

    @classmethod
    def create(cls, tokenizer_workers: int = 1) -> PortArgs:
        # NOTE: a fresh 0700 directory per server, so two engines on one host never share
        # sockets and no other user can connect to them.
        root = Path(tempfile.mkdtemp(prefix="gomgr-engine-"))
        return cls(
            scheduler_input=f"ipc://{root / 'scheduler'}",
            detokenizer_input=f"ipc://{root / 'detokenizer'}",
            tokenizer_inputs=tuple(f"ipc://{root / f'tokenizer-{i}'}" for i in range(tokenizer_workers)),
        )

    @property
    def directory(self) -> Path:
        return Path(self.scheduler_input.removeprefix("ipc://")).parent


def pull_socket(context: zmq.Context[_SocketT], endpoint: str) -> _SocketT:
    socket = context.socket(zmq.PULL)
    socket.bind(endpoint)
    return socket


def push_socket(context: zmq.Context[_SocketT], endpoint: str) -> _SocketT:
    socket = context.socket(zmq.PUSH)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    return socket
