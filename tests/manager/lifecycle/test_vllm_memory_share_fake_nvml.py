"""vLLM's `--gpu-memory-utilization` from the GPUs' free memory. The GPU numbers are fakes
(what NVML would report; no NVIDIA GPU here), the function under test is the real one."""

from __future__ import annotations

from manager.lifecycle.vllm_memory import vllm_memory_flags
from manager.readiness.gpu import GpuInfo

GIB = 1024**3


def gpu(index: int, free_gib: float, total_gib: float = 80) -> GpuInfo:
    return GpuInfo(index, "fake H100 (NVML numbers made up)", int(total_gib * GIB), int(free_gib * GIB))


def test_an_empty_gpu_keeps_vllms_default() -> None:
    assert vllm_memory_flags((), [gpu(0, free_gib=79.5)]) == ()


def test_a_shared_gpu_gets_the_free_share_less_a_margin() -> None:
    # 40 of 80 GiB free: vLLM's 0.9 would refuse to start; 0.50 - 0.02 rounds down to 0.48
    assert vllm_memory_flags((), [gpu(0, free_gib=40)]) == ("--gpu-memory-utilization", "0.48")


def test_the_tightest_of_the_containers_gpus_decides() -> None:
    assert vllm_memory_flags((), [gpu(0, 70), gpu(1, 20)]) == ("--gpu-memory-utilization", "0.23")


def test_a_manifests_own_setting_wins_and_no_gpu_means_no_flag() -> None:
    assert vllm_memory_flags(("--gpu-memory-utilization=0.5",), [gpu(0, 10)]) == ()
    assert vllm_memory_flags((), []) == ()
