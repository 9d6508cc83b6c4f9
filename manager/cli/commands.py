"""The typer app: global options, and every command wired in from its module (the `gomgr`
console script, `manager.cli.app`, runs it after `start`'s early part)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from manager.cli import engines
from manager.cli.apply import apply
from manager.cli.deploy import deploy_app
from manager.cli.models import models_app
from manager.cli.router import router_app
from manager.cli.serve import serve
from manager.images.cli import image_app
from manager.manifests.cli import manifests_app
from manager.readiness.doctor import doctor_command

app = typer.Typer(
    help="Run local LLM engines behind an OpenAI-compatible router. Exit codes: 0 ok, 1 model "
    "error, 2 usage, 3 readiness blocked the start, 4 the engine failed to start, 5 router "
    "unavailable, 6 no such engine.",
    no_args_is_help=True,
    add_completion=True,
)
for command in (engines.start, engines.stop, engines.restart, engines.ps, engines.logs, engines.tui):
    app.command()(command)
app.command()(apply)
app.command()(serve)
app.command("doctor")(doctor_command)
app.add_typer(models_app, name="models")
app.add_typer(router_app, name="router")
app.add_typer(manifests_app, name="manifests")
app.add_typer(image_app, name="image")
app.add_typer(deploy_app, name="deploy")


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log steps to stderr.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
