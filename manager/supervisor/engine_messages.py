"""The supervisor's engine API on the wire: what `gomgr start / restart / stop / apply` send,
and the events a start or an apply streams back (one JSON object a line) until it ends in
`started` or `applied`, or in `failed`.

NOTE: a `started` event names the engine; the record itself is read from the state directory
the CLI and the supervisor share, the one place records live.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from manager.lifecycle.start_request import StartRequest
from manager.state.records import EngineRecord

NDJSON = "application/x-ndjson"
ENGINE_NOT_FOUND = "engine_not_found"  # the error code of a stop or restart naming no engine


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StartBody(_Message):
    """`manager.lifecycle.start.StartRequest` on the wire, plus the keep-alive."""

    repo: str
    runtime: str = "auto"
    port: int | None = Field(default=None, ge=1, le=65535)
    served_name: str | None = None
    timeout_s: float = Field(gt=0)
    gpus: str = "auto"
    aliases: tuple[str, ...] = ()
    variant: str | None = None
    labels: dict[str, str] = {}
    replica: int = Field(default=0, ge=0)
    replicas: int = Field(default=1, ge=1)
    # NOTE: None pins the engine (never unloaded when idle); else Ollama's keep_alive.
    keep_alive: str | float | None = None

    @classmethod
    def of(cls, request: StartRequest, keep_alive: str | None = None) -> StartBody:
        return cls(
            repo=request.repo, runtime=request.runtime, port=request.port,
            served_name=request.served_name, timeout_s=request.timeout_s, gpus=request.gpus,
            aliases=request.aliases, variant=request.variant, labels=request.labels,
            replica=request.replica, replicas=request.replicas, keep_alive=keep_alive,
        )


class RestartBody(_Message):
    timeout_s: float = Field(gt=0)


class ApplyBody(_Message):
    """`gomgr apply -f FILE`: the file (an absolute path; the supervisor reads it itself)."""

    file: str
    timeout_s: float = Field(gt=0)


class StepEvent(_Message):
    kind: Literal["step"] = "step"
    text: str


class TransferredEvent(_Message):
    kind: Literal["transferred"] = "transferred"
    done: int
    total: int


class AnnounceEvent(_Message):
    kind: Literal["announce"] = "announce"
    text: str


class StartedEvent(_Message):
    kind: Literal["started"] = "started"
    engine_id: str
    router_url: str
    runtime_reason: str


class OutcomeEvent(_Message):
    """One action of an apply carried out; a failed one goes to stderr with its details."""

    kind: Literal["outcome"] = "outcome"
    text: str
    failed: bool = False
    details: str = ""


class AppliedEvent(_Message):
    kind: Literal["applied"] = "applied"
    exit_code: int  # the first failed action's, else 0


class FailedEvent(_Message):
    kind: Literal["failed"] = "failed"
    message: str
    details: str = ""
    exit_code: int = 1


EngineEvent = Annotated[
    StepEvent | TransferredEvent | AnnounceEvent | StartedEvent | OutcomeEvent | AppliedEvent
    | FailedEvent,
    Field(discriminator="kind"),
]
ENGINE_EVENT: TypeAdapter[EngineEvent] = TypeAdapter(EngineEvent)


class StoppedEngine(_Message):
    id: str
    served_name: str

    @classmethod
    def of(cls, record: EngineRecord) -> StoppedEngine:
        return cls(id=record.id, served_name=record.handle.spec.served_name)


class StoppedOut(_Message):
    stopped: tuple[StoppedEngine, ...]
