"""Reading one YAML file into its schema; every failure becomes one ManifestError line."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from manager.manifests.errors import ManifestError

Schema = TypeVar("Schema", bound=BaseModel)
# NOTE (issue 30): libyaml's parser where PyYAML has it (its wheels do): the pure-Python one
# took ~10 ms of the ~35 ms a start's planning takes, reading the built-in manifests.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_model(path: Path, schema: type[Schema]) -> Schema:
    """`path` parsed as YAML and validated as `schema`; else ManifestError naming file and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: {_yaml_reason(exc)}") from exc
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ManifestError(f"{path}: expected a mapping of fields, the file is {kind}")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(f"{path}: {_validation_reason(exc, schema)}") from exc


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return _one_line(f"invalid YAML: {where}{problem}")


def _validation_reason(exc: ValidationError, schema: type[BaseModel]) -> str:
    reasons = []
    for error in exc.errors(include_url=False):
        # NOTE: a model-level check has an empty `loc`; its message names the fields itself.
        loc = error["loc"]
        field = ".".join(str(part) for part in loc)
        if error["type"] == "extra_forbidden":
            allowed = f" (allowed: {', '.join(schema.model_fields)})" if len(loc) == 1 else ""
            message = f"unknown field{allowed}"
        else:
            message = error["msg"].removeprefix("Value error, ")
            if field:
                message += f" (got {error['input']!r})"
        reasons.append(f"field '{field}': {message}" if field else message)
    return _one_line("; ".join(reasons))


def _one_line(text: str) -> str:
    return " ".join(text.split())
