"""Readiness against a real daemon without the NVIDIA toolkit: Docker is fine, GPU
passthrough is not, and only a GPU container is blocked by it."""

from __future__ import annotations

import json

import pytest

from tests.docker.conftest import DockerEnv

pytestmark = [pytest.mark.docker]


def test_doctor_sees_the_daemon_and_no_gpu_passthrough(docker_env: DockerEnv) -> None:
    result = docker_env.gomgr("doctor", "--runtime", "docker", "--json")
    report = json.loads(result.stdout)
    assert report["docker"]["reachable"] is True
    assert report["docker"]["gpu_passthrough"] is False
    [passthrough] = [b for b in report["blockers"] if b["id"] == "docker-gpu-passthrough-missing"]
    assert passthrough["blocks"] == ["docker-gpu"]
    assert not any(b["id"].startswith("docker-daemon") for b in report["blockers"])
    # NOTE: a CPU container is not blocked by a missing GPU, so the docker runtime is ready.
    assert (report["runtime"], report["ready"]) == ("docker", True)
    assert result.returncode == 0, result.stdout
