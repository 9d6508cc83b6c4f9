"""One engine of the desired-state file as a pod runs it: the docker runtime's plan, in a cluster.

NOTE: the image, the flags, the environment, the shm size and the port come from the same
code that plans a docker start (manager/lifecycle/planning.py, manager/runtimes/base.py);
only what a cluster decides differently is here: how many GPUs (no NVML to ask), the name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from manager.deploy.errors import DeployError
from manager.deploy.options import RenderOptions
from manager.lifecycle.desired_state import DesiredEngine, DesiredState
from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.planning import container_plan, effective_manifest
from manager.manifests.architecture import detect_traits
from manager.models.errors import InvalidRepoIdError
from manager.models.store import RepoId
from manager.runtimes.base import CONTAINER_MODEL_DIR, container_command

# NOTE: the tensor-parallel flag of each engine kind: SGLang's name on ours (issue 27) and
# SGLang's, vLLM's own; a pod with N GPUs runs its engine over all N.
TP_FLAGS = {"gomgr": "--tp-size", "sglang": "--tp-size", "vllm": "--tensor-parallel-size"}
# NOTE: `app.kubernetes.io/name` per engine kind. Our engine serves SGLang's API and exports
# SGLang's metric names, so what scores SGLang pods reads ours (`gomgr.dev/engine` tells them apart).
APP_NAMES = {"gomgr": "gomgr-engine", "sglang": "sglang", "vllm": "vllm"}
# NOTE: KServe names a raw deployment's Service `<name>-predictor`: 63 (a DNS label) - 10.
NAME_MAX = 53
_LABEL_VALUE_MAX = 63
_SHM_UNITS = {"b": "", "k": "Ki", "m": "Mi", "g": "Gi"}


@dataclass(frozen=True)
class EnginePod:
    key: str  # the desired-state entry's key
    name: str  # its objects' name: a DNS label
    repo: RepoId
    served_name: str
    aliases: tuple[str, ...]
    engine: str  # gomgr | vllm | sglang
    manifest: str  # the manifest selected for it
    image: str
    command: tuple[str, ...]  # the entrypoint; empty: the image's own
    args: tuple[str, ...]  # every flag, host and port included
    env: tuple[tuple[str, str], ...]
    shm_size: str  # a Kubernetes quantity
    gpus: int
    replicas: int

    def selector(self) -> dict[str, str]:
        return {"app.kubernetes.io/part-of": "gomgr", "app.kubernetes.io/instance": self.name}

    def labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": APP_NAMES[self.engine],
            **self.selector(),
            "app.kubernetes.io/component": "engine",
            "app.kubernetes.io/managed-by": "gomgr",
            "gomgr.dev/engine": self.engine,
            "gomgr.dev/model": label_value(self.served_name),
        }

    def annotations(self) -> dict[str, str]:
        """What labels cannot hold: the exact repo id and served name."""
        return {
            "gomgr.dev/repo": str(self.repo),
            "gomgr.dev/served-name": self.served_name,
            "gomgr.dev/manifest": self.manifest,
        }


def engine_pods(desired: DesiredState, options: RenderOptions) -> tuple[EnginePod, ...]:
    """Every engine of the file, or DeployError naming the first the target cannot express."""
    pods = tuple(_pod(engine, options) for engine in desired.engines)
    seen: dict[str, str] = {}
    for pod in pods:
        if pod.name in seen:
            raise DeployError(
                f"engines {seen[pod.name]!r} and {pod.key!r} would both be named {pod.name}; "
                "give one of them another name"
            )
        seen[pod.name] = pod.key
    return pods


def _pod(engine: DesiredEngine, options: RenderOptions) -> EnginePod:
    where = f"engine {engine.key!r}"
    repo = _repo(engine, options)
    try:
        effective = effective_manifest(
            engine.repo, detect_traits(engine.repo), engine.variant, engine.served_name
        )
    except StartBlocked as exc:
        raise DeployError(f"{where}: {exc.message}") from exc
    flag = TP_FLAGS[effective.engine]
    tp = _flag_value(effective.engine_args, flag)
    gpus = engine.gpus if engine.gpus is not None else max(tp or 1, 1)
    if gpus == 0 and effective.engine != "gomgr":
        raise DeployError(
            f"{where}: the {effective.engine} image runs on GPUs only; set gpus: 1 or more"
        )
    if tp is not None and gpus not in (0, tp):
        raise DeployError(f"{where}: gpus: {gpus}, but its manifest sets {flag} {tp}")
    plan = container_plan(effective, "", gpus > 0, (), CONTAINER_MODEL_DIR)
    assert plan.container is not None
    tp_args = (flag, str(gpus)) if gpus > 1 and tp is None else ()
    image = plan.container.image
    if options.engine_image is not None and effective.engine == "gomgr":
        image = options.engine_image
    return EnginePod(
        key=engine.key, name=object_name(engine.key), repo=repo,
        served_name=plan.served_name, aliases=engine.aliases, engine=effective.engine,
        manifest=effective.name, image=image, command=plan.container.entrypoint,
        args=tuple(container_command((*plan.engine_args, *tp_args))), env=plan.env,
        shm_size=_quantity(plan.container.shm_size), gpus=gpus,
        replicas=engine.replicas,  # NOTE: `replicas: N` of the desired-state file
    )


def _repo(engine: DesiredEngine, options: RenderOptions) -> RepoId:
    where = f"engine {engine.key!r}"
    if Path(engine.repo).is_absolute():
        raise DeployError(
            f"{where}: a local directory ({engine.repo}) cannot be deployed to "
            f"{options.target.value}; give its Hugging Face repo id as `repo:`"
        )
    try:
        repo = RepoId.parse(engine.repo)
    except InvalidRepoIdError as exc:
        raise DeployError(f"{where}: {exc.message}") from exc
    if repo.tag is not None:
        # NOTE: the GGUF file the engine loads is named only once the tag is pulled.
        raise DeployError(
            f"{where}: a GGUF tag ({engine.repo}) cannot be deployed to {options.target.value} "
            "yet; give a safetensors repo"
        )
    return repo


def object_name(key: str) -> str:
    """`gomgr-<key>` as a DNS label; a long key keeps a hash of itself, so names stay distinct."""
    name = "gomgr-" + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")
    if len(name) <= NAME_MAX:
        return name
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{name[: NAME_MAX - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """`text` as a label value: at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", ".", text)[:_LABEL_VALUE_MAX]
    return value.strip("_.-")


def _flag_value(args: tuple[str, ...], flag: str) -> int | None:
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith(f"{flag}=") else None
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        if value is not None:
            return int(value) if value.isdigit() else None
    return None


def _quantity(shm_size: str) -> str:
    """Docker's `32g` (manifests/schema.py's form) as Kubernetes' `32Gi`."""
    unit = shm_size[-1].lower()
    if unit in _SHM_UNITS:
        return shm_size[:-1] + _SHM_UNITS[unit]
    return shm_size
