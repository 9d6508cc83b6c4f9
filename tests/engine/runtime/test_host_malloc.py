"""The CPU malloc tuning that keeps freed activations in the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from engine.runtime.host_malloc import keep_freed_memory, return_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_glibc_accepts_the_tuning_on_cpu() -> None:
    # NOTE: in a fresh process: the tuning is process-wide and this one is shared.
    program = textwrap.dedent(
        """
        import torch
        from engine.runtime.host_malloc import keep_freed_memory
        print(keep_freed_memory(torch.device("cpu")))
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split()[-1] == "True"


def test_other_devices_are_left_alone() -> None:
    assert keep_freed_memory(torch.device("meta")) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_what_loading_freed_goes_back_to_the_kernel() -> None:
    # NOTE: in a fresh process, tuned as a CPU engine is: 256 tensors of 1 MiB (below the
    # mmap threshold, so on the heap, as a checkpoint's layers are), written, then freed.
    program = textwrap.dedent(
        """
        import psutil, torch
        from engine.runtime.host_malloc import keep_freed_memory, return_freed_memory
        cpu = torch.device("cpu")
        keep_freed_memory(cpu)
        tensors = [torch.ones(1 << 18) for _ in range(256)]
        del tensors
        kept = psutil.Process().memory_info().rss
        print(return_freed_memory(cpu), (kept - psutil.Process().memory_info().rss) >> 20)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    trimmed, released_mib = done.stdout.split()[-2:]
    assert trimmed == "True"
    assert int(released_mib) >= 200


def test_other_devices_keep_their_allocator() -> None:
    assert return_freed_memory(torch.device("meta")) is False
