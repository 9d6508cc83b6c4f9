"""`--runtime auto`: docker where a container can reach a GPU or the daemon is remote; the
process runtime else."""

from __future__ import annotations

from manager.readiness.gpu import no_gpu_reason
from manager.readiness.report import ReadinessReport


def choose_runtime(report: ReadinessReport) -> tuple[str, str]:
    """("docker" | "process", a one-line reason) from the report's facts and blockers."""
    if report.docker_host is None:
        return "process", "Docker was not checked (--runtime process)"
    if not report.docker_reachable:
        return "process", f"no Docker daemon at {report.docker_host}"
    if report.docker_remote:
        # NOTE: DOCKER_HOST naming another host says where engines are to run.
        return "docker", f"Docker at {report.docker_host} is remote: engines run on its host"
    if not report.gpus:
        return "process", no_gpu_reason(report.nvml_error)
    if not report.gpu_passthrough:
        return "process", (
            f"Docker at {report.docker_host} cannot pass GPUs to containers "
            "(no NVIDIA runtime or CDI device)"
        )
    if blocked := report.blocking("docker"):
        return "process", blocked[0].title
    count = len(report.gpus)
    return "docker", (
        f"Docker at {report.docker_host} with GPU passthrough and {count} NVIDIA "
        f"GPU{'s' if count != 1 else ''}"
    )
