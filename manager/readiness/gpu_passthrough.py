"""Check 2: a reachable Docker daemon can hand NVIDIA GPUs to containers."""

from __future__ import annotations

from collections.abc import Mapping

from manager.readiness.blocker import Blocker

# NOTE: the CDI kind the NVIDIA Container Toolkit registers (`nvidia-ctk cdi generate`).
NVIDIA_CDI_KIND = "nvidia.com/gpu"


def gpu_passthrough_available(info: Mapping[str, object]) -> bool:
    """True when `docker info` lists the "nvidia" runtime or an nvidia.com/gpu CDI device.

    NOTE: `Runtimes` is a map of runtime name → config in every API version;
    `DiscoveredDevices` (API 1.48+, Docker 28) lists CDI devices as {"Source": "cdi",
    "ID": "nvidia.com/gpu=all"}. Older daemons simply lack the key.
    """
    runtimes = info.get("Runtimes")
    if isinstance(runtimes, Mapping) and "nvidia" in runtimes:
        return True
    devices = info.get("DiscoveredDevices")
    if isinstance(devices, list):
        for device in devices:
            if isinstance(device, Mapping) and str(device.get("ID", "")).startswith(
                NVIDIA_CDI_KIND
            ):
                return True
    return False


def check_gpu_passthrough(info: Mapping[str, object], host: str) -> tuple[Blocker, ...]:
    if gpu_passthrough_available(info):
        return ()
    return (
        Blocker(
            id="docker-gpu-passthrough-missing",
            title="Docker cannot pass GPUs to containers",
            explanation=(
                f"The Docker daemon at {host} has no \"nvidia\" runtime and no "
                f"{NVIDIA_CDI_KIND} CDI device, so `--gpus all` fails with "
                "'could not select device driver \"\" with capabilities: [[gpu]]'."
            ),
            fix_steps=(
                "Install the NVIDIA Container Toolkit (package `nvidia-container-toolkit`).",
                "Register it with Docker: `sudo nvidia-ctk runtime configure --runtime=docker`.",
                "Restart the daemon: `sudo systemctl restart docker`.",
                "Check it with `docker info | grep -i nvidia`, then run `gomgr doctor` again.",
            ),
            severity="blocks",
            blocks=("docker-gpu",),
        ),
    )
