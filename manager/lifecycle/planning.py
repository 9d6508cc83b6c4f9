"""What to run for a start: readiness, the runtime (and why), the manifest's name and flags.

NOTE: the one place the lifecycle consults readiness and manifests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from manager.lifecycle.errors import StartBlocked
from manager.manifests.architecture import architecture_of
from manager.manifests.errors import ManifestError
from manager.manifests.flags import to_engine_flags
from manager.manifests.resolve import resolve_manifest
from manager.readiness.blocker import Blocker
from manager.readiness.runtime import choose_runtime
from manager.readiness.start import check_for_start
from manager.runtimes.registry import runtime_names

# NOTE: the engines a local process can run; sglang and vllm images need the docker runtime.
PROCESS_ENGINES = frozenset({"gomgr"})


@dataclass(frozen=True)
class StartPlan:
    runtime: str
    reason: str  # one line: why this runtime
    served_name: str
    engine_args: tuple[str, ...]  # every engine flag but host and port
    env: tuple[tuple[str, str], ...]


def plan_start(
    repo_or_dir: str, model_dir: Path, requested_runtime: str, port: int | None,
    served_name: str | None,
) -> StartPlan:
    try:
        effective = resolve_manifest(repo_or_dir, architecture_of(model_dir))
    except ManifestError as exc:
        raise StartBlocked(f"manifest: {exc.message}") from exc
    if served_name is not None:
        effective = dataclasses.replace(effective, served_name=served_name)
    report = check_for_start(repo_or_dir, model_dir, requested_runtime, port, effective.context_length)
    runtime, reason = _runtime(requested_runtime, *choose_runtime(report))
    if blockers := report.blocking(runtime):
        raise StartBlocked(f"cannot start with the {runtime} runtime: {blockers[0].title}", _fixes(blockers[0]))
    if effective.engine not in PROCESS_ENGINES:
        raise StartBlocked(
            f"manifest {effective.name} runs the {effective.engine} engine, which only a container "
            "runtime can run, and the docker runtime is not built yet"
        )
    return StartPlan(
        runtime=runtime, reason=reason, served_name=effective.served_name,
        engine_args=tuple(to_engine_flags(effective, model_dir)), env=tuple(effective.env.items()),
    )


def _runtime(requested: str, suggested: str, why: str) -> tuple[str, str]:
    if requested != "auto":
        return requested, f"requested with --runtime {requested}"
    if suggested not in runtime_names():
        # NOTE: readiness may prefer docker on a GPU machine; until that runtime exists the
        # process runtime runs the same engine there too.
        return "process", f"docker runtime not built yet; readiness would pick docker: {why}"
    return suggested, why


def _fixes(blocker: Blocker) -> str:
    steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(blocker.fix_steps, 1))
    return f"{blocker.explanation}\n{steps}"
