"""`gomgr image build` where no registry and no package index answers: one line that says
what happened and what to do, exit 3.

NOTE: the suite's daemon (`bash .ci/dockerd.sh up`) reaches no registry: that is the
offline case itself. A package index the build cannot reach is a loopback port inside the
build's container, where nothing listens.
"""

from __future__ import annotations

import subprocess

import pytest
from docker import DockerClient
from docker.errors import ImageNotFound

from manager.images.build import CPU_BASE_IMAGE, BuildOptions, build_image
from manager.images.errors import ImageError, PullError
from manager.images.presence import pull_image
from tests.docker.conftest import GOMGR
from tests.docker.engine_image import BASE_IMAGE

pytestmark = [pytest.mark.slow, pytest.mark.docker]

TAG = "gomgr-test/offline-build:latest"
DEAD_INDEX = "http://127.0.0.1:9/simple"


@pytest.fixture
def no_registry(docker_client: DockerClient) -> None:
    """Skip where the daemon reaches a registry, or already has the default base image."""
    try:
        docker_client.images.get(CPU_BASE_IMAGE)
        pytest.skip(f"{CPU_BASE_IMAGE} is on this daemon: not the offline case")
    except ImageNotFound:
        pass
    try:
        pull_image(docker_client, "gomgr-test/no-such-image:none", lambda _: None)
    except PullError as exc:
        if not exc.registry_unreachable:
            pytest.skip(f"the daemon reaches a registry ({exc.reason}): not the offline case")


def test_default_base_image_offline_is_one_line_and_exit_3(no_registry: None) -> None:
    result = subprocess.run(
        [str(GOMGR), "image", "build", "--cpu", "--quiet", "--tag", TAG],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"error: the base image {CPU_BASE_IMAGE} is not on this machine and no registry answers ("
    ), line
    assert "--base <image>" in line and "--torch-wheel <torch .whl>" in line


def test_pip_without_an_index_inside_the_build_is_one_line(docker_client: DockerClient) -> None:
    options = BuildOptions(TAG, BASE_IMAGE, torch_wheel=None, torch_index_url=DEAD_INDEX)
    output: list[str] = []
    with pytest.raises(ImageError) as raised:
        build_image(options, output.append)
    assert raised.value.message == (
        f"pip inside the image build could not reach {DEAD_INDEX} for torch==2.13.0: give torch "
        "as a file with --torch-wheel <torch .whl>, or let the Docker daemon's builds reach that "
        "index (network, proxy)"
    ), output[-10:]
    assert raised.value.fix == ""  # the CLI prints the message, then a fix if any: one line
