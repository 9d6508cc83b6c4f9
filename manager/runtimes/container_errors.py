"""The Docker daemon's refusals to run a container, as readable RuntimeStartErrors.

NOTE: the messages matched are the daemon's own (seen from Docker 20.10 to 28).
"""

from __future__ import annotations

from docker.errors import APIError

from manager.runtimes.base import ContainerSpec, EngineSpec, RuntimeStartError


def start_refusal(exc: APIError, spec: EngineSpec, container: ContainerSpec) -> RuntimeStartError:
    text = str(exc.explanation or exc)
    if "port is already allocated" in text or "address already in use" in text:
        return RuntimeStartError(
            f"port {spec.host}:{spec.port} is already in use, so the engine's port cannot be published",
            "Stop what listens there, or start without --port to use a free one.",
        )
    if "could not select device driver" in text and "gpu" in text:
        return RuntimeStartError(
            "Docker cannot pass GPUs to containers (--gpus all): no NVIDIA Container Toolkit "
            f"on this daemon ({text})",
            "Install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure "
            "--runtime=docker`, restart Docker; or start with --gpus none.",
        )
    if "No such image" in text or "pull access denied" in text:
        return RuntimeStartError(
            f"the image {container.image} is not on this Docker daemon",
            "Build it with `gomgr image build` (gomgr-engine) or `docker pull` it.",
        )
    return RuntimeStartError(f"Docker refused to run the engine container: {text}")
