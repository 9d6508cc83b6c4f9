"""The overlap scheduler (--enable-overlap-schedule) changes no token: stop conditions,
seeded sampling with penalties, a grammar alongside, n > 1, the radix cache under chunked prefill and a tight KV
pool, and aborts of a request whose step is in flight, all as the plain scheduler gives
them, with every KV slot back in the pool or the tree afterwards. Greedy equality with
transformers both ways is in test_greedy_matches_transformers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.engine import Engine
from tests.engine.core.conftest import chat
from tests.engine.core.test_radix_cache_reuse import _assert_pool_free

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chunked_overlap_engine(smollm2_dir: Path) -> Engine:
    """Overlap on, 64-token prefill chunks and a KV pool that holds only a few requests at once."""
    return Engine(str(smollm2_dir), max_total_tokens=600, chunked_prefill_size=64, enable_overlap_schedule=True)


def _summary(results: Any) -> list[tuple[Any, ...]]:
    return [
        (r["output_ids"], r["text"], r["meta_info"]["finish_reason"], r["meta_info"].get("output_token_logprobs"))
        for r in results
    ]


def test_stop_conditions_and_sampling_equal_the_plain_scheduler(smol_engine: Engine, smol_overlap_engine: Engine) -> None:
    tok = smol_engine.tokenizer
    prompts = [
        chat(smol_engine, "What is the capital of France?"),  # ends on EOS
        tok.encode("Once upon a time", add_special_tokens=False),  # max_new_tokens
        tok.encode("The capital of France is", add_special_tokens=False),  # a stop string
        chat(smol_engine, "Describe the moon."),  # seeded sampling with penalties
        tok.encode("1, 2, 3,", add_special_tokens=False),  # one token
        tok.encode("Once upon a time", add_special_tokens=False),  # a stop token id
        chat(smol_engine, "Pick a number."),  # a grammar: its steps resolve at once
    ]
    params = [
        {"temperature": 0, "max_new_tokens": 16},
        {"temperature": 0, "max_new_tokens": 7},
        {"temperature": 0, "max_new_tokens": 16, "stop": ["."]},
        {"temperature": 0.9, "seed": 11, "max_new_tokens": 8, "frequency_penalty": 0.6, "presence_penalty": 0.3},
        {"temperature": 0, "max_new_tokens": 1},
        {"temperature": 0, "max_new_tokens": 16, "stop_token_ids": [2240]},
        {"temperature": 0, "max_new_tokens": 16, "regex": "[0-9]{2,3}"},
    ]
    for engine in (smol_engine, smol_overlap_engine):
        engine.flush_cache()
    plain = smol_engine.generate(input_ids=prompts, sampling_params=params, return_logprob=True)
    overlap = smol_overlap_engine.generate(input_ids=prompts, sampling_params=params, return_logprob=True)
    assert _summary(overlap) == _summary(plain)
    reasons = [r["meta_info"]["finish_reason"]["type"] for r in overlap]
    assert reasons == ["stop", "length", "stop", "length", "length", "stop", "stop"]
    _assert_pool_free(smol_overlap_engine)

    samples = {"n": 2, "seed": 5, "temperature": 0.8, "max_new_tokens": 6, "ignore_eos": True}
    ids = chat(smol_engine, "Tell me a short story about a cat.")
    plain_n = smol_engine.generate(input_ids=ids, sampling_params=samples)
    overlap_n = smol_overlap_engine.generate(input_ids=ids, sampling_params=samples)
    assert _summary(overlap_n) == _summary(plain_n)
    _assert_pool_free(smol_overlap_engine)


def test_radix_cache_chunked_prefill_and_a_tight_pool(smol_engine: Engine, chunked_overlap_engine: Engine) -> None:
    tok = smol_engine.tokenizer
    prefix = tok.encode("A bakery opens at seven and sells bread, croissants and cakes. " * 11, add_special_tokens=False)
    assert len(prefix) > 2 * 64
    questions = ["When do you open?", "Do you sell cakes?", "What is sold?", "Is there bread?"]
    prompts = [prefix + tok.encode(q, add_special_tokens=False) for q in questions]
    params = {"temperature": 0, "max_new_tokens": 16}
    smol_engine.flush_cache()
    expected = [r["output_ids"] for r in smol_engine.generate(input_ids=prompts, sampling_params=params)]

    engine = chunked_overlap_engine
    first = engine.generate(input_ids=prompts[0], sampling_params=params)
    assert first["output_ids"] == expected[0]
    # NOTE: four ~175-token prompts with their reservations do not fit 600 slots at once.
    together = engine.generate(input_ids=prompts, sampling_params=params)
    assert [r["output_ids"] for r in together] == expected
    assert all(r["meta_info"]["cached_tokens"] >= len(prefix) - 1 for r in together)
    _assert_pool_free(engine)


def test_abort_while_its_step_is_in_flight(smol_engine: Engine, smol_overlap_engine: Engine) -> None:
    greedy = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
    ids = [chat(smol_engine, "Describe the sea."), chat(smol_engine, "Describe a forest.")]
    expected = smol_engine.generate(input_ids=ids[1], sampling_params=greedy)
    smol_overlap_engine.flush_cache()
    scheduler = smol_overlap_engine.scheduler
    params = smol_overlap_engine._params(greedy, 2)
    first, second = (scheduler.new_request(f"r{i}", p, s) for i, (p, s) in enumerate(zip(ids, params)))
    scheduler.add_request(first)
    scheduler.add_request(second)
    for _ in range(4):
        scheduler.step()
    assert scheduler.overlap is not None and scheduler.overlap.in_flight is not None
    assert scheduler.abort("r0")
    assert not scheduler.abort("r0") and not scheduler.abort("unknown")
    deltas = []
    while not scheduler.is_idle:
        deltas += scheduler.step().deltas
    assert all(d.rid == "r1" for d in deltas)
    assert second.output_ids == expected["output_ids"]
    _assert_pool_free(smol_overlap_engine)
