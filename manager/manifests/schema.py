"""The YAML schemas: a built-in manifest file and a user override file ("engine variant").

Pydantic lives only here, at the edge; the rest of the package works on frozen dataclasses.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

EngineName = Literal["gomgr", "sglang", "vllm"]
# NOTE: must equal the engine's registries engine.function_call / engine.reasoning (a test
# checks it); copied because manager/ never imports the engine package.
ToolCallParser = Literal["qwen25", "hermes", "llama3", "mistral", "pythonic"]
ReasoningParser = Literal["qwen3", "deepseek-r1"]

# NOTE: flags that a manifest field already sets, or that the runtime owns (where the model
# is mounted, which port is published); in `engine_args` they would silently fight them.
RESERVED_FLAGS = {
    "--model-path": "the runtime sets it",
    "--model": "the runtime sets it",
    "--host": "the runtime sets it",
    "--port": "the runtime sets it",
    "--served-model-name": "use the field served_name",
    "--context-length": "use the field context_length",
    "--max-model-len": "use the field context_length",
    "--tool-call-parser": "use the field tool_call_parser",
    "--enable-auto-tool-choice": "use the field tool_call_parser",
    "--reasoning-parser": "use the field reasoning_parser",
}
TEMPLATE_FIELDS = ("repo", "name")
_SHM_SIZE_RE = re.compile(r"^[1-9][0-9]*[bkmg]?$")


def _check_template(value: str) -> str:
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(value) if field is not None]
    except ValueError as exc:
        raise ValueError(f"not a valid template: {exc}") from exc
    for field in fields:
        if field not in TEMPLATE_FIELDS:
            allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            raise ValueError(f"unknown placeholder {{{field}}} (allowed: {allowed})")
    return value


def _check_shm_size(value: str) -> str:
    if not _SHM_SIZE_RE.match(value):
        raise ValueError(f"{value!r} is not a size like '32g', '512m' or '1073741824'")
    return value


def _check_engine_args(value: list[str]) -> list[str]:
    for arg in value:
        flag = arg.split("=", 1)[0]
        if flag in RESERVED_FLAGS:
            raise ValueError(f"{flag} may not be in engine_args ({RESERVED_FLAGS[flag]})")
    return value


ServedName = Annotated[str, Field(min_length=1), AfterValidator(_check_template)]
ShmSize = Annotated[str, AfterValidator(_check_shm_size)]
EngineArgs = Annotated[list[str], AfterValidator(_check_engine_args)]
Pattern = Annotated[str, Field(min_length=1)]
ContextLength = Annotated[int, Field(gt=0)]
ManifestName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")]


class MatchSpec(BaseModel):
    """What selects a manifest: repo id globs (case-insensitive) and/or architectures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repos: list[Pattern] = []
    architectures: list[Pattern] = []


class ManifestFile(BaseModel):
    """One built-in manifest: `manifests/<name>.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ManifestName
    match: MatchSpec = MatchSpec()
    engine: EngineName = "gomgr"
    image: Annotated[str, Field(min_length=1)] | None = None
    served_name: ServedName = "{repo}"
    context_length: ContextLength | None = None
    tool_call_parser: ToolCallParser | None = None
    reasoning_parser: ReasoningParser | None = None
    engine_args: EngineArgs = []
    shm_size: ShmSize = "32g"
    env: dict[str, str] = {}
    priority: int = 0
    # NOTE: the manifest layered over this one where gomgr's engine does not serve the model
    # (manifests/engine_support.py); null: such a model is refused instead.
    fallback: ManifestName | None = "vllm-upstream"


# NOTE: the manifest fields that may be null; an override sets one to null to switch it off
# (e.g. `tool_call_parser: null`), so "absent" and "null" differ and `model_fields_set` tells.
NULLABLE_FIELDS = frozenset(
    {"image", "context_length", "tool_call_parser", "reasoning_parser", "fallback"}
)


class OverrideFile(BaseModel):
    """A user override: names its target (a manifest, or a repo glob) and the changed fields.

    A manifest-name override is merged into that manifest before matching, so it may also
    change `match` and `priority` (that is how a repo is sent to `sglang-upstream`). A repo
    override is merged into whatever manifest the repo resolves to, so it may not.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    overrides: Annotated[str, Field(min_length=1)] | None = None
    repo: Pattern | None = None
    match: MatchSpec | None = None
    engine: EngineName | None = None
    image: Annotated[str, Field(min_length=1)] | None = None
    served_name: ServedName | None = None
    context_length: ContextLength | None = None
    tool_call_parser: ToolCallParser | None = None
    reasoning_parser: ReasoningParser | None = None
    engine_args: EngineArgs | None = None
    shm_size: ShmSize | None = None
    env: dict[str, str] | None = None
    priority: int | None = None
    fallback: ManifestName | None = None

    @field_validator(
        "match", "engine", "served_name", "engine_args", "shm_size", "env", "priority",
        mode="before",
    )
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("may not be null")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> OverrideFile:
        if (self.overrides is None) == (self.repo is None):
            raise ValueError("give exactly one of 'overrides' (a manifest name) or 'repo' (a glob)")
        if self.repo is not None and {"match", "priority"} & self.model_fields_set:
            raise ValueError("'match' and 'priority' only apply to an 'overrides' file")
        return self

    def changes(self) -> dict[str, object]:
        """The manifest fields this file sets, with their values (None where set to null)."""
        return {
            field: getattr(self, field)
            for field in self.model_fields_set
            if field not in ("overrides", "repo")
        }
