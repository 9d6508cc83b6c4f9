"""`gomgr models pull / list / rm`: the local model store."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.table import Table

from manager.cli.completion import complete_repos
from manager.cli.output import errors_as_one_line, print_table, progress


class SourceChoice(StrEnum):
    """`--source`, mirroring manager.models.pull.Source (not imported: it loads the hub client)."""

    AUTO = "auto"
    BUNDLED = "bundled"
    HUB = "hub"


models_app = typer.Typer(
    help="Pull, list and remove models in the local store.", no_args_is_help=True
)


@models_app.command("pull")
def models_pull(
    repo_or_dir: Annotated[
        str,
        typer.Argument(
            metavar="REPO|DIR",
            help="Hugging Face repo id, e.g. org/name, or org/name:Q4_K_M for one GGUF file of "
            "it; or a local model directory (with --name).",
        ),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="Import DIR under this repo id (org/name).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --name: replace a model of that name.")
    ] = False,
    source: Annotated[
        SourceChoice, typer.Option(help="auto: bundled source if one exists, else hub.")
    ] = SourceChoice.AUTO,
) -> None:
    """Download (or build from a bundled source) REPO into the model store, or copy DIR in."""
    if name is not None:
        if source is not SourceChoice.AUTO:
            _usage_error("--source does not apply to importing a directory with --name")
        _import_dir(repo_or_dir, name, force)
        return
    # NOTE: imported here: the hub client and the store's pydantic models cost start-up time
    # that every other command would pay.
    from manager.models.local_import import names_a_directory
    from manager.models.pull import Source, pull_model

    if repo_or_dir.lower().endswith(".gguf"):
        _usage_error(f"a GGUF file needs no pull: `gomgr start {repo_or_dir}` serves it where it lies")
    if names_a_directory(repo_or_dir):
        _usage_error(f"to import the directory {repo_or_dir}, give --name org/name to store it as")
    if force:
        _usage_error("--force applies only to importing a directory with --name")
    with errors_as_one_line(), progress() as live:
        result = pull_model(repo_or_dir, source=Source(source.value), progress=live)
    model = result.model
    if result.already_present:
        typer.echo(f"{model.repo} already present at {model.path}")
    else:
        typer.echo(f"pulled {model.repo} to {model.path} ({_size(model.size_bytes)})")


def _import_dir(directory: str, name: str, force: bool) -> None:
    from manager.models.errors import InvalidRepoIdError
    from manager.models.local_import import import_model_dir
    from manager.models.store import RepoId

    try:
        repo = RepoId.parse(name)
    except InvalidRepoIdError as exc:
        _usage_error(f"--name: {exc.message}")
    if repo.tag is not None:
        _usage_error("--name takes no tag: a tag names one GGUF file of a hub repo")
    with errors_as_one_line(), progress() as live:
        model = import_model_dir(Path(directory), repo, force=force, progress=live)
    typer.echo(f"imported {directory} as {model.repo} to {model.path} ({_size(model.size_bytes)})")


def _usage_error(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@models_app.command("list")
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the models in the store with their sizes and whether each is loaded (STATE, from
    the running router; "-" when none answers)."""
    from manager.lifecycle.router_link import RouterLink
    from manager.models.store import ModelStore
    from manager.state.paths import StatePaths
    from manager.supervisor.catalog import store_models
    from manager.supervisor.client import catalog_states

    store = ModelStore.from_env()
    models = store.models()
    served = {m.repo: m.served_name for m in store_models(store)}
    states = catalog_states(RouterLink.from_paths(StatePaths.from_env()).url) or {}
    state = {m.repo: states.get(served.get(m.repo, "")) for m in models}
    if as_json:
        rows = [
            {
                "repo": m.repo,
                "served_name": served.get(m.repo),
                "state": state[m.repo],
                "path": str(m.path),
                "size_bytes": m.size_bytes,
                "source": m.metadata.source if m.metadata else None,
                "sha256": m.metadata.sha256 if m.metadata else None,
                "gguf_file": m.metadata.gguf_file if m.metadata else None,
                "imported_from": m.metadata.imported_from if m.metadata else None,
                "created": m.metadata.created.isoformat() if m.metadata else None,
            }
            for m in models
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not models:
        typer.echo(f"no models in {store.root}")
        return
    table = Table("REPO", "STATE", "SIZE", "SOURCE", "PATH", box=None)
    for m in models:
        table.add_row(
            m.repo, state[m.repo] or "-", _size(m.size_bytes),
            m.metadata.source if m.metadata else "?", str(m.path),
        )
    print_table(table)


@models_app.command("rm")
def models_rm(
    repo: Annotated[
        str, typer.Argument(help="Hugging Face repo id, e.g. org/name.", autocompletion=complete_repos)
    ],
) -> None:
    """Remove REPO from the model store."""
    from manager.models.store import ModelStore, RepoId

    with errors_as_one_line():
        path = ModelStore.from_env().remove(RepoId.parse(repo))
    typer.echo(f"removed {repo} ({path})")


def _size(size_bytes: int) -> str:
    value = float(size_bytes)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
