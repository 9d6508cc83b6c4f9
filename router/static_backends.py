"""`python -m router --backends FILE`: backends known from the start, kept while unreachable.

The file (YAML or JSON) lists registrations in the admin API's shape (router/admin.py):

    backends:
      - id: gomgr-smollm2
        model: HuggingFaceTB/SmolLM2-135M-Instruct
        base_url: http://gomgr-smollm2:30000
        kind: engine

Where the router runs beside its engines in a cluster (`gomgr deploy render`, a ConfigMap),
each base_url is a Service's DNS name: the name stays while its pods come and go, so a
refused connection means "not ready yet" (503 + Retry-After), never "gone" (router/health.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from router.admin import BackendIn
from router.backend import Backend


class BackendsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backends: list[BackendIn]


def load_static_backends(path: Path) -> list[Backend]:
    """The file's backends, pinned; SystemExit with one line where the file is unusable."""
    try:
        raw = yaml.safe_load(path.read_text())
        parsed = BackendsFile.model_validate(raw if raw is not None else {})
    except OSError as exc:
        raise SystemExit(f"error: --backends {path}: cannot read it: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SystemExit(f"error: --backends {path}: not valid YAML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SystemExit(f"error: --backends {path}: {where}: {message}") from exc
    return [dataclasses.replace(entry.backend(), pinned=True) for entry in parsed.backends]
