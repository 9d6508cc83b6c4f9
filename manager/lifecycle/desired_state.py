"""The desired-state file of `gomgr apply -f engines.yaml`: its schema and its loader.

    engines:
      - repo: HuggingFaceTB/SmolLM2-135M-Instruct   # or path: ./models/my-model
        name: smollm2              # the served name, and the entry's key (default: the repo)
        aliases: [small]
        runtime: auto              # auto | docker | process
        port: 31000                # default: a free one
        variant: smollm2           # a manifest name layered over the matched one
        idle_unload_after: 10m     # stop it after this long without a request (--watch)
        gpus: 2                    # the GPUs its pod gets (`gomgr deploy render`; 0: CPU)
        replicas: 3                # engines of it, ports port..port+2, one GPU share each

Pydantic lives only here, at the edge; the lifecycle works on the frozen `DesiredEngine`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from manager.lifecycle.errors import LifecycleError
from manager.manifests.catalog import load_catalog
from manager.manifests.errors import ManifestError
from manager.models.errors import InvalidRepoIdError
from manager.models.store import RepoId

# NOTE: record labels that mark an engine as started (or adopted) by `gomgr apply`: the
# entry's key, and a hash of the fields whose change needs a restart.
ENTRY_LABEL = "gomgr.apply/entry"
SPEC_LABEL = "gomgr.apply/spec"
REPLICA_LABEL = "gomgr.apply/replica"  # NOTE: absent on engines from before replicas: replica 0

_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class DesiredStateError(LifecycleError):
    """An unreadable or invalid file; `problems` holds one line per problem."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0], "\n".join(f"error: {p}" for p in problems[1:]))
        self.problems = tuple(problems)


def parse_duration(value: object) -> float:
    """Seconds from '10m', '1h30m', '2s', '500ms' or a plain number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and _DURATION_RE.match(value.strip()):
        parts = _DURATION_PART_RE.findall(value.strip())
        seconds = sum(float(number) * _UNIT_S[unit] for number, unit in parts)
    else:
        raise ValueError(f"{value!r} is not a duration like '10m', '30s', '1h30m' or '500ms'")
    if seconds <= 0:
        raise ValueError("a duration must be more than 0")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
Name = Annotated[str, Field(min_length=1)]


class EngineEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: Name | None = None
    path: Name | None = None
    name: Name | None = None
    aliases: list[Name] = []
    runtime: Literal["auto", "docker", "process"] = "auto"
    port: Annotated[int, Field(gt=0, lt=65536)] | None = None
    variant: Name | None = None
    idle_unload_after: Duration | None = None
    gpus: Annotated[int, Field(ge=0)] | None = None
    replicas: Annotated[int, Field(ge=1, le=64)] = 1

    @model_validator(mode="after")
    def _one_model(self) -> EngineEntry:
        if (self.repo is None) == (self.path is None):
            raise ValueError("give exactly one of 'repo' (a Hugging Face repo id) or 'path'")
        return self


class DesiredStateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engines: list[EngineEntry]


@dataclass(frozen=True)
class DesiredEngine:
    key: str  # the served name if given, else the repo: unique in the file
    repo: str  # a repo id, or an absolute model directory
    served_name: str | None  # None: the manifest's
    aliases: tuple[str, ...]
    runtime: str
    port: int | None
    variant: str | None
    idle_unload_after_s: float | None
    # NOTE: read by `gomgr deploy render` only (a pod's `nvidia.com/gpu`; None: the tensor
    # parallel size, at least 1); a local start places engines on the GPUs NVML sees.
    gpus: int | None = None
    replicas: int = 1

    @property
    def spec_hash(self) -> str:
        """What a running engine must match; idle_unload_after and the replica count change
        without restarting the replicas that stay."""
        fields = [self.repo, self.served_name, self.aliases, self.runtime, self.port, self.variant]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]

    def labels(self, replica: int = 0) -> dict[str, str]:
        labels = {ENTRY_LABEL: self.key, SPEC_LABEL: self.spec_hash}
        return {**labels, REPLICA_LABEL: str(replica)} if replica else labels


@dataclass(frozen=True)
class DesiredState:
    source: Path
    engines: tuple[DesiredEngine, ...]

    def get(self, key: str) -> DesiredEngine | None:
        return next((e for e in self.engines if e.key == key), None)


def load_desired_state(path: Path) -> DesiredState:
    """The file's engines, or DesiredStateError naming every problem with its YAML path."""
    where = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise DesiredStateError([f"{where}: cannot read it: {exc.strerror or exc}"]) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise DesiredStateError([f"{where}{at}: not valid YAML: {exc.problem}"]) from exc
    except yaml.YAMLError as exc:
        raise DesiredStateError([f"{where}: not valid YAML: {exc}"]) from exc
    try:
        parsed = DesiredStateFile.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise DesiredStateError([_problem(where, error) for error in exc.errors()]) from exc
    engines = [_desired(entry, path.parent) for entry in parsed.engines]
    problems = _clashes(engines) + _unknown_variants(parsed.engines)
    if problems:
        raise DesiredStateError([f"{where}: {problem}" for problem in problems])
    return DesiredState(path, tuple(engines))


def _canonical(repo: str) -> str:
    """`org/name:q4_k_m` as the store and a started engine's record spell it (`:Q4_K_M`), so
    an entry matches the engine `gomgr start` made of it."""
    try:
        return str(RepoId.parse(repo))
    except InvalidRepoIdError:
        return repo  # NOTE: the start reports a bad id, with the same words as `gomgr start`


def _desired(entry: EngineEntry, base: Path) -> DesiredEngine:
    if entry.path is not None:
        directory = (base / Path(entry.path).expanduser()).resolve()
        repo, default_key = str(directory), directory.name
    else:
        assert entry.repo is not None
        repo = default_key = _canonical(entry.repo)
    return DesiredEngine(
        key=entry.name or default_key,
        repo=repo,
        served_name=entry.name,
        aliases=tuple(entry.aliases),
        runtime=entry.runtime,
        port=entry.port,
        variant=entry.variant,
        idle_unload_after_s=entry.idle_unload_after,
        gpus=entry.gpus,
        replicas=entry.replicas,
    )


def _clashes(engines: list[DesiredEngine]) -> list[str]:
    problems: list[str] = []
    names: dict[str, int] = {}
    ports: dict[int, int] = {}
    for i, engine in enumerate(engines):
        for field, name in [("name", engine.key), *(("aliases", a) for a in engine.aliases)]:
            if name in names and names[name] != i:
                problems.append(
                    f"engines[{i}].{field}: {name!r} is already served by engines[{names[name]}]"
                )
            names.setdefault(name, i)
        for port in [] if engine.port is None else range(engine.port, engine.port + engine.replicas):
            if port in ports:
                problems.append(
                    f"engines[{i}].port: {port} is already taken by engines[{ports[port]}]"
                )
                break
            ports.setdefault(port, i)
    return problems


def _unknown_variants(entries: list[EngineEntry]) -> list[str]:
    wanted = [(i, e.variant) for i, e in enumerate(entries) if e.variant is not None]
    if not wanted:
        return []
    try:
        known = load_catalog().names()
    except ManifestError as exc:
        return [f"manifests: {exc.message}"]
    return [
        f"engines[{i}].variant: no manifest named {variant!r} (known: {', '.join(known)})"
        for i, variant in wanted
        if variant not in known
    ]


def _problem(where: str, error: object) -> str:
    assert isinstance(error, dict)
    location = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    )
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    return f"{where}: {location.lstrip('.') or 'top level'}: {message}"
