"""The scheduler process's event loop: ZMQ messages in, one model step, token outputs out."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import zmq

from engine.core.errors import InvalidRequest
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    AbortRequest,
    AnyMessage,
    ClassifyRequest,
    ControlResponse,
    DetokenizeOptions,
    EmbedRequest,
    ExpertDistributionRequest,
    FlushCacheRequest,
    GenerateRequest,
    Message,
    RequestDelta,
    RequestError,
    ScoreRequest,
    ServerInfoRequest,
    TokenOutputs,
    UpdateWeightsRequest,
    WeightsUpdated,
    drain,
    encode,
)
from engine.runtime.host_malloc import return_freed_memory
from engine.scheduler.expert_distribution_control import answer_expert_distribution
from engine.scheduler.forward_only import ForwardOnlyQueue
from engine.scheduler.outputs import StepOutputs
from engine.scheduler.scheduler import Scheduler

logger = logging.getLogger(__name__)

_IDLE_POLL_MS = 50
# NOTE: requests sent together (a client's burst, a chat UI's parallel calls) reach the
# inbox a fraction of a millisecond apart. Leaving idle, the loop collects them until the
# inbox has been quiet for _BURST_GAP_MS (at most _BURST_MAX_S) so they share the first
# prefill instead of the first one running alone (a 128-token prefill costs a fifth of a
# 1,024-token one on CPU). Costs a lone request _BURST_GAP_MS of latency.
_BURST_GAP_MS = 2
_BURST_MAX_S = 0.02


@dataclass
class _PendingFlush:
    request: FlushCacheRequest
    deadline: float


class SchedulerServer:
    """Owns the Scheduler inside its process; the only reader of the scheduler socket."""

    def __init__(
        self, scheduler: Scheduler, inbox: zmq.Socket[bytes], outbox: zmq.Socket[bytes], forward_only: ForwardOnlyQueue
    ) -> None:
        self.scheduler = scheduler
        # NOTE: embed and score requests: one forward each, between generation steps.
        self.forward_only = forward_only
        self.inbox = inbox
        self.outbox = outbox
        self.pending_flushes: list[_PendingFlush] = []
        self.pending_update: UpdateWeightsRequest | None = None
        # NOTE: False from the first forward after a trim until the loop has been idle for a
        # whole _IDLE_POLL_MS: a trim then costs nothing a request waits on.
        self.heap_trimmed = True

    def run_forever(self) -> None:
        while True:
            self.serve_once()

    def serve_once(self) -> None:
        idle = (
            self.scheduler.is_idle
            and not self.forward_only
            and not self.pending_flushes
            and self.pending_update is None
        )
        if idle and self.inbox.poll(_IDLE_POLL_MS):
            self._collect_burst()
        elif idle and not self.heap_trimmed:
            return_freed_memory(self.scheduler.runner.device)
            self.heap_trimmed = True
        for message in drain(self.inbox):
            self._handle(message)
        self._settle_controls()
        if self.forward_only and self.pending_update is None:
            self.heap_trimmed = False
            # NOTE: the forward-only model runs on this thread: no generation step may be in flight.
            self.scheduler.sync()
            output = self.forward_only.run_once()
            if output is not None:
                self._reply(output)
        if not self.scheduler.is_idle:
            self.heap_trimmed = False
            self._send_outputs(self.scheduler.step())

    def _collect_burst(self) -> None:
        deadline = time.monotonic() + _BURST_MAX_S
        while True:
            for message in drain(self.inbox):
                self._handle(message)
            if time.monotonic() >= deadline or not self.inbox.poll(_BURST_GAP_MS):
                return

    # ------------------------------------------------------------------ messages

    def _handle(self, message: AnyMessage) -> None:
        if isinstance(message, GenerateRequest):
            self._add_generate(message)
        elif isinstance(message, EmbedRequest | ScoreRequest | ClassifyRequest):
            refused = self.forward_only.add(message)
            if refused is not None:
                self._reply(refused)
        elif isinstance(message, AbortRequest):
            for rid in self._rids_to_abort(message):
                self.forward_only.abort(rid)
                if self.scheduler.abort(rid):
                    self._send_aborted(rid)
        elif isinstance(message, FlushCacheRequest):
            self.pending_flushes.append(_PendingFlush(message, time.monotonic() + message.timeout_s))
        elif isinstance(message, UpdateWeightsRequest):
            self.pending_update = message
            self.scheduler.pause_admission()
        elif isinstance(message, ServerInfoRequest):
            self._reply(ControlResponse(message.request_id, True, payload=self.scheduler.stats(), worker=message.worker))
        elif isinstance(message, ExpertDistributionRequest):
            self._reply(answer_expert_distribution(self.scheduler.expert_recorder, message))
        else:
            logger.warning("scheduler ignored an unexpected %s message", type(message).__name__)

    def _rids_to_abort(self, message: AbortRequest) -> list[str]:
        if message.abort_all:
            return self.scheduler.request_ids()
        rid = message.rid or ""
        if not message.samples:
            return [rid]
        return [rid, *(r for r in self.scheduler.request_ids() if r.startswith(f"{rid}-"))]

    def _add_generate(self, message: GenerateRequest) -> None:
        params = message.params
        try:
            # NOTE: each tokenizer worker refuses its own duplicates; only here are the ids
            # of every worker known, and the detokenizer routes outputs by id.
            live = set(self.scheduler.request_ids())
            taken = [rid for rid in message.rids if rid in live]
            if taken:
                raise InvalidRequest(f"request id {taken[0]!r} is already in use")
            reqs = [
                self.scheduler.new_request(
                    rid, message.input_ids, sample, message.return_logprob, message.top_logprobs_num
                )
                for rid, sample in zip(message.rids, params.per_sample(), strict=True)
            ]
        except (InvalidRequest, ValueError) as err:
            for rid in message.rids:
                self._reply(RequestError(rid, str(err), message.worker))
            return
        for req in reqs:
            req.worker = message.worker
        stops = [] if params.no_stop_trim else list(params.stop)
        # NOTE: sent before the group is queued, so it reaches the detokenizer before any output.
        self._reply(DetokenizeOptions(message.rids, params.skip_special_tokens, stops, message.worker))
        self.scheduler.add_group(reqs)

    def _settle_controls(self) -> None:
        now = time.monotonic()
        still_waiting = []
        for pending in self.pending_flushes:
            request = pending.request
            if self.scheduler.flush_cache():
                self._reply(ControlResponse(request.request_id, True, "Cache flushed.", worker=request.worker))
            elif now >= pending.deadline:
                self._reply(
                    ControlResponse(
                        request.request_id,
                        False,
                        "Cache not flushed: requests are running. Retry when idle or pass a timeout.",
                        worker=request.worker,
                    )
                )
            else:
                still_waiting.append(pending)
        self.pending_flushes = still_waiting
        if self.pending_update is not None and self.scheduler.is_idle:
            self._update_weights(self.pending_update)

    def _update_weights(self, message: UpdateWeightsRequest) -> None:
        self.pending_update = None
        self.scheduler.resume_admission()
        try:
            self.scheduler.update_weights(message.model_path)
        except Exception as err:  # noqa: BLE001 — any failure keeps the old weights serving
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            self._reply(
                ControlResponse(
                    message.request_id,
                    False,
                    f"Failed to update weights: {reason}. The old weights keep serving.",
                    worker=message.worker,
                )
            )
            return
        version = self.scheduler.weight_version
        logger.info("weights updated from %s (version %d)", message.model_path, version)
        self._reply(
            ControlResponse(
                message.request_id,
                True,
                "Succeeded to update model weights.",
                payload=WeightsUpdated(version, message.model_path),
                worker=message.worker,
            )
        )

    # ------------------------------------------------------------------ outputs

    def _send_outputs(self, outputs: StepOutputs) -> None:
        for refused in outputs.refused:
            self._reply(refused)
        if outputs.deltas:
            self._reply(TokenOutputs(outputs.deltas))

    def _send_aborted(self, rid: str) -> None:
        aborted = FinishReason("abort", message="aborted")
        self._reply(TokenOutputs([RequestDelta(rid, [], [], [], aborted, 0, 0, 0)]))

    def _reply(self, message: Message) -> None:
        self.outbox.send(encode(message))
