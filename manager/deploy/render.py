"""The rendered files: one per engine and one for the router, written to a directory or as one
YAML stream."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from manager.deploy.engine_pods import engine_pods
from manager.deploy.errors import DeployError
from manager.deploy.k8s_objects import K8sModel
from manager.deploy.kserve import inference_service, predictor_url
from manager.deploy.kubernetes import engine_deployment, engine_service, engine_url
from manager.deploy.options import RenderOptions, Target
from manager.deploy.router import ROUTER_NAME, router_objects
from manager.lifecycle.desired_state import DesiredState


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the router's backends file in its ConfigMap) as `|` blocks."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _string)


@dataclass(frozen=True)
class RenderedFile:
    name: str  # e.g. gomgr-smollm2.yaml
    header: str
    objects: tuple[K8sModel, ...]

    def text(self) -> str:
        documents = [
            yaml.dump(o.to_yaml_dict(), Dumper=_BlockDumper, sort_keys=False) for o in self.objects
        ]
        return self.header + "---\n" + "---\n".join(documents)


def render(desired: DesiredState, options: RenderOptions) -> tuple[RenderedFile, ...]:
    """The manifests of every engine of `desired` and of the router in front of them."""
    pods = engine_pods(desired, options)
    header = (
        f"# Rendered by `gomgr deploy render --target {options.target.value}` from "
        f"{desired.source.name}; render again rather than edit.\n"
    )
    files: list[RenderedFile] = []
    if options.target is Target.KUBERNETES:
        files += [
            RenderedFile(
                f"{pod.name}.yaml", header,
                (engine_deployment(pod, options), engine_service(pod, options)),
            )
            for pod in pods
        ]
        urls = tuple(engine_url(pod) for pod in pods)
    else:
        files += [
            RenderedFile(f"{pod.name}.yaml", header, (inference_service(pod, options),))
            for pod in pods
        ]
        urls = tuple(predictor_url(pod) for pod in pods)
    router = tuple(router_objects(pods, urls, options))
    return (*files, RenderedFile(f"{ROUTER_NAME}.yaml", header, router))


def write_files(files: tuple[RenderedFile, ...], directory: Path) -> list[Path]:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for rendered in files:
            path = directory / rendered.name
            path.write_text(rendered.text())
            written.append(path)
    except OSError as exc:
        raise DeployError(f"cannot write to {directory}: {exc.strerror or exc}") from exc
    return written


def as_stream(files: tuple[RenderedFile, ...]) -> str:
    """Every file as one YAML stream (stdout, `kubectl apply -f -`)."""
    return "".join(rendered.text() for rendered in files)
