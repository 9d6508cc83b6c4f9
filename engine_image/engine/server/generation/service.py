"""Submit prompts, then consume their samples' output one way: a stream of per-sample deltas.

A non-streaming caller gathers the whole result with ``Generation.results``, which drains
the same stream. Leaving the stream early (client gone, task cancelled, an error) aborts
the unfinished samples in the scheduler, so their slots and KV are freed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from engine.ipc.finish_reason import FinishReason
from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request
from engine.server.tokenizer_manager import RequestState, TokenizerManager

TopLogprobs = list[list[tuple[float, int]]]  # per token: (logprob, token id) of the alternatives


@dataclass(frozen=True)
class SampleDelta:
    """What one sample gained since its previous delta (empty text and tokens at a bare finish)."""

    index: int  # the sample's position in ``Generation.samples``
    text: str
    text_offset: int  # characters of the sample's text before ``text``
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: TopLogprobs
    finish_reason: FinishReason | None
    error: str | None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None or self.error is not None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int  # each prompt counted once, however many samples it has
    completion_tokens: int
    cached_tokens: int


class Sample:
    """One sample's output so far (read-only), and the prompt it continues."""

    def __init__(self, state: RequestState, prompt_ids: list[int]) -> None:
        self._state = state
        self.prompt_ids = prompt_ids

    @property
    def rid(self) -> str:
        return self._state.rid

    @property
    def text(self) -> str:
        return self._state.text

    @property
    def token_ids(self) -> list[int]:
        return self._state.output_ids

    @property
    def logprobs(self) -> list[float]:
        return self._state.logprobs

    @property
    def top_logprobs(self) -> TopLogprobs:
        return self._state.top_logprobs

    @property
    def finish_reason(self) -> FinishReason | None:
        return self._state.finish_reason

    @property
    def error(self) -> str | None:
        return self._state.error

    @property
    def completion_tokens(self) -> int:
        return self._state.completion_tokens

    @property
    def cached_tokens(self) -> int:
        return self._state.cached_tokens

    @property
    def seconds_since_submit(self) -> float:
        return time.perf_counter() - self._state.created


class Generation:
    """The samples of one or more prompts submitted together (``params.n`` per prompt)."""

    def __init__(self, tm: TokenizerManager, prompts: list[list[int]], states: list[list[RequestState]]) -> None:
        """``states[i]`` are the samples of ``prompts[i]``."""
        self._tm = tm
        self._prompts = prompts
        self._states = [state for samples in states for state in samples]
        self._released = False
        self.samples = [Sample(state, ids) for ids, samples in zip(prompts, states) for state in samples]

    async def deltas(self) -> AsyncGenerator[SampleDelta, None]:
        """Each sample's new output as it arrives, until every sample finished.

        NOTE: a client that leaves cancels its handler (``ClientDisconnectMiddleware``); the
        ``finally`` here then aborts what is unfinished.
        """
        sent_chars = [0] * len(self._states)
        sent_tokens = [0] * len(self._states)
        index = {id(state): i for i, state in enumerate(self._states)}
        remaining = list(self._states)
        try:
            while remaining:
                waiters = {asyncio.ensure_future(s.event.wait()): s for s in remaining}
                try:
                    done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
                for waiter in done:
                    state = waiters[waiter]
                    state.event.clear()
                    i = index[id(state)]
                    delta = SampleDelta(
                        index=i,
                        text=state.text[sent_chars[i] :],
                        text_offset=sent_chars[i],
                        token_ids=state.output_ids[sent_tokens[i] :],
                        logprobs=state.logprobs[sent_tokens[i] :],
                        top_logprobs=state.top_logprobs[sent_tokens[i] :],
                        finish_reason=state.finish_reason,
                        error=state.error,
                    )
                    sent_chars[i], sent_tokens[i] = len(state.text), len(state.output_ids)
                    # NOTE: decided on the delta, not the state: output may arrive while the
                    # consumer holds this delta, and it must still come as a later delta.
                    if delta.finished:
                        remaining.remove(state)
                    yield delta
        finally:
            await self.abort()

    async def results(self) -> list[Sample]:
        """Every sample whole; a 400 with the first failed sample's error."""
        async with aclosing(self.deltas()) as deltas:
            async for _ in deltas:
                pass
        errors = [s.error for s in self.samples if s.error]
        if errors:
            raise ApiError(400, errors[0])
        return self.samples

    async def abort(self) -> None:
        """Aborts the unfinished samples and forgets them all (once; later calls do nothing)."""
        if not self._released:
            self._released = True
            await self._tm.release(self._states)

    def usage(self) -> Usage:
        return Usage(
            prompt_tokens=sum(len(ids) for ids in self._prompts),
            completion_tokens=sum(s.completion_tokens for s in self.samples),
            cached_tokens=max((s.cached_tokens for s in self.samples), default=0),
        )


async def submit(
    ctx: ServerContext,
    prompts: list[list[int]],
    params: list[SamplingParams],
    return_logprob: bool = False,
    top_logprobs_num: int = 0,
    rids: list[str | None] | None = None,
) -> Generation:
    """Submits each prompt with its params (and request id, when given); a 400 for a request
    id already in use, after aborting what was already submitted."""
    tm = ctx.tokenizer_manager
    states: list[list[RequestState]] = []
    for ids, prompt_params, rid in zip(prompts, params, rids or [None] * len(prompts), strict=True):
        try:
            states.append(await tm.submit(ids, prompt_params, return_logprob, top_logprobs_num, rid))
        except ValueError as err:
            await tm.release([state for samples in states for state in samples])
            raise bad_request(str(err)) from None
    return Generation(tm, prompts, states)

