"""The CPU malloc tuning that keeps freed activations in the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from engine.runtime.host_malloc import keep_freed_memory


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
