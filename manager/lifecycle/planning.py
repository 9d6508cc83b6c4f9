"""What to run for a start: readiness, the runtime (and why), the manifest's name and flags.

NOTE: the one place the lifecycle consults readiness and manifests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.gpus import CUDA_VISIBLE_DEVICES, gpu_pins
from manager.lifecycle.vllm_memory import vllm_memory_flags
from manager.manifests.architecture import traits_of
from manager.manifests.effective import EffectiveManifest
from manager.manifests.engine_support import ModelTraits
from manager.manifests.engines import CONTAINER_ENTRYPOINTS, PROCESS_ENGINES
from manager.manifests.errors import ManifestError
from manager.manifests.flags import tensor_parallel_size, to_engine_flags
from manager.manifests.resolve import resolve_manifest
from manager.models.model_path import path_inside
from manager.readiness.blocker import Blocker
from manager.readiness.gpu import GpuInfo
from manager.readiness.runtime import choose_runtime
from manager.readiness.start import check_for_start, hub_traits
from manager.runtimes.base import CONTAINER_MODEL_DIR, ContainerSpec

# NOTE: engines that take SGLang's `--max-total-tokens` (the KV pool's size in tokens), how
# an engine is told its share where several run. vLLM has no such cap.
KV_TOKENS_FLAG_ENGINES = frozenset({"gomgr", "sglang"})
# NOTE: engines that take SGLang's `--enable-metrics`; their /metrics tells the watch loop
# of `gomgr apply` when an engine last served (idle unload). vLLM serves /metrics always.
METRICS_FLAG_ENGINES = frozenset({"gomgr", "sglang"})


@dataclass(frozen=True)
class StartPlan:
    runtime: str
    reason: str  # one line: why this runtime
    served_name: str
    engine_args: tuple[str, ...]  # every engine flag but host and port
    env: tuple[tuple[str, str], ...]
    container: ContainerSpec | None  # for the docker runtime
    # NOTE: said where the engine is a manifest's fallback, e.g. `engine: vllm (gomgr's
    # engine does not serve quantization 'fbgemm_fp8')`; None where the manifest's own engine runs.
    engine_line: str | None = None


def plan_start(
    repo_or_dir: str, model_path: Path, requested_runtime: str, port: int | None,
    served_name: str | None, *, gpus: str = "auto", variant: str | None = None,
    kv_tokens: int | None = None,
) -> StartPlan:
    """`gpus`: "auto" (a container gets the GPUs NVML sees), "all", "none" or the indices it
    pins ("0,1"); `variant`: a manifest name layered over the matched one; `kv_tokens`: the
    KV pool the engine may hold (its share where several run), None: the engine's default.
    `model_path`: a model directory or a GGUF file (manager/models/model_path.py)."""
    effective = effective_manifest(repo_or_dir, traits_of(model_path), variant, served_name)
    tp_size = tensor_parallel_size(effective.engine_args)
    runtime, reason, granted = _ready(
        repo_or_dir, model_path, requested_runtime, port, effective.context_length, gpus,
        container_only=_container_only(effective), tp_size=tp_size,
    )
    gpus = _tensor_parallel_pins(gpus, granted, tp_size)
    share = _kv_share(effective, kv_tokens)
    if runtime == "docker":
        in_container = path_inside(model_path, CONTAINER_MODEL_DIR)
        plan = container_plan(effective, reason, granted is not None, gpu_pins(gpus), in_container)
        if effective.engine == "vllm":
            share = vllm_memory_flags(effective.engine_args, granted or ())
        return dataclasses.replace(plan, engine_args=(*plan.engine_args, *share))
    if effective.engine not in PROCESS_ENGINES:
        why = f"{effective.engine_reason}; " if effective.engine_reason else ""
        raise StartBlocked(
            f"{why}manifest {effective.name} runs the {effective.engine} engine, which only a "
            "container can run: start it with --runtime docker"
        )
    pins = ((CUDA_VISIBLE_DEVICES, gpus),) if gpu_pins(gpus) else ()
    return StartPlan(
        runtime=runtime, reason=reason, served_name=effective.served_name,
        engine_args=(*_engine_args(effective, model_path), *share),
        env=(*effective.env.items(), *pins), container=None,
    )


def check_before_download(
    repo: str, requested_runtime: str, port: int | None, *, gpus: str = "auto",
    variant: str | None = None,
) -> None:
    """StartBlocked when readiness already blocks the start of `repo`, which is not local yet:
    Docker, GPUs, the port, and the fit from the hub's safetensors headers, as `gomgr doctor`.

    NOTE: before the download, so a blocked start costs no gigabytes. Without config.json the
    manifest is matched by repo only (for its context length); plan_start checks again with
    the downloaded files, the exact numbers.
    """
    effective = effective_manifest(repo, hub_traits(repo), variant, None)
    _ready(
        repo, None, requested_runtime, port, effective.context_length, gpus,
        container_only=_container_only(effective), tp_size=tensor_parallel_size(effective.engine_args),
    )


def effective_manifest(
    repo_or_dir: str, traits: ModelTraits, variant: str | None, served_name: str | None
) -> EffectiveManifest:
    """The manifest a start of `repo_or_dir` runs, under `served_name` where one is given."""
    try:
        effective = resolve_manifest(repo_or_dir, traits, variant=variant)
    except ManifestError as exc:
        raise StartBlocked(f"manifest: {exc.message}") from exc
    if served_name is None:
        return effective
    return dataclasses.replace(effective, served_name=served_name)


def _ready(
    repo_or_dir: str, model_dir: Path | None, requested_runtime: str, port: int | None,
    context_tokens: int | None, gpus: str, *, container_only: str | None = None, tp_size: int = 1,
) -> tuple[str, str, tuple[GpuInfo, ...] | None]:
    """(runtime, why, the GPUs a container gets: None for none), or StartBlocked by the first
    blocker.
    `container_only`: the engine runs only in a container, so `auto` means docker (the
    engine line that says which engine and why, for a blocked start's message); `tp_size`: the
    GPUs the engine shards over (the manifest's --tp-size), each sized for its share."""
    prefix = ""
    if container_only and requested_runtime == "auto":
        prefix = f"{container_only}; "
        report = check_for_start(repo_or_dir, model_dir, "docker", port, context_tokens, tp_size=tp_size)
        runtime, reason = "docker", "the engine runs only in a container"
    else:
        report = check_for_start(
            repo_or_dir, model_dir, requested_runtime, port, context_tokens, tp_size=tp_size
        )
        runtime, reason = _runtime(requested_runtime, *choose_runtime(report))
    try:
        pins = gpu_pins(gpus)
    except ValueError as exc:  # NOTE: the CLI checks it; a request to the engine API may not
        raise StartBlocked(f"--gpus {exc}") from exc
    # NOTE: a remote daemon's GPUs are not seen from here: `auto` gives them where it has the
    # nvidia runtime.
    seen_any = bool(report.gpus) or bool(report.docker_remote and report.gpu_passthrough)
    want_gpus = gpus == "all" or bool(pins) or (gpus == "auto" and seen_any)
    seen = {gpu.index for gpu in report.gpus}
    if pins and len(pins) < tp_size:
        raise StartBlocked(f"--gpus {gpus} gives {len(pins)} GPU(s); the manifest's --tp-size {tp_size} needs {tp_size}")
    if (missing := [i for i in pins if i not in seen]) and not report.docker_remote:
        raise StartBlocked(
            f"--gpus {gpus}: there is no GPU {missing[0]}; NVML sees "
            f"{', '.join(str(i) for i in sorted(seen)) or 'none'}"
        )
    if blockers := report.blocking(runtime, gpus=want_gpus):
        raise StartBlocked(
            f"{prefix}cannot start with the {runtime} runtime: {blockers[0].title}",
            _fixes(blockers[0]),
        )
    if not want_gpus:
        return runtime, reason, None
    return runtime, reason, tuple(gpu for gpu in report.gpus if not pins or gpu.index in pins)


def _tensor_parallel_pins(gpus: str, granted: tuple[GpuInfo, ...] | None, tp_size: int) -> str:
    """`gpus`, or for a tensor-parallel engine left to "auto": the `tp_size` GPUs with the most
    free memory, pinned ("0,2"), so it owns exactly the GPUs it shards over (readiness checked
    that there are enough)."""
    if tp_size == 1 or gpus != "auto" or not granted:
        return gpus
    chosen = sorted(granted, key=lambda gpu: gpu.free_bytes, reverse=True)[:tp_size]
    return ",".join(str(gpu.index) for gpu in sorted(chosen, key=lambda gpu: gpu.index))


def container_plan(
    effective: EffectiveManifest, reason: str, gpus: bool, pins: tuple[int, ...], model_path: str
) -> StartPlan:
    """How a container runs `effective` with the model at `model_path` inside it: the docker
    runtime's plan, and the pods `gomgr deploy render` writes (manager/deploy/)."""
    container = ContainerSpec(
        image=effective.image, shm_size=effective.shm_size, gpus=gpus,
        gpu_ids=tuple(str(i) for i in pins), entrypoint=CONTAINER_ENTRYPOINTS.get(effective.engine, ()),
    )
    where = "on the CPU"
    if gpus:
        where = f"on GPU {','.join(container.gpu_ids)}" if pins else "with --gpus all"
    return StartPlan(
        runtime="docker", reason=f"{reason}; image {container.image} {where}",
        served_name=effective.served_name,
        engine_args=_engine_args(effective, model_path),
        env=tuple(effective.env.items()), container=container,
        engine_line=effective.engine_line() if effective.engine_reason else None,
    )


def _engine_args(effective: EffectiveManifest, model_dir: Path | str) -> tuple[str, ...]:
    metrics = ("--enable-metrics",) if effective.engine in METRICS_FLAG_ENGINES else ()
    return (*to_engine_flags(effective, model_dir), *metrics)


def _kv_share(effective: EffectiveManifest, kv_tokens: int | None) -> tuple[str, ...]:
    """`--max-total-tokens N` where the engine takes it and the manifest sizes no KV pool."""
    if kv_tokens is None or effective.engine not in KV_TOKENS_FLAG_ENGINES:
        return ()
    sizing = {"--max-total-tokens", "--mem-fraction-static"}
    if any(arg.split("=", 1)[0] in sizing for arg in effective.engine_args):
        return ()  # NOTE: a manifest's own sizing wins (the engine takes only one of the two)
    return ("--max-total-tokens", str(kv_tokens))


def _container_only(effective: EffectiveManifest) -> str | None:
    """The engine line where only a container runs the manifest's engine; None otherwise."""
    if effective.engine in PROCESS_ENGINES:
        return None
    return effective.engine_line()


def _runtime(requested: str, suggested: str, why: str) -> tuple[str, str]:
    if requested != "auto":
        return requested, f"requested with --runtime {requested}"
    return suggested, why


def _fixes(blocker: Blocker) -> str:
    steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(blocker.fix_steps, 1))
    return f"{blocker.explanation}\n{steps}"
