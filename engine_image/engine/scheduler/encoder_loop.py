"""The scheduler process's loop for an encoder (embedding or cross-encoder) model: no KV cache, no decode loop."""

from __future__ import annotations

import zmq

from engine.ipc.messages import (
    AbortRequest,
    AnyMessage,
    ClassifyRequest,
    ControlResponse,
    EmbedRequest,
    ExpertDistributionRequest,
    FlushCacheRequest,
    GenerateRequest,
    Message,
    RequestError,
    ScoreRequest,
    ServerInfoRequest,
    UpdateWeightsRequest,
    drain,
    encode,
)
from engine.ipc.scheduler_stats import SchedulerStats
from engine.runtime.cross_encoder_runner import CrossEncoderRunner
from engine.runtime.encoder_runner import EncoderRunner
from engine.scheduler.expert_distribution_control import answer_expert_distribution
from engine.scheduler.forward_only import ForwardOnlyQueue

_IDLE_POLL_MS = 50


class EncoderServer:
    """Answers every message an HTTP server sends; only embed / classify requests do real work."""

    def __init__(self, runner: EncoderRunner | CrossEncoderRunner, inbox: zmq.Socket[bytes], outbox: zmq.Socket[bytes]) -> None:
        self.runner = runner
        self.inbox = inbox
        self.outbox = outbox
        self.queue = ForwardOnlyQueue(runner, runner.config.prefill_chunk(runner.device.type))

    def run_forever(self) -> None:
        while True:
            if not self.queue:
                self.inbox.poll(_IDLE_POLL_MS)
            for message in drain(self.inbox):
                self._handle(message)
            output = self.queue.run_once()
            if output is not None:
                self._send(output)

    def _handle(self, message: AnyMessage) -> None:
        if isinstance(message, EmbedRequest | ScoreRequest | ClassifyRequest):
            refused = self.queue.add(message)
            if refused is not None:
                self._send(refused)
        elif isinstance(message, GenerateRequest):
            for rid in message.rids:
                self._send(RequestError(rid, "this model is an encoder: it cannot generate text", message.worker))
        elif isinstance(message, AbortRequest):
            if message.abort_all:
                self.queue.pending.clear()
            elif message.rid is not None:
                self.queue.abort(message.rid)
        elif isinstance(message, FlushCacheRequest):
            self._send(ControlResponse(message.request_id, True, "Cache flushed.", worker=message.worker))
        elif isinstance(message, UpdateWeightsRequest):
            refusal = "weight updates are not supported for encoder models"
            self._send(ControlResponse(message.request_id, False, refusal, worker=message.worker))
        elif isinstance(message, ServerInfoRequest):
            self._send(ControlResponse(message.request_id, True, payload=self.stats(), worker=message.worker))
        elif isinstance(message, ExpertDistributionRequest):
            # NOTE: encoders have no experts: the answer is a refusal.
            self._send(answer_expert_distribution(None, message))

    def stats(self) -> SchedulerStats:
        return SchedulerStats(
            model_path=self.runner.config.model_path,
            weight_version=1,
            max_total_tokens=0,
            context_length=self.runner.context_length,
            device=str(self.runner.device),
            dtype=str(self.runner.dtype).removeprefix("torch."),
            num_running_reqs=0,
            num_waiting_reqs=len(self.queue.pending),
            kv=None,
        )

    def _send(self, message: Message) -> None:
        self.outbox.send(encode(message))
