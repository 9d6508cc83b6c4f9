"""The HTTP process's side of the pipeline: sends requests to the scheduler, gathers outputs.

One receive loop reads the detokenizer's ``TextOutputs`` into each request's state and wakes
the coroutine waiting on it (``engine.server.generation.service`` consumes the output).
NOTE (seed 002): waking is done in groups of ``batch_notify_size`` with a yield to the
event loop between groups, so a step that finishes many requests does not
starve the loop (health checks, new requests) while thousands of events fire.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import msgspec
import zmq.asyncio

from engine.core.errors import InvalidRequest
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    AbortRequest,
    ClassifyRequest,
    ControlResponse,
    EmbedRequest,
    ForwardOnlyOutput,
    GenerateRequest,
    LogprobPair,
    Message,
    RequestError,
    ScoreRequest,
    TextOutputs,
    WeightsUpdated,
    WorkerRequest,
    decode,
    encode,
)
from engine.ipc.sockets import PortArgs, pull_socket, push_socket
from engine.sampling.params import SamplingParams
from engine.server.tokenizer_workers import TokenizerWorkers

logger = logging.getLogger(__name__)


@dataclass
class RequestState:
    """Everything received so far for one request id."""

    rid: str
    prompt_tokens: int = 0
    created: float = field(default_factory=time.perf_counter)
    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[LogprobPair]] = field(default_factory=list)
    completion_tokens: int = 0
    cached_tokens: int = 0
    finish_reason: FinishReason | None = None
    error: str | None = None
    event: asyncio.Event = field(default_factory=asyncio.Event)
    # NOTE: written only by the metrics observer (--enable-metrics).
    first_token_at: float = 0.0
    last_token_at: float = 0.0
    observed_tokens: int = 0

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None or self.error is not None


class OutputObserver(Protocol):
    """Sees every batch of updated request states (the metrics of --enable-metrics)."""

    def on_outputs(self, states: list[RequestState]) -> None: ...


class TokenizerManager:
    """One tokenizer worker's channel to the scheduler and back from the detokenizer."""

    def __init__(self, port_args: PortArgs, batch_notify_size: int, workers: TokenizerWorkers) -> None:
        self.batch_notify_size = batch_notify_size
        self.workers = workers
        context = zmq.asyncio.Context()
        self._to_scheduler = push_socket(context, port_args.scheduler_input)
        self._from_detokenizer = pull_socket(context, port_args.tokenizer_inputs[workers.index])
        self.states: dict[str, RequestState] = {}
        self._controls: dict[str, asyncio.Future[ControlResponse]] = {}
        self._forward_only: dict[str, asyncio.Future[ForwardOnlyOutput]] = {}
        self._receiver: asyncio.Task[None] | None = None
        self.last_output_time = 0.0
        # NOTE: set only with --enable-metrics, so the hook costs one None check per message.
        self.observer: OutputObserver | None = None
        # NOTE: every worker hears of a weight update, whichever worker asked for it.
        self.on_weights_updated: Callable[[WeightsUpdated], None] | None = None

    def start(self) -> None:
        self._receiver = asyncio.get_running_loop().create_task(self._receive_loop())

    async def close(self) -> None:
        if self._receiver is not None:
            self._receiver.cancel()

    # ------------------------------------------------------------------ requests

    async def submit(
        self,
        input_ids: list[int],
        params: SamplingParams,
        return_logprob: bool,
        top_logprobs_num: int,
        rid: str | None = None,
    ) -> list[RequestState]:
        """Sends one prompt to the scheduler; returns one state per sample (``params.n``).

        ``params`` must be validated (``SamplingParams.validate``): the scheduler trusts them.
        """
        base = rid or uuid.uuid4().hex
        rids = [base] if params.n == 1 else [f"{base}-{i}" for i in range(params.n)]
        for r in rids:
            if r in self.states:
                raise ValueError(f"request id {r!r} is already in use")
        states = [RequestState(r, prompt_tokens=len(input_ids)) for r in rids]
        for state in states:
            self.states[state.rid] = state
        self.workers.set_in_flight(len(self.states))
        await self._send(
            GenerateRequest(rids, input_ids, params, return_logprob, top_logprobs_num, self.workers.index)
        )
        return states

    async def release(self, states: list[RequestState]) -> None:
        """Forgets finished requests and aborts the others."""
        for state in states:
            if not state.finished:
                logger.info("aborting unfinished request %s", state.rid)
                await self.abort(state.rid)
            self.states.pop(state.rid, None)
        self.workers.set_in_flight(len(self.states))

    async def abort(self, rid: str | None = None, abort_all: bool = False, samples: bool = False) -> None:
        """Ends ``rid`` (``samples``: and its n > 1 samples) or all requests, in any worker."""
        await self._send(AbortRequest(rid=rid, abort_all=abort_all, samples=samples))

    async def control(self, make: Callable[[str], WorkerRequest], timeout_s: float) -> ControlResponse | None:
        """Sends a control request built with a fresh request id; None on timeout."""
        request_id = uuid.uuid4().hex
        future: asyncio.Future[ControlResponse] = asyncio.get_running_loop().create_future()
        self._controls[request_id] = future
        await self._send(self._from_this_worker(make(request_id)))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return None
        finally:
            self._controls.pop(request_id, None)

    async def forward_only(self, message: EmbedRequest | ScoreRequest | ClassifyRequest) -> ForwardOnlyOutput:
        """Runs an embed, score or classify request; raises InvalidRequest if the scheduler refused it."""
        future: asyncio.Future[ForwardOnlyOutput] = asyncio.get_running_loop().create_future()
        self._forward_only[message.rid] = future
        try:
            await self._send(self._from_this_worker(message))
            return await future
        finally:
            self._forward_only.pop(message.rid, None)
            if not future.done():
                await self.abort(message.rid)

    def _from_this_worker(self, message: WorkerRequest) -> WorkerRequest:
        return msgspec.structs.replace(message, worker=self.workers.index)

    async def _send(self, message: Message) -> None:
        await self._to_scheduler.send(encode(message))

    # ------------------------------------------------------------------ receiving

    async def _receive_loop(self) -> None:
        while True:
            message = decode(await self._from_detokenizer.recv())
            if isinstance(message, TextOutputs):
                self.last_output_time = time.monotonic()
                touched = self._apply(message)
                if self.observer is not None:
                    self.observer.on_outputs(touched)
                await self._wake_in_batches(touched)
            elif isinstance(message, ForwardOnlyOutput):
                waiter = self._forward_only.get(message.rid)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
            elif isinstance(message, RequestError) and message.rid in self._forward_only:
                waiter = self._forward_only[message.rid]
                if not waiter.done():
                    waiter.set_exception(InvalidRequest(message.message))
            elif isinstance(message, RequestError):
                state = self.states.get(message.rid)
                if state is not None:
                    state.error = message.message
                    state.event.set()
            elif isinstance(message, ControlResponse):
                future = self._controls.get(message.request_id)
                if future is not None and not future.done():
                    future.set_result(message)
                if isinstance(message.payload, WeightsUpdated) and self.on_weights_updated is not None:
                    self.on_weights_updated(message.payload)

    def _apply(self, message: TextOutputs) -> list[RequestState]:
        touched = []
        for delta in message.deltas:
            state = self.states.get(delta.rid)
            if state is None:
                continue  # the client is gone and its request was aborted
            state.text += delta.text
            state.output_ids += delta.token_ids
            state.logprobs += delta.logprobs
            state.top_logprobs += delta.top_logprobs
            state.completion_tokens = delta.completion_tokens or len(state.output_ids)
            state.cached_tokens = delta.cached_tokens or state.cached_tokens
            state.finish_reason = delta.finish_reason
            touched.append(state)
        return touched

    async def _wake_in_batches(self, states: list[RequestState]) -> None:
        size = self.batch_notify_size
        for start in range(0, len(states), size):
            for state in states[start : start + size]:
                state.event.set()
            if start + size < len(states):
                await asyncio.sleep(0)
