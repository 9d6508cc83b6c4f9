"""Docker checks against the real docker SDK: a DOCKER_HOST where no daemon listens."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.readiness.docker_daemon import check_docker
from manager.readiness.gpu_passthrough import check_gpu_passthrough, gpu_passthrough_available


def test_no_daemon_names_the_socket_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = f"unix://{tmp_path}/nothing-listens.sock"
    monkeypatch.setenv("DOCKER_HOST", socket)

    status = check_docker()

    assert status.reachable is False
    assert status.host == socket
    (blocker,) = status.blockers
    assert blocker.id in ("docker-daemon-unreachable", "docker-not-installed")
    assert socket in blocker.title + blocker.explanation
    assert blocker.severity == "blocks" and blocker.blocks == ("docker",)
    assert len(blocker.fix_steps) >= 2


# NOTE: `docker info` payloads as daemons return them (trimmed to the keys read).
def test_nvidia_runtime_or_cdi_device_means_passthrough() -> None:
    assert gpu_passthrough_available({"Runtimes": {"runc": {}, "nvidia": {"path": "x"}}})
    cdi = [{"Source": "cdi", "ID": "nvidia.com/gpu=all"}]
    assert gpu_passthrough_available({"Runtimes": {"runc": {}}, "DiscoveredDevices": cdi})


def test_plain_daemon_has_no_passthrough() -> None:
    info = {"Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}}
    assert not gpu_passthrough_available(info)
    (blocker,) = check_gpu_passthrough(info, "unix:///run/docker.sock")
    assert blocker.id == "docker-gpu-passthrough-missing"
    assert "unix:///run/docker.sock" in blocker.explanation
