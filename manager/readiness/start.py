"""check_for_start: run every readiness check for one model and runtime, before any download."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from manager.manifests.engine_support import ModelTraits
from manager.models.errors import InvalidRepoIdError
from manager.models.model_path import is_gguf_file, model_path_in
from manager.models.store import ModelStore, RepoId
from manager.readiness.blocker import EVERY_RUNTIME, Blocker
from manager.readiness.disk import check_disk
from manager.readiness.docker_daemon import check_docker
from manager.readiness.gguf_fit import local_gguf_fit, remote_gguf_fit
from manager.readiness.gpu import GpuProbe, GpuSnapshot, NvmlProbe, check_gpus
from manager.readiness.gpu_passthrough import check_gpu_passthrough, gpu_passthrough_available
from manager.readiness.hf_token import check_hf_token, hf_token
from manager.readiness.memory import (
    MemoryEstimate,
    check_vram_fit,
    config_dtype_bytes,
    context_for,
    estimate_memory,
)
from manager.readiness.port import check_port
from manager.readiness.remote_daemon import remote_daemon_facts
from manager.readiness.report import ReadinessReport
from manager.readiness.runtime import choose_runtime
from manager.readiness.weights import (
    WeightsSize,
    WeightsUnknownError,
    local_weights,
    remote_weights,
)
from manager.runtimes.docker_host import remote_engine_host

RUNTIMES = ("auto", "docker", "process")


@dataclass(frozen=True)
class _ModelFacts:
    model_dir: Path | None
    weights: WeightsSize | None
    memory: MemoryEstimate | None
    context_tokens: int | None
    download_bytes: int  # 0 when the model is already local or its size is unknown
    checks: tuple[str, ...]
    blockers: tuple[Blocker, ...]
    notes: tuple[str, ...]


def check_for_start(
    repo_or_dir: str | None,
    model_dir: Path | None,
    runtime: str,
    port: int | None,
    context_tokens: int | None,
    *,
    gpu_probe: GpuProbe | None = None,
    store: ModelStore | None = None,
    tp_size: int = 1,
) -> ReadinessReport:
    """Readiness of starting `repo_or_dir` (None: the machine only) with `runtime`.

    `model_dir`, when given, is the model's local copy (the lifecycle passes the resolved
    directory); otherwise a path argument or the store's copy is measured, and a repo that
    is not local yet is sized from the hub, so a model that cannot fit is known before it
    is downloaded. Nothing here raises for an unready machine: every finding is a Blocker.
    `tp_size`: the engine's tensor-parallel GPUs, each holding its share of the model.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    store = store or ModelStore.from_env()
    checks: list[str] = []
    blockers: list[Blocker] = []
    notes: list[str] = []

    docker_host: str | None = None
    docker_reachable: bool | None = None
    passthrough: bool | None = None
    remote_info: dict[str, object] | None = None
    # NOTE: a remote daemon runs the engine on its host: this machine's GPUs and memory do not
    # apply; its `docker info` is checked instead (remote_daemon.py).
    remote = runtime != "process" and remote_engine_host() is not None
    if runtime != "process":
        docker = check_docker()
        checks.append("docker")
        blockers.extend(docker.blockers)
        docker_host, docker_reachable = docker.host, docker.reachable
        if docker.info is not None:
            checks.append("gpu-passthrough")
            passthrough = gpu_passthrough_available(docker.info)
            blockers.extend(check_gpu_passthrough(docker.info, docker.host))
            remote_info = docker.info if remote else None
            if docker.cli_path is None:
                notes.append(f"the daemon at {docker.host} answers but no `docker` CLI is on PATH")

    snapshot = GpuSnapshot((), None, None)
    if not remote:
        snapshot = (gpu_probe or NvmlProbe()).snapshot()
        checks.append("gpus")
        blockers.extend(check_gpus(snapshot))

    model = _model_facts(repo_or_dir, model_dir, context_tokens, store)
    checks.extend(model.checks)
    blockers.extend(model.blockers)
    notes.extend(model.notes)
    if remote_info is not None and docker_host is not None:
        checks.append("remote-daemon")
        facts = remote_daemon_facts(remote_info, docker_host, model.memory)
        notes.append(facts.note)
        blockers.extend(facts.blockers)
    elif not remote and model.memory is not None and model.context_tokens is not None:
        checks.append("vram-fit")
        blockers.extend(check_vram_fit(model.memory, snapshot.gpus, model.context_tokens, tp_size))

    disk = check_disk(store.root, model.download_bytes)
    checks.append("disk")
    blockers.extend(disk.blockers)

    if port is not None:
        checks.append("port")
        blockers.extend(check_port(port))

    report = ReadinessReport(
        target=repo_or_dir,
        requested_runtime=runtime,
        checks=tuple(checks),
        blockers=tuple(blockers),
        notes=tuple(notes),
        docker_host=docker_host,
        docker_reachable=docker_reachable,
        docker_remote=remote,
        gpu_passthrough=passthrough,
        gpus=snapshot.gpus,
        nvml_error=snapshot.error,
        driver_version=snapshot.driver_version,
        model_dir=model.model_dir,
        weights=model.weights,
        memory=model.memory,
        context_tokens=model.context_tokens,
        free_disk_bytes=disk.free_bytes,
        port=port,
        runtime_hint=None,
    )
    return replace(report, runtime_hint=choose_runtime(report))


