"""`gomgr doctor`: the readiness report as rich banners, or JSON for scripts.

Exit status: 0 when nothing blocks a start on the runtime a start would use (the one given
with --runtime, or auto's choice), 1 otherwise. Blocked options the default path does not
need (Docker and the GPU on a CPU-only machine, where auto picks the process runtime) are
still shown as banners but do not fail the command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from manager.manifests.engine_support import ModelTraits
from manager.manifests.engines import PROCESS_ENGINES
from manager.readiness.blocker import Blocker

if TYPE_CHECKING:
    from manager.readiness.report import ReadinessReport


def doctor_command(
    repo: Annotated[
        str | None,
        typer.Argument(
            help="Hugging Face repo id (org/name:TAG: one GGUF of it), model directory or .gguf "
            "file; none: the machine only."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    port: Annotated[
        int | None, typer.Option(help="Check that this host port is free on 127.0.0.1.")
    ] = None,
    runtime: Annotated[
        str, typer.Option(help="auto, docker or process: the runtime a start would use.")
    ] = "auto",
    context_length: Annotated[
        int | None, typer.Option(help="Context tokens to size the KV cache for (default 8192).")
    ] = None,
) -> None:
    """Check Docker, GPUs, memory fit, disk, port and HF token; exit 1 if a start is blocked."""
    if runtime not in ("auto", "docker", "process"):
        raise typer.BadParameter("must be auto, docker or process", param_hint="--runtime")
    # NOTE: imported here: the checks load NVML, the hub client and the docker SDK, which
    # `gomgr --help` and the other commands (all loading this module) should not pay for.
    from manager.readiness.start import check_for_start

    engine = engine_decision(repo) if repo is not None else None
    if runtime == "auto" and engine is not None and engine.name not in (None, *PROCESS_ENGINES):
        runtime = "docker"  # NOTE: as `gomgr start` decides: only a container runs that engine
    report = check_for_start(repo, None, runtime, port, context_length)
    if as_json:
        body = report.to_dict()
        if engine is not None:
            body["engine"] = {"name": engine.name, "reason": engine.reason, "error": engine.error}
        typer.echo(json.dumps(body, indent=2))
    else:
        render(report, Console(), engine)
    raise typer.Exit(0 if report.ready() and (engine is None or engine.error is None) else 1)


@dataclass(frozen=True)
class EngineDecision:
    """Which engine a start of the model would run, and why; `error` where none serves it."""

    name: str | None
    reason: str
    error: str | None = None

    def line(self) -> str:
        return f"engine: {self.name} ({self.reason})" if self.error is None else f"engine: none ({self.error})"


def engine_decision(repo: str) -> EngineDecision:
    """The same choice `gomgr start` makes: the manifest, with its fallback engine where
    config.json (local, else the hub's) names what gomgr's engine does not serve."""
    from manager.manifests.architecture import detect_traits
    from manager.manifests.errors import ManifestError
    from manager.manifests.resolve import is_path, resolve_manifest
    from manager.readiness.start import hub_traits

    traits = detect_traits(repo)
    if traits == ModelTraits() and not is_path(repo):
        traits = hub_traits(repo)
    try:
        effective = resolve_manifest(repo, traits)
    except ManifestError as exc:
        return EngineDecision(None, "", exc.message)
    return EngineDecision(effective.engine, effective.engine_reason or f"manifest {effective.name}")


def render(report: ReadinessReport, console: Console, engine: EngineDecision | None = None) -> None:
    console.print(f"[bold]gomgr doctor[/bold] {report.target or '(machine only)'}")
    if engine is not None:
        console.print(f"  {engine.line()}", style="red" if engine.error else None)
    for gpu in report.gpus:
        console.print(
            f"  GPU {gpu.index}: {gpu.name}, {gpu.free_bytes / 1024**3:.1f} GiB free of "
            f"{gpu.total_bytes / 1024**3:.1f} GiB"
        )
    if report.memory is not None:
        m = report.memory
        console.print(
            f"  memory needed: {m.total / 1024**3:.2f} GiB (weights {m.weights / 1024**3:.2f}"
            f" + KV {m.kv_cache / 1024**3:.2f} for {report.context_tokens} tokens"
            f" + overhead {m.overhead / 1024**3:.2f})"
        )
    console.print(f"  free disk: {report.free_disk_bytes / 1e9:.1f} GB")
    if report.runtime_hint is not None:
        console.print(f"  runtime auto → {report.runtime_hint[0]}: {report.runtime_hint[1]}")
    for note in report.notes:
        console.print(f"  note: {note}", style="dim")
    for blocker in report.blockers:
        console.print(_banner(blocker))
    default = report.default_runtime()
    if report.ready():
        console.print(f"[green]ready[/green] to start with the {default} runtime")
    else:
        console.print(f"[red]blocked[/red]: the {default} runtime cannot start (see above)")


def _banner(blocker: Blocker) -> Panel:
    body = Text(blocker.explanation + "\n")
    for number, step in enumerate(blocker.fix_steps, start=1):
        body.append(f"\n{number}. {step}")
    if blocker.blocks:
        body.append(f"\n\nblocks: {', '.join(blocker.blocks)}", style="dim")
    style = "red" if blocker.severity == "blocks" else "yellow"
    return Panel(
        body, title=f"[{style}]{blocker.title}[/{style}]", subtitle=blocker.id, border_style=style
    )
