"""The overlap scheduler's FutureTokens ring: the entries a step reserves, as the host list
the scheduler keeps and as the device tensor the forward thread writes (made on the device,
no host-to-device copy), agree, wrap around the ring and resolve placeholders."""

from __future__ import annotations

import torch

from engine.scheduler.forward_thread import FutureTokens


def test_reserved_entries_agree_on_host_and_device_and_wrap() -> None:
    future = FutureTokens(3, torch.device("cpu"))  # a ring of 6
    seen = []
    for n in (4, 0, 3, 5):
        entries, on_device = future.reserve(n)
        assert on_device.dtype == torch.int64 and on_device.tolist() == entries
        seen.append(entries)
    assert seen == [[0, 1, 2, 3], [], [4, 5, 0], [1, 2, 3, 4, 5]]


def test_placeholders_resolve_to_the_written_tokens() -> None:
    future = FutureTokens(2, torch.device("cpu"))
    entries, on_device = future.reserve(2)
    future.buffer[on_device] = torch.tensor([101, 202])
    ids = torch.tensor([FutureTokens.placeholder(entries[1]), 7, FutureTokens.placeholder(entries[0])])
    assert future.resolve(ids).tolist() == [202, 7, 101]
