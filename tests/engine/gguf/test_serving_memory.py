"""Done-when of issue #25: a server on the bundled SmolLM2 Q4_1 GGUF keeps the weights near the
file's size. The scheduler (the process that holds the weights and the KV pool) peaks at no
more than the file + the KV pool + 400 MiB; /server_info says how the weights are served.

The peak is the kernel's VmHWM of the scheduler (/proc/<pid>/status): its whole resident set
at its highest (Python, torch and the kernels' libraries, the weights as the quantized layers
keep them, pages of the memory-mapped file that were read, the KV pool, activations), read
after a prefill and some decode steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.memory import KVPool
from tests.support.engine_process import engine_server
from tests.support.gguf_files import bundled_smollm2_gguf

pytestmark = pytest.mark.slow

MAX_TOTAL_TOKENS = 4096
OVERHEAD = 400 * 2**20
# SmolLM2-135M: 30 layers, 3 KV heads of 64, served in float32 on CPU.
KV_POOL_BYTES = KVPool.bytes_per_token(30, 3, 64, torch.float32) * MAX_TOTAL_TOKENS


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def test_q4_1_server_peak_rss_is_file_plus_kv_plus_400_mib(tmp_path: Path) -> None:
    gguf = bundled_smollm2_gguf()
    with engine_server(gguf, tmp_path, "--max-total-tokens", str(MAX_TOTAL_TOKENS), "--device", "cpu") as server:
        with server.client() as client:
            info = client.get("/server_info").json()
            reply = client.post(
                "/generate",
                json={"text": "The capital of France is" * 40, "sampling_params": {"max_new_tokens": 16, "temperature": 0}},
            )
            assert reply.status_code == 200, reply.text
        peak = _vm_hwm(server.scheduler().pid)
    assert info["weights_format"] == "gguf"
    assert info["weights_quant_types"] == ["Q4_1", "F32", "Q8_0"]
    assert info["weights_kernel"]
    budget = gguf.stat().st_size + KV_POOL_BYTES + OVERHEAD
    mib = 2**20
    assert peak <= budget, f"scheduler peak RSS {peak / mib:.0f} MiB > {budget / mib:.0f} MiB\n{server.log_tail()}"