def _model_facts(
    repo_or_dir: str | None, model_dir: Path | None, context_tokens: int | None, store: ModelStore
) -> _ModelFacts:
    if repo_or_dir is None and model_dir is None:
        return _ModelFacts(None, None, None, None, 0, (), (), ())
    local = model_dir or _local_path(repo_or_dir or "", store)
    if isinstance(local, Blocker):
        return _ModelFacts(None, None, None, None, 0, (), (local,), ())
    checks: list[str] = []
    blockers: list[Blocker] = []
    notes: list[str] = []
    repo = repo_or_dir or ""
    try:
        if local is not None:
            weights, memory, context = _local_fit(local, context_tokens)
        else:
            repo_id = RepoId.parse(repo)
            token_status = check_hf_token(repo_id.repo)
            checks.append("hf-token")
            blockers.extend(token_status.blockers)
            notes.extend([token_status.note] if token_status.note else [])
            weights, memory, context = _remote_fit(repo_id, context_tokens)
    except (WeightsUnknownError, OSError, ValueError) as exc:
        blockers.append(_fit_unknown(repo_or_dir or str(local), exc))
        return _ModelFacts(local, None, None, None, 0, tuple(checks), tuple(blockers), tuple(notes))
    download = 0 if local is not None else weights.total_bytes
    return _ModelFacts(
        local, weights, memory, context, download, tuple(checks), tuple(blockers), tuple(notes)
    )


def _local_fit(local: Path, context_tokens: int | None) -> tuple[WeightsSize, MemoryEstimate, int]:
    """A model directory by its safetensors headers; a GGUF file (or a store directory of
    one) by its file size and header."""
    model_path = local if is_gguf_file(local) else model_path_in(local)
    if is_gguf_file(model_path):
        fit = local_gguf_fit(model_path, context_tokens)
        return fit.weights, fit.memory, fit.context_tokens
    weights = local_weights(local)
    config = json.loads((local / "config.json").read_text())
    context = context_for(config, context_tokens)
    return weights, _estimate(config, weights, context), context


def _remote_fit(
    repo: RepoId, context_tokens: int | None
) -> tuple[WeightsSize, MemoryEstimate, int]:
    """A tagged repo (or a bare one without safetensors) by its GGUF's listed size and header
    (range reads); any other by the hub's safetensors metadata and config.json."""
    if repo.tag is None:
        try:
            weights = remote_weights(repo.repo, hf_token())
        except WeightsUnknownError as exc:
            from huggingface_hub.errors import NotASafetensorsRepoError

            if not isinstance(exc.__cause__, NotASafetensorsRepoError):
                raise
        else:
            config = remote_config(repo.repo)
            context = context_for(config, context_tokens)
            return weights, _estimate(config, weights, context), context
    fit = remote_gguf_fit(repo, hf_token(), context_tokens)
    return fit.weights, fit.memory, fit.context_tokens


def _estimate(config: dict[str, object], weights: WeightsSize, context: int) -> MemoryEstimate:
    return estimate_memory(config, weights.total_bytes, context, config_dtype_bytes(config))


def _local_path(repo_or_dir: str, store: ModelStore) -> Path | Blocker | None:
    """The local copy to measure, None when it must come from the hub, or a Blocker."""
    path = Path(repo_or_dir).expanduser()
    if path.is_dir() or (is_gguf_file(path) and path.is_file()):
        return path
    if repo_or_dir.startswith(("/", "./", "../", "~")):
        return _not_found(repo_or_dir, f"there is no directory or GGUF file {path}")
    try:
        repo = RepoId.parse(repo_or_dir)
    except InvalidRepoIdError as exc:
        return _not_found(repo_or_dir, exc.message)
    stored = store.get_or_default_tag(repo)
    return stored.model_path if stored else None


def remote_config(repo: str) -> dict[str, object]:
    """`repo`'s config.json from the hub; WeightsUnknownError where the hub gives none.

    NOTE: config.json is a few KB; fetching it (into the HF cache) is not the download
    the checks guard. Errors are the hub client's, handled like the weights lookup's.
    """
    # NOTE (issue 30): imported here, as every use of the hub's client in readiness: a start
    # of a model in the store never asks the hub, and a cold `gomgr start` waits on these
    # imports before its engine starts (~0.05 CPU-s).
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(repo, "config.json", token=hf_token() or False, etag_timeout=10)
    except Exception as exc:
        raise WeightsUnknownError(f"the hub did not give {repo}'s config.json: {exc}") from exc
    return json.loads(Path(path).read_text())


def hub_traits(repo: str) -> ModelTraits:
    """The traits config.json on the hub gives (a few KB), so a model only vLLM serves is
    sent there before its weights download; unknown where the hub gives none (a GGUF tag,
    no network): the start judges again with the downloaded files."""
    if ":" in repo:
        return ModelTraits()
    try:
        return ModelTraits.from_config(remote_config(repo))
    except (WeightsUnknownError, OSError, ValueError):
        return ModelTraits()


def _not_found(target: str, why: str) -> Blocker:
    return Blocker(
        id="model-not-found",
        title=f"{target} is neither a model directory, a GGUF file nor a Hugging Face repo id",
        explanation=why,
        fix_steps=(
            (
                "Give a repo id like `org/name` (`org/name:Q4_K_M` for one GGUF of it), the "
                "path of a directory with config.json, or the path of a .gguf file."
            ),
            "See the models already here with `gomgr models list`.",
        ),
        severity="blocks",
        blocks=EVERY_RUNTIME,
    )


def _fit_unknown(target: str, exc: Exception) -> Blocker:
    return Blocker(
        id="vram-fit-unknown",
        title=f"Cannot tell whether {target} fits in GPU memory",
        explanation=(
            f"Its size could not be read before downloading ({exc}). The start may still work; "
            "if the model does not fit, the engine fails while loading."
        ),
        fix_steps=(
            (
                "Check the network and that https://huggingface.co is reachable, or pull the "
                "model first (`gomgr models pull REPO`) so its local files are measured."
            ),
            "Run `gomgr doctor REPO` again.",
        ),
        severity="warns",
        blocks=(),
    )
