"""Messages exchanged over ZMQ: HTTP/TokenizerManager → Scheduler → Detokenizer → HTTP.

Every message is a frozen msgspec Struct tagged with its class name, so one decoder
(``decode``) turns any frame back into the right type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import msgspec
import zmq

from engine.ipc.finish_reason import FinishReason
from engine.sampling.params import SamplingParams


class Message(msgspec.Struct, frozen=True, tag=True):
    """Base of every IPC message.

    NOTE: subclasses repeat ``frozen=True``. msgspec inherits it at runtime anyway, but type
    checkers read Struct through PEP 681's dataclass_transform, which does not, and reject a
    non-frozen subclass of a frozen base (msgspec's advice, msgspec/msgspec#657).
    """


# ---------------------------------------------------------------- tokenizer → scheduler


class GenerateRequest(Message, frozen=True):
    """One prompt; ``rids`` has one id per sample (``params.n`` of them, sharing the prompt's
    KV). ``params`` were validated where the request entered the engine."""

    rids: list[str]
    input_ids: list[int]
    params: SamplingParams
    return_logprob: bool = False
    top_logprobs_num: int = 0


class EmbedRequest(Message, frozen=True):
    """Whole prompts for one forward and pooling; never enters the decode loop."""

    rid: str
    input_ids: list[list[int]]


class ScoreRequest(Message, frozen=True):
    """Whole prompts for one forward; the answer is the label ids' logprobs at the next position."""

    rid: str
    input_ids: list[list[int]]
    label_token_ids: list[int]


class ClassifyRequest(Message, frozen=True):
    """Whole prompts (or query-document pairs) for one forward through a classification head.

    The answer is each prompt's raw logits; ``token_type_ids`` (segment ids of BERT pairs)
    parallel ``input_ids`` when given, else every token is segment 0.
    """

    rid: str
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None = None


class AbortRequest(Message, frozen=True):
    rid: str | None = None
    abort_all: bool = False


class FlushCacheRequest(Message, frozen=True):
    request_id: str
    timeout_s: float = 0.0


class UpdateWeightsRequest(Message, frozen=True):
    request_id: str
    model_path: str


class ServerInfoRequest(Message, frozen=True):
    request_id: str


class ExpertDistributionRequest(Message, frozen=True):
    """Start (clearing the counts) or stop counting the tokens routed to each MoE expert,
    or dump the counts: the answer's payload ``csv``."""

    request_id: str
    action: Literal["start", "stop", "dump"]


# ---------------------------------------------------------------- scheduler → detokenizer


class TokenOutputs(Message, frozen=True):
    """New tokens of several requests from one scheduler step (parallel lists)."""

    rids: list[str]
    new_token_ids: list[list[int]]
    new_logprobs: list[list[float]]
    new_top_logprobs: list[list[list[tuple[float, int]]]]
    finish_reasons: list[FinishReason | None]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    cached_tokens: list[int]
    skip_special_tokens: list[bool]
    stops: list[list[str]]  # stop strings to trim from the final text ([] when no_stop_trim)


class RequestError(Message, frozen=True):
    """A request the scheduler refused (bad input it could only check with the model)."""

    rid: str
    message: str


class ForwardOnlyOutput(Message, frozen=True):
    """Per prompt of an EmbedRequest its vector, of a ScoreRequest its label logprobs, of a
    ClassifyRequest its logits."""

    rid: str
    values: list[list[float]]
    prompt_tokens: int


class ControlResponse(Message, frozen=True):
    """The answer to a flush / update-weights / server-info / expert-distribution request."""

    request_id: str
    success: bool
    message: str = ""
    payload: dict[str, Any] = {}


# ---------------------------------------------------------------- detokenizer → tokenizer


class TextOutputs(Message, frozen=True):
    """Incremental text per request; ``texts[i]`` is new text since the last message."""

    rids: list[str]
    texts: list[str]
    new_token_ids: list[list[int]]
    new_logprobs: list[list[float]]
    new_top_logprobs: list[list[list[tuple[float, int]]]]
    finish_reasons: list[FinishReason | None]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    cached_tokens: list[int]


AnyMessage = (
    GenerateRequest
    | EmbedRequest
    | ScoreRequest
    | ClassifyRequest
    | AbortRequest
    | FlushCacheRequest
    | UpdateWeightsRequest
    | ServerInfoRequest
    | ExpertDistributionRequest
    | TokenOutputs
    | RequestError
    | ForwardOnlyOutput
    | ControlResponse
    | TextOutputs
)

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[AnyMessage] = msgspec.msgpack.Decoder(AnyMessage)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode(frame: bytes) -> AnyMessage:
    return _decoder.decode(frame)


def drain(socket: zmq.Socket) -> Iterator[AnyMessage]:
    """Every message already waiting on `socket`, without blocking."""
    while True:
        try:
            frame = socket.recv(zmq.NOBLOCK)
        except zmq.Again:
            return
        yield decode(frame)
