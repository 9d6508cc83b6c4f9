"""Triton kernel tests: each kernel against the torch-native backend or a torch reference.

Without CUDA the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1); on a CUDA
machine the same tests run the compiled kernels on the GPU.

TRITON_INTERPRET is set for the whole session by tests/conftest.py (see the NOTE there).
"""

from __future__ import annotations

import os

import pytest
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(autouse=True)
def _interpreter_in_effect() -> None:
    if DEVICE.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.fail("TRITON_INTERPRET=1 must be set before triton is imported (tests/conftest.py)")


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """assert_close tolerances for attention outputs computed in ``dtype``."""
    if dtype == torch.float32:
        return {"atol": 1e-5, "rtol": 1e-5}
    if dtype == torch.bfloat16:
        # NOTE: bf16 keeps 8 significant bits: kernels that accumulate in fp32 and round once
        # land one ulp (2^-8 relative, ~0.004 at 1.0) from SDPA's rounding; seen on an H200.
        return {"atol": 8e-3, "rtol": 1.6e-2}
    return {"atol": 2e-3, "rtol": 2e-3}
