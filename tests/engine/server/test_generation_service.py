"""The generation service's one way to consume output: per-sample deltas, gathered whole, aborted.

No engine runs here: a stand-in TokenizerManager records what is released, and the test
writes the request states the receive loop would write.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from engine.ipc.finish_reason import FinishReason
from engine.server.generation.service import Generation, SampleDelta
from engine.server.http_errors import ApiError
from engine.server.tokenizer_manager import RequestState, TokenizerManager

STOP = FinishReason("stop", matched=2)


class RecordingTokenizerManager:
    def __init__(self) -> None:
        self.released: list[list[str]] = []

    async def release(self, states: list[RequestState]) -> None:
        self.released.append([s.rid for s in states])


def _output(state: RequestState, text: str, ids: list[int], finish: FinishReason | None = None) -> None:
    state.text += text
    state.output_ids += ids
    state.logprobs += [-0.5] * len(ids)
    state.completion_tokens = len(state.output_ids)
    state.finish_reason = finish
    state.event.set()


def _generation(tm: RecordingTokenizerManager, *states: RequestState) -> Generation:
    fake: TokenizerManager = tm  # type: ignore[assignment]
    return Generation(fake, [[1, 2, 3]], [list(states)])


def test_deltas_carry_only_what_is_new_and_output_that_arrives_while_one_is_held() -> None:
    async def run() -> tuple[list[SampleDelta], list[list[str]]]:
        tm = RecordingTokenizerManager()
        state = RequestState("a", prompt_tokens=3)
        generation = _generation(tm, state)
        got = []
        _output(state, "Hel", [10])
        async with aclosing(generation.deltas()) as deltas:
            async for delta in deltas:
                got.append(delta)
                if len(got) == 1:
                    # NOTE: the rest arrives, finish included, before the consumer asks again.
                    _output(state, "lo", [11], STOP)
        return got, tm.released

    got, released = asyncio.run(run())
    assert [(d.text, d.text_offset, d.token_ids, d.finish_reason) for d in got] == [
        ("Hel", 0, [10], None),
        ("lo", 3, [11], STOP),
    ]
    assert got[1].logprobs == [-0.5]
    assert released == [["a"]]


def test_results_gather_every_sample_and_usage_counts_the_prompt_once() -> None:
    async def run() -> Generation:
        tm = RecordingTokenizerManager()
        first, second = RequestState("b-0", prompt_tokens=3), RequestState("b-1", prompt_tokens=3)
        generation = _generation(tm, first, second)
        _output(first, "one", [5], STOP)
        _output(second, "two", [6, 7], STOP)
        second.cached_tokens = 2
        await generation.results()
        return generation

    generation = asyncio.run(run())
    assert [s.text for s in generation.samples] == ["one", "two"]
    usage = generation.usage()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (3, 3, 2)


def test_results_raise_the_first_failed_samples_error() -> None:
    async def run() -> None:
        state = RequestState("c", prompt_tokens=3)
        generation = _generation(RecordingTokenizerManager(), state)
        state.error = "the grammar failed to compile"
        state.event.set()
        await generation.results()

    with pytest.raises(ApiError) as err:
        asyncio.run(run())
    assert (err.value.status, err.value.message) == (400, "the grammar failed to compile")


def test_a_cancelled_consumer_releases_the_samples_once() -> None:
    async def run() -> list[list[str]]:
        tm = RecordingTokenizerManager()
        generation = _generation(tm, RequestState("d", prompt_tokens=3))
        waiting = asyncio.ensure_future(generation.results())
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await generation.abort()
        return tm.released

    assert asyncio.run(run()) == [["d"]]
