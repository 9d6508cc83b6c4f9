"""The SiLU-and-mul kernel against torch's ``silu(gate) * up``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.kernels.triton.activation import silu_and_mul
from tests.engine.kernels.conftest import DEVICE

# NOTE: bf16: the CPU interpreter's fp32 -> bf16 casts truncate; one ulp.
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


# NOTE: intermediate 40 with 16-wide blocks: three column blocks, the last one masked.
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["fp32", "fp16", "bf16"])
def test_silu_and_mul_matches_torch(dtype: torch.dtype) -> None:
    x = (3 * torch.randn(3, 80, generator=torch.Generator().manual_seed(0))).to(dtype=dtype, device=DEVICE)
    gate, up = x.split(40, dim=-1)
    torch.testing.assert_close(silu_and_mul(x, block=16), F.silu(gate) * up, **TOLERANCE[dtype])
