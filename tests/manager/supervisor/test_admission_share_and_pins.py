"""What a start is told by admission: its KV share (`--max-total-tokens`) and the GPUs it is
pinned to (`--gpus 0,1`: CUDA_VISIBLE_DEVICES for a process, device_ids for a container)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from docker.types import DeviceRequest

from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.gpus import check_gpus, gpu_pins
from manager.lifecycle.planning import _kv_share, plan_start
from manager.lifecycle.restart import restart_request
from manager.manifests.engine_support import ModelTraits
from manager.manifests.resolve import resolve_manifest
from manager.runtimes.base import ContainerSpec, EngineHandle, EngineSpec
from manager.runtimes.docker import DockerRuntime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord
from tests.conftest import SMOLLM2_REPO


@pytest.mark.parametrize(("given", "normal"), [("auto", "auto"), ("none", "none"), ("0, 1", "0,1"), ("3", "3")])
def test_gpus_choices(given: str, normal: str) -> None:
    assert check_gpus(given) == normal


@pytest.mark.parametrize("bad", ["0,a", "-1", "0,0", "", "gpu0"])
def test_bad_gpus_are_one_line(bad: str) -> None:
    with pytest.raises(ValueError, match="GPU indices"):
        check_gpus(bad)


def test_pins() -> None:
    assert gpu_pins("auto") == () and gpu_pins("all") == ()
    assert gpu_pins("1,0") == (1, 0)


def test_the_engine_is_told_its_kv_share(smollm2_dir: Path) -> None:
    plan = plan_start(SMOLLM2_REPO, smollm2_dir, "process", None, None, kv_tokens=8192)
    args = list(plan.engine_args)
    assert args[args.index("--max-total-tokens") + 1] == "8192"
    default = plan_start(SMOLLM2_REPO, smollm2_dir, "process", None, None)
    assert "--max-total-tokens" not in default.engine_args


@pytest.mark.parametrize("own", [("--mem-fraction-static", "0.5"), ("--max-total-tokens=4096",)])
def test_a_manifest_that_sizes_the_kv_pool_itself_keeps_its_own(own: tuple[str, ...]) -> None:
    effective = dataclasses.replace(resolve_manifest(SMOLLM2_REPO, ModelTraits("LlamaForCausalLM")), engine_args=own)
    assert _kv_share(effective, 8192) == ()


def test_a_pin_to_a_gpu_nvml_does_not_see_is_blocked(smollm2_dir: Path) -> None:
    # NOTE: this machine has no NVIDIA GPU: NVML sees none.
    with pytest.raises(StartBlocked, match=r"--gpus 0: there is no GPU 0; NVML sees none"):
        plan_start(SMOLLM2_REPO, smollm2_dir, "process", None, None, gpus="0")


def test_bad_gpus_from_an_api_client_are_blocked(smollm2_dir: Path) -> None:
    with pytest.raises(StartBlocked, match=r"--gpus 'gpu0': give auto, all, none or GPU indices"):
        plan_start(SMOLLM2_REPO, smollm2_dir, "process", None, None, gpus="gpu0")


def test_a_container_pinned_to_gpus_gets_their_device_ids(tmp_path: Path) -> None:
    spec = _spec(ContainerSpec(image="engine:cpu", gpus=True, gpu_ids=("0", "1")))
    kwargs = DockerRuntime(StatePaths(tmp_path)).create_kwargs(spec)
    assert kwargs["device_requests"] == [DeviceRequest(device_ids=["0", "1"], capabilities=[["gpu"]])]
    every = DockerRuntime(StatePaths(tmp_path)).create_kwargs(_spec(ContainerSpec("engine:cpu", gpus=True)))
    assert every["device_requests"] == [DeviceRequest(count=-1, capabilities=[["gpu"]])]


@pytest.mark.parametrize(
    ("container", "env", "gpus"),
    [
        (ContainerSpec("engine:cpu", gpus=True, gpu_ids=("1",)), (), "1"),
        (ContainerSpec("engine:cpu", gpus=True), (), "all"),
        (ContainerSpec("engine:cpu"), (), "none"),
        (None, (("CUDA_VISIBLE_DEVICES", "0,1"),), "0,1"),
        (None, (), "auto"),
    ],
)
def test_a_restart_keeps_the_pins(
    container: ContainerSpec | None, env: tuple[tuple[str, str], ...], gpus: str
) -> None:
    handle = EngineHandle(_spec(container, env), "docker" if container else "process", 1, 0.0, Path("/l"), 0.0)
    # NOTE: through the record's JSON, as a restart reads it from the state directory.
    record = EngineRecord.from_json(EngineRecord(handle, EngineState.READY).to_json())
    assert record.handle.spec.container == container
    assert restart_request(record).gpus == gpus


def _spec(container: ContainerSpec | None, env: tuple[tuple[str, str], ...] = ()) -> EngineSpec:
    return EngineSpec(
        id="e-1", repo=SMOLLM2_REPO, model_dir=Path("/m"), served_name="m", port=1, env=env,
        container=container,
    )
