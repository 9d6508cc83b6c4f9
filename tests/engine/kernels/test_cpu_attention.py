"""The "cpu" attention backend's C++ kernel (decode, and prefill a query per token) against the
torch-native reference, and how the kernel library is built: cached per machine, safe
against killed and concurrent builds, and a clean fallback to torch ops where no compiler
exists."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from engine.attention import create_attention_backend
from engine.attention.cpu_backend import CpuAttention
from engine.kernels.cpu import build as cpu_build
from engine.kernels.cpu import load_cpu_kernels
from tests.engine.kernels.batches import attention_case

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[3]
# NOTE: ragged decode: one key only, a short context, one longer than any vector block.
DECODE = {"prefix_lens": [0, 8, 300], "new_lens": [1, 1, 1]}


def _decode_both(
    heads: tuple[int, int], head_dim: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The kernel backend's and the reference's decode outputs, and whether the kernel ran."""
    num_heads, num_kv_heads = heads
    case = attention_case(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, dtype=dtype, device=CPU, **DECODE)
    reference = create_attention_backend("torch_native", num_heads, num_kv_heads, head_dim)
    reference.init_forward_metadata(case.batch)
    expected = reference.forward(case.q, case.k, case.v, 0, case.batch)
    backend = create_attention_backend("cpu", num_heads, num_kv_heads, head_dim)
    assert isinstance(backend, CpuAttention)
    backend.init_forward_metadata(case.batch)
    got = backend.forward(case.q, case.k, case.v, 0, case.batch)
    return got, expected, backend.decodes_with_kernel(case.batch)


def test_the_kernel_library_builds_on_this_machine() -> None:
    assert load_cpu_kernels() is not None, "the CPU kernel did not build; see the warning logged"


def test_loading_the_kernel_keeps_denormals() -> None:
    """-ffast-math at link time would add a constructor that flushes denormals to zero for
    the whole process; the kernel is compiled with it, never linked with it."""
    assert load_cpu_kernels() is not None
    assert (torch.tensor([1e-40]) * 1.0).item() != 0.0


# NOTE: group sizes 1 (multi-head), 3 (SmolLM2), 7 (a block of four and one of three) and 8.
@pytest.mark.parametrize("head_dim", sorted(cpu_build.CPU_HEAD_DIMS))
@pytest.mark.parametrize("heads", [(2, 2), (9, 3), (14, 2), (8, 1)], ids=["mha", "gqa3", "gqa7", "gqa8"])
def test_decode_kernel_matches_torch_native(heads: tuple[int, int], head_dim: int) -> None:
    got, expected, used_kernel = _decode_both(heads, head_dim)
    assert used_kernel
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_queries_sliced_from_a_wider_projection_are_read_correctly() -> None:
    """In the model q is a view into the fused qkv projection, not a contiguous tensor."""
    num_heads, num_kv_heads, head_dim = 9, 3, 64
    case = attention_case(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, dtype=torch.float32, device=CPU, **DECODE)
    qkv = torch.cat([case.q, torch.randn(3, 2 * num_kv_heads, head_dim)], dim=1)
    q_view = qkv[:, :num_heads]
    assert not q_view.is_contiguous()
    reference = create_attention_backend("torch_native", num_heads, num_kv_heads, head_dim)
    reference.init_forward_metadata(case.batch)
    expected = reference.forward(case.q, case.k, case.v, 0, case.batch)
    backend = create_attention_backend("cpu", num_heads, num_kv_heads, head_dim)
    backend.init_forward_metadata(case.batch)
    torch.testing.assert_close(backend.forward(q_view, case.k, case.v, 0, case.batch), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("head_dim", "dtype"), [(24, torch.float32), (64, torch.float16)], ids=["head-dim-24", "fp16-pool"]
)
def test_what_the_kernel_does_not_cover_runs_the_torch_path(head_dim: int, dtype: torch.dtype) -> None:
    got, expected, used_kernel = _decode_both((4, 2), head_dim, dtype)
    assert not used_kernel
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_a_bfloat16_pool_attends_as_a_float32_pool_of_the_same_values(mode: str) -> None:
    """``--kv-cache-dtype bf16``: the kernel widens the stored bf16 rows exactly, so its output
    equals, bit for bit, the kernel's over a float32 pool holding the same (rounded) values,
    and the torch-native path over the bf16 pool within float32 rounding."""
    lens = DECODE if mode == "decode" else {"prefix_lens": [0, 5, 300], "new_lens": [6, 3, 9]}
    bf16 = attention_case(num_heads=9, num_kv_heads=3, head_dim=64, dtype=torch.float32, device=CPU,
                          kv_dtype=torch.bfloat16, **lens)  # fmt: skip
    fp32 = attention_case(num_heads=9, num_kv_heads=3, head_dim=64, dtype=torch.float32, device=CPU, **lens)
    pool32, pool16 = fp32.batch.kv_pool, bf16.batch.kv_pool
    # NOTE: the same seed gives the same slots and values: the float32 pool takes the bf16 one's rows.
    pool32.k_buffer(0).copy_(pool16.k_buffer(0))
    pool32.v_buffer(0).copy_(pool16.v_buffer(0))
    k, v = (x.to(torch.bfloat16).float() for x in (bf16.k, bf16.v))
    outputs = []
    for case, keys, values in ((bf16, bf16.k, bf16.v), (fp32, k, v)):
        backend = create_attention_backend("cpu", 9, 3, 64)
        assert isinstance(backend, CpuAttention)
        backend.init_forward_metadata(case.batch)
        assert backend.decodes_with_kernel(case.batch)
        outputs.append(backend.forward(case.q, keys, values, 0, case.batch))
    assert torch.equal(outputs[0], outputs[1])
    reference = create_attention_backend("torch_native", 9, 3, 64)
    reference.init_forward_metadata(bf16.batch)
    torch.testing.assert_close(outputs[0], reference.forward(bf16.q, bf16.k, bf16.v, 0, bf16.batch), atol=1e-5, rtol=1e-5)


