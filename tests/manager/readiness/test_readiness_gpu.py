"""GPUs: the real NVML probe on this GPU-less machine, and a named fake for fit decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.models.store import ModelStore
from manager.readiness.gpu import GpuInfo, GpuProbe, GpuSnapshot, NvmlProbe, check_gpus
from manager.readiness.report import ReadinessReport
from manager.readiness.start import check_for_start

GIB = 1024**3


class FakeNvmlProbe(GpuProbe):
    """A fake NVML: the only fake here, because this machine has no NVIDIA GPU."""

    def __init__(self, *free_gib: float) -> None:
        self._gpus = tuple(
            GpuInfo(i, "Fake H100", 80 * GIB, int(free * GIB)) for i, free in enumerate(free_gib)
        )

    def snapshot(self) -> GpuSnapshot:
        return GpuSnapshot(self._gpus, "555.42" if self._gpus else None, None)


def test_real_nvml_reports_no_gpu_cleanly() -> None:
    snapshot = NvmlProbe().snapshot()
    if snapshot.gpus:
        pytest.skip("this machine has an NVIDIA GPU")
    assert snapshot.error  # e.g. "NVML Shared Library Not Found"
    (blocker,) = check_gpus(snapshot)
    assert blocker.id == "nvidia-gpu-missing"
    assert snapshot.error in blocker.title
    assert blocker.blocks == ("gpu", "docker-gpu")


def start_report(
    smollm2_dir: Path, tmp_path: Path, probe: GpuProbe, context: int, tp_size: int = 1
) -> ReadinessReport:
    return check_for_start(
        str(smollm2_dir), None, "process", None, context, gpu_probe=probe, store=ModelStore(tmp_path),
        tp_size=tp_size,
    )


def test_smollm2_fits_a_roomy_gpu(smollm2_dir: Path, tmp_path: Path) -> None:
    report = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(2.0, 40.0), 2048)
    assert "vram-fit" in report.checks
    assert not [b for b in report.blockers if b.id == "model-does-not-fit-vram"]
    assert report.memory is not None and report.memory.total < 40 * GIB
    assert [g.free_bytes for g in report.gpus] == [2 * GIB, 40 * GIB]


def test_smollm2_does_not_fit_a_full_gpu(smollm2_dir: Path, tmp_path: Path) -> None:
    report = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(0.5, 1.0), 2048)
    (blocker,) = [b for b in report.blockers if b.id == "model-does-not-fit-vram"]
    assert blocker.blocks == ("gpu",)
    assert "GPU 1" in blocker.title  # measured against the GPU with the most free memory
    assert report.ready()  # the process runtime can still run it on the CPU


def test_no_gpu_blocks_the_gpu_option_only(smollm2_dir: Path, tmp_path: Path) -> None:
    report = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(), 2048)
    assert [b.id for b in report.blockers] == ["nvidia-gpu-missing"]
    assert report.memory is not None  # the estimate is still a fact
    assert report.ready()


def test_tensor_parallel_sizes_each_gpu_for_its_share(smollm2_dir: Path, tmp_path: Path) -> None:
    whole = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(), 2048).memory
    assert whole is not None
    # NOTE: each GPU a little short of the whole model, roomy for a half of weights and KV.
    free_gib = (whole.total - 0.5 * (whole.weights + whole.kv_cache) / 2) / GIB
    one = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(free_gib, free_gib), 2048)
    assert [b.id for b in one.blockers] == ["model-does-not-fit-vram"]
    two = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(free_gib, free_gib), 2048, tp_size=2)
    assert not two.blockers
    three = start_report(smollm2_dir, tmp_path, FakeNvmlProbe(free_gib, free_gib), 2048, tp_size=3)
    assert [b.title for b in three.blockers] == ["--tp-size 3 needs 3 GPUs; NVML sees 2"]
