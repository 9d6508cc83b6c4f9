"""A Blocker: one failed readiness check, in words a user can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# NOTE: "blocks" means the options in `blocks` cannot be offered; "warns" means nothing is
# blocked but a fact could not be established (e.g. the VRAM fit of a repo the hub won't
# describe) and the user should know before starting.
Severity = Literal["blocks", "warns"]

# NOTE: the options a blocker can take away. "docker" and "process" are the runtimes of
# `--runtime`; "gpu" is running the engine on an NVIDIA GPU (either runtime); "docker-gpu" is
# a container with `--gpus all`. A blocker that stops every start (a taken port, a full
# disk) lists both runtimes.
Option = Literal["docker", "process", "gpu", "docker-gpu"]

EVERY_RUNTIME: tuple[Option, ...] = ("docker", "process")


@dataclass(frozen=True)
class Blocker:
    id: str  # stable slug, e.g. "docker-daemon-unreachable"; scripts and the TUI key on it
    title: str
    explanation: str
    fix_steps: tuple[str, ...]  # in order; rendered numbered from 1
    severity: Severity
    blocks: tuple[Option, ...]

    def blocks_option(self, option: Option) -> bool:
        return self.severity == "blocks" and option in self.blocks

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "explanation": self.explanation,
            "fix_steps": list(self.fix_steps),
            "severity": self.severity,
            "blocks": list(self.blocks),
        }