def test_store_kv_rounds_into_a_bfloat16_pool_as_torch_does() -> None:
    kernels = load_cpu_kernels()
    assert kernels is not None
    # NOTE: ties to even both ways, the largest finite float (rounds to inf), inf, -0, NaN, a denormal.
    special = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, 3.4028235e38, float("inf"), -0.0, float("nan"), 1e-40, -2.5])
    k = torch.cat([special, torch.randn(64 * 3 * 4 - special.numel()) * 10]).view(4, 3, 64)
    v = torch.randn(4, 3, 64)
    k_buffer, v_buffer = torch.zeros(9, 3, 64, dtype=torch.bfloat16), torch.zeros(9, 3, 64, dtype=torch.bfloat16)
    loc = torch.tensor([7, 2, 5, 1])
    kernels.store_kv(k, v, k_buffer, v_buffer, loc)
    for buffer, x in ((k_buffer, k), (v_buffer, v)):
        stored, expected = buffer[loc], x.to(torch.bfloat16)
        # NOTE: NaN stays NaN (torch's bits for it differ between its own code paths).
        assert torch.equal(stored.isnan(), expected.isnan())
        assert torch.equal(stored.view(torch.int16)[~x.isnan()], expected.view(torch.int16)[~x.isnan()])


# NOTE: fresh prompts of equal length (one batched SDPA call in the reference), one of
# another length, and prompts over cached prefixes (one longer than a vector block).
@pytest.mark.parametrize(
    ("prefix_lens", "new_lens"), [([0, 0, 0], [6, 6, 3]), ([0, 5, 300], [6, 3, 9])], ids=["fresh", "cached-prefix"]
)
def test_prefill_runs_the_kernel_per_token_as_torch_native_does(prefix_lens: list[int], new_lens: list[int]) -> None:
    case = attention_case(prefix_lens, new_lens, 9, 3, 64, torch.float32, CPU)
    reference = create_attention_backend("torch_native", 9, 3, 64)
    backend = create_attention_backend("cpu", 9, 3, 64)
    assert isinstance(backend, CpuAttention)
    # NOTE: the metadata lives on the batch: each backend sets it up right before its forward.
    reference.init_forward_metadata(case.batch)
    expected = reference.forward(case.q, case.k, case.v, 0, case.batch)
    backend.init_forward_metadata(case.batch)
    assert backend.decodes_with_kernel(case.batch)
    torch.testing.assert_close(backend.forward(case.q, case.k, case.v, 0, case.batch), expected, atol=1e-5, rtol=1e-5)


def _kill_orphaned_compilers(build_root: Path) -> None:
    """The compilers a killed build leaves running, by pid: ninja starts each job in a process
    group of its own, so they outlive the group the build was killed with and would finish a
    second build beside the one the test waits for."""
    for process in psutil.process_iter(["cwd"]):
        # NOTE: ninja runs them in the build's private directory, under the cache root.
        if Path(process.info["cwd"] or "/").is_relative_to(build_root):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def _build_in_subprocess(cache: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from engine.kernels.cpu import load_cpu_kernels\n"
        "print('LOADED' if load_cpu_kernels() is not None else 'FALLBACK')\n"
    )
    child_env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=child_env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_build_blocks_nobody_and_concurrent_builds_compile_once(tmp_path: Path) -> None:
    killed = _build_in_subprocess(tmp_path)
    deadline = time.monotonic() + 60
    # NOTE: killed once the compiler is running, so its half-built files are left behind.
    while not any(tmp_path.rglob("*.ninja")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert killed.poll() is None, killed.communicate()[0]
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    _kill_orphaned_compilers(tmp_path)
    builders = [_build_in_subprocess(tmp_path) for _ in range(2)]
    outputs = [b.communicate(timeout=240)[0] for b in builders]
    assert all(b.returncode == 0 for b in builders), outputs
    assert all(out.strip().endswith("LOADED") for out in outputs), outputs
    assert sum("building the CPU kernels" in out for out in outputs) == 1, outputs
    assert len(list((tmp_path / "gomgr").glob("*.so"))) == 1


def test_without_a_compiler_the_engine_falls_back_with_one_clear_warning(tmp_path: Path) -> None:
    builder = _build_in_subprocess(tmp_path, {"CXX": str(tmp_path / "no-such-compiler")})
    output = builder.communicate(timeout=120)[0]
    assert builder.returncode == 0, output
    assert output.strip().endswith("FALLBACK"), output
    assert "CPU kernels unavailable" in output and "Install a C++ compiler" in output, output
