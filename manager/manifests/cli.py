"""`gomgr manifests ...`: a face over resolve_manifest; the logic lives in this package."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from manager.manifests.errors import ManifestError

if TYPE_CHECKING:
    from manager.manifests.effective import EffectiveManifest

manifests_app = typer.Typer(
    help="Model manifests: engine, image, parsers and flags per model family.",
    no_args_is_help=True,
)


@manifests_app.command("show")
def manifests_show(
    repo: Annotated[str, typer.Argument(help="Hugging Face repo id or model directory.")],
    architecture: Annotated[
        str | None,
        typer.Option(help="e.g. Qwen3ForCausalLM. Default: config.json of the local copy, if any."),
    ] = None,
    variant: Annotated[
        str | None, typer.Option(help="Use this manifest by name, e.g. sglang-upstream.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Show the effective manifest for REPO and where each field came from."""
    # NOTE: imported here: the YAML and pydantic layers cost start-up time that `gomgr --help`
    # and every other command (all loading this module) would pay.
    import dataclasses

    from manager.manifests.architecture import detect_traits
    from manager.manifests.resolve import resolve_manifest

    traits = detect_traits(repo)
    if architecture is not None:
        traits = dataclasses.replace(traits, architecture=architecture)
    try:
        effective = resolve_manifest(repo, traits, variant=variant)
    except ManifestError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps(effective.as_dict(), indent=2))
        return
    _print_table(effective)


def _print_table(effective: EffectiveManifest) -> None:
    from manager.manifests.effective import VALUE_FIELDS

    # NOTE: piped output gets full rows (no 80-column wrapping) so it stays greppable.
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    console.print(f"{effective.repo}: manifest {effective.name} ({effective.selected_by})")
    if effective.engine_reason:
        console.print(effective.engine_line())
    table = Table("FIELD", "VALUE", "SOURCE", box=None)
    table.add_row("name", effective.name, str(effective.sources["name"]))
    for field in VALUE_FIELDS:
        table.add_row(field, _shown(getattr(effective, field)), str(effective.sources[field]))
    console.print(table)


def _shown(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return " ".join(value) or "-"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)
