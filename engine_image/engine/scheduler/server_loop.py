"""The scheduler process's event loop: ZMQ messages in, one model step, token outputs out."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import zmq

from engine.core.errors import InvalidRequest
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    AbortRequest,
    AnyMessage,
    ClassifyRequest,
    ControlResponse,
    EmbedRequest,
    ExpertDistributionRequest,
    FlushCacheRequest,
    ForwardOnlyOutput,
    GenerateRequest,
    RequestError,
    ScoreRequest,
    ServerInfoRequest,
    TokenOutputs,
    UpdateWeightsRequest,
    drain,
    encode,
)
from engine.scheduler.expert_distribution_control import answer_expert_distribution
from engine.scheduler.forward_only import ForwardOnlyQueue
from engine.scheduler.outputs import StepOutput
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
        self,
        scheduler: Scheduler,
        inbox: zmq.Socket,
        outbox: zmq.Socket,
        server_args: dict[str, Any],
        forward_only: ForwardOnlyQueue,
    ) -> None:
        self.scheduler = scheduler
        # NOTE: embed and score requests: one forward each, between generation steps.
        self.forward_only = forward_only
        self.inbox = inbox
        self.outbox = outbox
        self.server_args = server_args
        self.weight_version = 1
        self.pending_flushes: list[_PendingFlush] = []
        self.pending_update: UpdateWeightsRequest | None = None
        # rid -> (skip_special_tokens, stop strings to trim), for the detokenizer
        self.text_options: dict[str, tuple[bool, list[str]]] = {}

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
        for message in drain(self.inbox):
            self._handle(message)
        self._settle_controls()
        if self.forward_only and self.pending_update is None:
            output = self.forward_only.run_once()
            if output is not None:
                self._reply(output)
        if not self.scheduler.is_idle:
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
            rids = self.scheduler.request_ids() if message.abort_all else [message.rid or ""]
            for rid in rids:
                self.forward_only.abort(rid)
                if self.scheduler.abort(rid):
                    self._send_abort(rid)
        elif isinstance(message, FlushCacheRequest):
            self.pending_flushes.append(_PendingFlush(message, time.monotonic() + message.timeout_s))
        elif isinstance(message, UpdateWeightsRequest):
            self.pending_update = message
            self.scheduler.admission_paused = True
        elif isinstance(message, ServerInfoRequest):
            self._reply(ControlResponse(message.request_id, True, payload=self.server_info()))
        elif isinstance(message, ExpertDistributionRequest):
            self._reply(answer_expert_distribution(self.scheduler.runner.expert_recorder, message))
        else:
            logger.warning("scheduler ignored an unexpected %s message", type(message).__name__)

    def _add_generate(self, message: GenerateRequest) -> None:
        params = message.params
        try:
            reqs = [
                self.scheduler.new_request(
                    rid, message.input_ids, sample, message.return_logprob, message.top_logprobs_num
                )
                for rid, sample in zip(message.rids, params.per_sample(), strict=True)
            ]
        except (InvalidRequest, ValueError) as err:
            for rid in message.rids:
                self._reply(RequestError(rid, str(err)))
            return
        stops = [] if params.no_stop_trim else list(params.stop)
        for rid in message.rids:
            self.text_options[rid] = (params.skip_special_tokens, stops)
        self.scheduler.add_group(reqs)

    def _settle_controls(self) -> None:
        now = time.monotonic()
        still_waiting = []
        for pending in self.pending_flushes:
            if self.scheduler.flush_cache():
                self._reply(ControlResponse(pending.request.request_id, True, "Cache flushed."))
            elif now >= pending.deadline:
                self._reply(
                    ControlResponse(
                        pending.request.request_id,
                        False,
                        "Cache not flushed: requests are running. Retry when idle or pass a timeout.",
                    )
                )
            else:
                still_waiting.append(pending)
        self.pending_flushes = still_waiting
        if self.pending_update is not None and self.scheduler.is_idle:
            self._update_weights(self.pending_update)

    def _update_weights(self, message: UpdateWeightsRequest) -> None:
        self.pending_update = None
        self.scheduler.admission_paused = False
        try:
            self.scheduler.runner.reload_weights(message.model_path)
        except Exception as err:  # noqa: BLE001 — any failure keeps the old weights serving
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            self._reply(
                ControlResponse(
                    message.request_id,
                    False,
                    f"Failed to update weights: {reason}. The old weights keep serving.",
                )
            )
            return
        self.scheduler.flush_cache()
        self.weight_version += 1
        self.server_args["model_path"] = message.model_path
        logger.info("weights updated from %s (version %d)", message.model_path, self.weight_version)
        self._reply(
            ControlResponse(
                message.request_id,
                True,
                "Succeeded to update model weights.",
                payload={"weight_version": self.weight_version, "model_path": message.model_path},
            )
        )

    def server_info(self) -> dict[str, Any]:
        scheduler = self.scheduler
        runner = scheduler.runner
        return {
            **self.server_args,
            "max_total_tokens": runner.max_total_tokens,
            "context_length": runner.context_length,
            "kv_pool_free_tokens": runner.allocator.available_size(),
            "kv_pool_used_tokens": runner.max_total_tokens - runner.allocator.available_size(),
            "radix_cache_tokens": scheduler.tree.total_size(),
            "radix_cache_evictable_tokens": scheduler.tree.evictable_size(),
            "num_running_reqs": len(scheduler.running) + (1 if scheduler.chunked else 0),
            "num_waiting_reqs": len(scheduler.waiting)
            + sum(len(g) for g in scheduler.held.values())
            + len(scheduler.grammar_queue.reqs() if scheduler.grammar_queue else ()),
            "weight_version": self.weight_version,
            "device": str(runner.device),
            "dtype": str(runner.dtype).removeprefix("torch."),
        }

    # ------------------------------------------------------------------ outputs

    def _send_outputs(self, outputs: list[StepOutput]) -> None:
        for refused in [o for o in outputs if o.error is not None]:
            self.text_options.pop(refused.rid, None)
            self._reply(RequestError(refused.rid, refused.error or ""))
        outputs = [o for o in outputs if o.error is None]
        if not outputs:
            return
        options = [self.text_options[o.rid] for o in outputs]
        message = TokenOutputs(
            rids=[o.rid for o in outputs],
            new_token_ids=[list(o.token_ids) for o in outputs],
            new_logprobs=[list(o.logprobs) for o in outputs],
            new_top_logprobs=[[list(step) for step in o.top_logprobs] for o in outputs],
            finish_reasons=[o.finish_reason for o in outputs],
            prompt_tokens=[o.prompt_tokens for o in outputs],
            completion_tokens=[o.completion_tokens for o in outputs],
            cached_tokens=[o.cached_tokens for o in outputs],
            skip_special_tokens=[skip for skip, _ in options],
            stops=[stops for _, stops in options],
        )
        for o in outputs:
            if o.finish_reason is not None:
                self.text_options.pop(o.rid, None)
        self.outbox.send(encode(message))

    def _send_abort(self, rid: str) -> None:
        skip, stops = self.text_options.pop(rid, (True, []))
        self.outbox.send(
            encode(
                TokenOutputs(
                    rids=[rid],
                    new_token_ids=[[]],
                    new_logprobs=[[]],
                    new_top_logprobs=[[]],
                    finish_reasons=[FinishReason("abort", message="aborted")],
                    prompt_tokens=[0],
                    completion_tokens=[0],
                    cached_tokens=[0],
                    skip_special_tokens=[skip],
                    stops=[stops],
                )
            )
        )

    def _reply(self, message: RequestError | ControlResponse | ForwardOnlyOutput) -> None:
        self.outbox.send(encode(message))
