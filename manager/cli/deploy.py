"""`gomgr deploy render`: the desired-state file's engines as Kubernetes or KServe manifests."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from manager.cli.output import errors_as_one_line

deploy_app = typer.Typer(
    help="Run the engines of a desired-state file on a cluster (docs/scale-out.md).",
    no_args_is_help=True,
)

TARGETS = ("kubernetes", "kserve")
MODEL_SOURCES = ("pull", "pvc")


@deploy_app.command("render")
def render_command(
    file: Annotated[
        Path, typer.Option("-f", "--file", help="The desired-state file, as for `gomgr apply`.")
    ] = Path("engines.yaml"),
    target: Annotated[
        str, typer.Option(metavar="kubernetes|kserve",
                          help="kubernetes: a Deployment and Service per engine; kserve: an "
                          "InferenceService per engine. The router comes with either.")
    ] = "kubernetes",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write a file per engine here (default: stdout).")
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Hand the files to `kubectl apply -f`.")
    ] = False,
    namespace: Annotated[
        str | None, typer.Option("-n", "--namespace", help="Default: kubectl's current one.")
    ] = None,
    model_source: Annotated[
        str, typer.Option(metavar="pull|pvc",
                          help="pull: an init container runs `gomgr models pull` into the pod "
                          "(default); pvc: an existing claim holding a gomgr model store.")
    ] = "pull",
    models_pvc: Annotated[
        str, typer.Option(help="The claim for --model-source pvc.")
    ] = "gomgr-models",
    gomgr_image: Annotated[
        str, typer.Option(help="An image with gomgr installed: the router and the model pull.")
    ] = "gomgr:latest",
    engine_image: Annotated[
        str | None, typer.Option(help="The image of gomgr's engine in a registry the cluster "
                                 "pulls from (default: the manifest's, gomgr-engine:latest).")
    ] = None,
    router_port: Annotated[int, typer.Option(help="The router Service's port.")] = 8000,
    router_api_key_secret: Annotated[
        str, typer.Option(help="The Secret whose key `api-key` the router's clients must send "
                          "(the router serves beyond loopback only with a key and TLS).")
    ] = "gomgr-router-key",
    router_tls_secret: Annotated[
        str, typer.Option(help="The kubernetes.io/tls Secret (tls.crt, tls.key) the router "
                          "serves HTTPS with.")
    ] = "gomgr-router-tls",
) -> None:
    """Write the manifests for the engines FILE lists, from the same model manifests as
    `gomgr apply`. Exit 2: a bad option, file or engine, or kubectl missing or failing."""
    from manager.deploy.errors import DeployError
    from manager.deploy.kubectl import kubectl_apply, kubectl_path
    from manager.deploy.options import ModelSource, RenderOptions, Target
    from manager.deploy.render import as_stream, render, write_files
    from manager.lifecycle.desired_state import load_desired_state

    with errors_as_one_line():
        if target not in TARGETS:
            raise DeployError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
        if model_source not in MODEL_SOURCES:
            raise DeployError(
                f"--model-source {model_source!r}: choose one of {', '.join(MODEL_SOURCES)}"
            )
        kubectl = kubectl_path() if apply else None
        options = RenderOptions(
            target=Target(target), namespace=namespace, model_source=ModelSource(model_source),
            models_pvc=models_pvc, gomgr_image=gomgr_image, engine_image=engine_image,
            router_port=router_port, router_api_key_secret=router_api_key_secret,
            router_tls_secret=router_tls_secret,
        )
        files = render(load_desired_state(file), options)
        if output is None and kubectl is None:
            typer.echo(as_stream(files), nl=False)
            return
        if output is not None:
            for path in write_files(files, output):
                typer.echo(f"wrote {path}", err=True)
        if kubectl is None:
            return
        if output is not None:
            kubectl_apply(kubectl, output)
            return
        with tempfile.TemporaryDirectory(prefix="gomgr-deploy-") as staged:
            write_files(files, Path(staged))
            kubectl_apply(kubectl, Path(staged))
