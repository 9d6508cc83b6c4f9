"""The scheduler loop hands a burst's freed heap back to the kernel once it has gone idle."""

from __future__ import annotations

import sys

import psutil
import pytest
import torch
import zmq

from engine.engine import Engine
from engine.runtime.decoder_forward_only import DecoderForwardOnly
from engine.scheduler.forward_only import ForwardOnlyQueue
from engine.scheduler.server_loop import SchedulerServer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_an_idle_loop_returns_what_the_last_burst_freed_once(smol_engine: Engine) -> None:
    context = zmq.Context()
    inbox = context.socket(zmq.PULL)
    inbox.bind("inproc://idle-heap-trim-inbox")
    outbox = context.socket(zmq.PUSH)
    outbox.bind("inproc://idle-heap-trim-outbox")
    scheduler = smol_engine.scheduler
    forward_only = ForwardOnlyQueue(DecoderForwardOnly(smol_engine.runner, scheduler.kv, False), scheduler.token_budget)
    server = SchedulerServer(scheduler, inbox, outbox, forward_only)
    try:
        # NOTE: building the engine tuned this process's malloc as a CPU engine's (freed blocks
        # kept): 256 MiB of activation-sized blocks, written and freed, stand for a burst's heap.
        blocks = [torch.ones(1 << 18) for _ in range(256)]
        del blocks
        server.heap_trimmed = False
        kept = psutil.Process().memory_info().rss
        server.serve_once()
        released_mib = (kept - psutil.Process().memory_info().rss) >> 20
        assert server.heap_trimmed
        assert released_mib >= 200, f"the idle loop released {released_mib} MiB of a 256 MiB burst"
    finally:
        inbox.close(linger=0)
        outbox.close(linger=0)
        context.term()
