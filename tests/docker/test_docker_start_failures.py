"""Failure paths through the real daemon: each a readable error, and no container left behind
(in particular none in "Created", where the SDK leaves one whose start failed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import DockerClient

from manager.runtimes.base import ContainerSpec, EngineSpec, RuntimeStartError
from manager.runtimes.docker import DockerRuntime
from tests.conftest import SMOLLM2_REPO
from tests.docker.conftest import DockerEnv
from tests.docker.engine_image import BASE_IMAGE
from tests.support.engine_process import free_port

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def spec(smollm2_dir: Path, image: str, port: int, gpus: bool = False) -> EngineSpec:
    return EngineSpec(
        id=f"failure-{port}", repo=SMOLLM2_REPO, model_dir=smollm2_dir, served_name="smol",
        port=port, engine_args=("--model-path", "/model"),
        container=ContainerSpec(image=image, shm_size="1g", gpus=gpus),
    )


@pytest.fixture
def runtime(docker_env: DockerEnv) -> DockerRuntime:
    return DockerRuntime(docker_env.state)


@pytest.fixture
def port_held_by_a_container(docker_env: DockerEnv) -> Iterator[int]:
    """A loopback port another container publishes: the daemon refuses a second binding."""
    port = free_port()
    holder = docker_env.client.containers.run(
        BASE_IMAGE, ["sleep", "120"], detach=True, init=True,
        ports={"9/tcp": ("127.0.0.1", port)}, labels={"gomgr.test": "port-holder"},
    )
    yield port
    holder.remove(force=True)


def no_container_named(client: DockerClient, engine_id: str) -> bool:
    return not client.containers.list(all=True, filters={"name": f"gomgr-{engine_id}"})


def test_port_already_allocated_is_a_readable_error(
    runtime: DockerRuntime, docker_env: DockerEnv, smollm2_dir: Path, engine_image: str,
    port_held_by_a_container: int,
) -> None:
    failing = spec(smollm2_dir, engine_image, port_held_by_a_container)
    with pytest.raises(RuntimeStartError) as caught:
        runtime.start(failing)
    assert f"port 127.0.0.1:{port_held_by_a_container} is already in use" in caught.value.message
    assert no_container_named(docker_env.client, failing.id)


def test_cli_start_on_a_taken_port_exits_3_with_the_blocker(
    docker_env: DockerEnv, engine_image: str, port_held_by_a_container: int
) -> None:
    result = docker_env.gomgr(
        "start", SMOLLM2_REPO, "--runtime", "docker", "--port", str(port_held_by_a_container)
    )
    assert result.returncode == 3, result.stderr
    assert str(port_held_by_a_container) in result.stderr.splitlines()[0]
    assert "Traceback" not in result.stderr
    assert docker_env.containers() == []


def test_gpus_all_without_the_nvidia_toolkit_is_a_readable_error(
    runtime: DockerRuntime, docker_env: DockerEnv, smollm2_dir: Path, engine_image: str
) -> None:
    failing = spec(smollm2_dir, engine_image, free_port(), gpus=True)
    with pytest.raises(RuntimeStartError) as caught:
        runtime.start(failing)
    assert "Docker cannot pass GPUs to containers" in caught.value.message
    assert "nvidia-container-toolkit" in caught.value.fix
    assert no_container_named(docker_env.client, failing.id)


def test_cli_gpus_all_is_blocked_before_anything_runs(docker_env: DockerEnv) -> None:
    result = docker_env.gomgr("start", SMOLLM2_REPO, "--runtime", "docker", "--gpus", "all")
    assert result.returncode == 3, result.stderr
    first = result.stderr.splitlines()[0]
    assert first == (
        "error: cannot start with the docker runtime: Docker cannot pass GPUs to containers"
    )
    assert "nvidia-ctk runtime configure" in result.stderr  # the numbered fix steps
    assert "Traceback" not in result.stderr
    assert docker_env.containers() == []


def test_missing_image_with_no_registry_is_a_readable_error(
    runtime: DockerRuntime, docker_env: DockerEnv, smollm2_dir: Path
) -> None:
    failing = spec(smollm2_dir, "gomgr-test/absent-engine:1", free_port())
    with pytest.raises(RuntimeStartError) as caught:
        runtime.start(failing)
    assert caught.value.message.startswith("cannot pull gomgr-test/absent-engine:1: ")
    assert no_container_named(docker_env.client, failing.id)


def test_cli_start_with_an_image_that_is_not_here_exits_3(docker_env: DockerEnv) -> None:
    overrides = Path(docker_env.vars["GOMGR_CONFIG_DIR"]) / "manifests"
    overrides.mkdir(parents=True, exist_ok=True)
    variant = overrides / "absent-image.yaml"
    variant.write_text('repo: "HuggingFaceTB/SmolLM2-*"\nimage: "gomgr-test/absent-engine:1"\n')
    try:
        result = docker_env.gomgr("start", SMOLLM2_REPO, "--runtime", "docker")
    finally:
        variant.unlink()
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("error: cannot pull gomgr-test/absent-engine:1: ")
    assert "Traceback" not in result.stderr
    assert docker_env.containers() == []

