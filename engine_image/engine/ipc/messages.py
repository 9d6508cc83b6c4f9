"""Messages exchanged over ZMQ: HTTP/TokenizerManager → Scheduler → Detokenizer → HTTP.

Every message is a frozen msgspec Struct tagged with its class name, so one decoder
(``decode``) turns any frame back into the right type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import msgspec
import zmq

from engine.ipc.finish_reason import FinishReason
from engine.ipc.scheduler_stats import SchedulerStats
from engine.sampling.params import SamplingParams

LogprobPair = tuple[float, int]
"""(logprob, token id): one entry of a step's top logprobs, from the sampler to the HTTP side."""


class Message(msgspec.Struct, frozen=True, tag=True):
    """Base of every IPC message.

    NOTE: subclasses repeat ``frozen=True``. msgspec inherits it at runtime anyway, but type
    checkers read Struct through PEP 681's dataclass_transform, which does not, and reject a
    non-frozen subclass of a frozen base (msgspec's advice, msgspec/msgspec#657).

    ``worker`` (where a message has one) is the index of the tokenizer worker that sent the
    request (--tokenizer-worker-num): the scheduler copies it into its answers and the
    detokenizer sends each answer to that worker's socket.
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
    worker: int = 0


class EmbedRequest(Message, frozen=True):
    """Whole prompts for one forward and pooling; never enters the decode loop."""

    rid: str
    input_ids: list[list[int]]
    worker: int = 0


class ScoreRequest(Message, frozen=True):
    """Whole prompts for one forward; the answer is the label ids' logprobs at the next position."""

    rid: str
    input_ids: list[list[int]]
    label_token_ids: list[int]
    worker: int = 0


class ClassifyRequest(Message, frozen=True):
    """Whole prompts (or query-document pairs) for one forward through a classification head.

    The answer is each prompt's raw logits; ``token_type_ids`` (segment ids of BERT pairs)
    parallel ``input_ids`` when given, else every token is segment 0.
    """

    rid: str
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None = None
    worker: int = 0


class AbortRequest(Message, frozen=True):
    """Ends ``rid`` (with ``samples``, also ``{rid}-{i}``, the samples of an n > 1 request)
    or every request, whichever tokenizer worker owns it."""

    rid: str | None = None
    abort_all: bool = False
    samples: bool = False


class FlushCacheRequest(Message, frozen=True):
    request_id: str
    timeout_s: float = 0.0
    worker: int = 0


class UpdateWeightsRequest(Message, frozen=True):
    request_id: str
    model_path: str
    worker: int = 0


class ServerInfoRequest(Message, frozen=True):
    request_id: str
    worker: int = 0


class ExpertDistributionRequest(Message, frozen=True):
    """Start (clearing the counts) or stop counting the tokens routed to each MoE expert,
    or dump the counts: the answer's payload ``csv``."""

    request_id: str
    action: Literal["start", "stop", "dump"]
    worker: int = 0


# ---------------------------------------------------------------- scheduler → detokenizer


class DetokenizeOptions(Message, frozen=True):
    """How the detokenizer turns the outputs of ``rids`` (the samples of one GenerateRequest)
    into text; the scheduler sends it once, when it admits the request, before any output."""

    rids: list[str]
    skip_special_tokens: bool
    stops: list[str]  # stop strings to trim from the final text ([] when no_stop_trim)
    worker: int = 0


class RequestDelta(msgspec.Struct, frozen=True):
    """What one request gained in one scheduler step (no tokens while a chunked prompt
    prefills; none but a finish_reason when it is aborted).

    ``logprobs[i]`` is the logprob of ``token_ids[i]`` and ``top_logprobs[i]`` the most
    likely tokens at its position (both empty unless asked for). The scheduler leaves
    ``text`` empty; the detokenizer fills it with the text that became final.
    """

    rid: str
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[LogprobPair]]
    finish_reason: FinishReason | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    text: str = ""


class TokenOutputs(Message, frozen=True):
    """The deltas of the requests one scheduler step advanced."""

    deltas: list[RequestDelta]


class RequestError(Message, frozen=True):
    """A request the scheduler refused (bad input it could only check with the model)."""

    rid: str
    message: str
    worker: int = 0


class ForwardOnlyOutput(Message, frozen=True):
    """Per prompt of an EmbedRequest its vector, of a ScoreRequest its label logprobs, of a
    ClassifyRequest its logits."""

    rid: str
    values: list[list[float]]
    prompt_tokens: int
    worker: int = 0


class WeightsUpdated(msgspec.Struct, frozen=True, tag=True):
    """The payload of a successful weight update."""

    weight_version: int
    model_path: str


class ExpertDistributionDump(msgspec.Struct, frozen=True, tag=True):
    """The payload of an expert-distribution dump: ``layer_id,expert_id,count`` rows."""

    csv: str


ControlPayload = SchedulerStats | WeightsUpdated | ExpertDistributionDump


class ControlResponse(Message, frozen=True):
    """The answer to a flush / update-weights / server-info / expert-distribution request;
    ``payload`` is the server-info answer's stats, a weight update's new version, a dump's CSV."""

    request_id: str
    success: bool
    message: str = ""
    payload: ControlPayload | None = None
    worker: int = 0


# ---------------------------------------------------------------- detokenizer → tokenizer


class TextOutputs(Message, frozen=True):
    """The scheduler's deltas of one step, each with its ``text`` filled in."""

    deltas: list[RequestDelta]


WorkerRequest = (
    EmbedRequest
    | ScoreRequest
    | ClassifyRequest
    | FlushCacheRequest
    | UpdateWeightsRequest
    | ServerInfoRequest
    | ExpertDistributionRequest
)
"""A request the routes build whose answer goes back to the worker that sent it."""

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
    | DetokenizeOptions
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


def drain(socket: zmq.Socket[bytes]) -> Iterator[AnyMessage]:
    """Every message already waiting on `socket`, without blocking."""
    while True:
        try:
            frame = socket.recv(zmq.NOBLOCK)
        except zmq.Again:
            return
        yield decode(frame)
