"""The radix cache reuses shared prefixes and never changes an answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.engine import Engine

pytestmark = pytest.mark.slow

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}


def _assert_pool_free(engine: Engine) -> None:
    stats = engine.memory_stats()
    assert engine.scheduler.is_idle
    assert stats["radix_protected_tokens"] == 0
    assert stats["free_slots"] + stats["radix_cache_tokens"] == stats["max_total_tokens"]
    assert stats["free_request_slots"] == engine.config.max_running_requests
    assert engine.flush_cache()
    stats = engine.memory_stats()
    assert stats["free_slots"] == stats["max_total_tokens"] and stats["radix_cache_tokens"] == 0


def _long_prefix(engine: Engine) -> list[int]:
    text = (
        "You are a helpful assistant for a small bakery. The bakery opens at seven, sells bread, "
        "croissants and cakes, and closes at six. Answer customers politely and briefly. "
    ) * 5
    return engine.tokenizer.encode(text, add_special_tokens=False)


def test_shared_prefix_is_cached_and_answer_unchanged(smol_engine: Engine) -> None:
    prefix = _long_prefix(smol_engine)
    assert len(prefix) > 150
    ask = lambda q: prefix + smol_engine.tokenizer.encode(q, add_special_tokens=False)
    smol_engine.flush_cache()
    uncached = smol_engine.generate(input_ids=ask("When do you open?"), sampling_params=GREEDY)
    assert uncached["meta_info"]["cached_tokens"] == 0

    smol_engine.flush_cache()
    smol_engine.generate(input_ids=ask("Do you sell cakes?"), sampling_params=GREEDY)
    cached = smol_engine.generate(input_ids=ask("When do you open?"), sampling_params=GREEDY)
    assert cached["meta_info"]["cached_tokens"] >= len(prefix) - 1
    assert cached["output_ids"] == uncached["output_ids"]
    _assert_pool_free(smol_engine)


def test_prefix_is_shared_while_its_first_request_still_decodes(smol_engine: Engine) -> None:
    """A prompt's KV enters the tree right after its prefill, not when its request ends."""
    prefix = _long_prefix(smol_engine)
    ask = lambda q: prefix + smol_engine.tokenizer.encode(q, add_special_tokens=False)
    smol_engine.flush_cache()
    expected = smol_engine.generate(input_ids=ask("Do you sell cakes?"), sampling_params=GREEDY)
    smol_engine.flush_cache()

    scheduler = smol_engine.scheduler
    params = smol_engine._params(GREEDY, 1)[0]
    scheduler.add_request(scheduler.new_request("first", ask("When do you open?"), params))
    scheduler.step()
    assert [r.rid for r in scheduler.decode.running] == ["first"]
    second = scheduler.new_request("second", ask("Do you sell cakes?"), params)
    scheduler.add_request(second)
    while not scheduler.is_idle:
        scheduler.step()
    assert second.cached_tokens >= len(prefix) - 1
    assert second.output_ids == expected["output_ids"]
    _assert_pool_free(smol_engine)


def test_reset_empties_the_tree(smol_engine: Engine) -> None:
    ids = _long_prefix(smol_engine)
    smol_engine.generate(input_ids=ids, sampling_params=GREEDY)
    assert smol_engine.memory_stats()["radix_cache_tokens"] >= len(ids)
    assert smol_engine.flush_cache()
    again = smol_engine.generate(input_ids=ids, sampling_params=GREEDY)
    assert again["meta_info"]["cached_tokens"] == 0


def test_flush_refused_while_busy(smol_engine: Engine) -> None:
    scheduler = smol_engine.scheduler
    req = scheduler.new_request("busy", _long_prefix(smol_engine), smol_engine._params(GREEDY, 1)[0])
    scheduler.add_request(req)
    assert not smol_engine.flush_cache()
    assert scheduler.abort("busy")
    assert smol_engine.flush_cache()


def test_abort_mid_generation_frees_everything(smol_engine: Engine) -> None:
    scheduler = smol_engine.scheduler
    params = smol_engine._params({"temperature": 0, "max_new_tokens": 50, "ignore_eos": True}, 1)[0]
    for i in range(3):
        scheduler.add_request(scheduler.new_request(f"r{i}", _long_prefix(smol_engine)[i:], params))
    for _ in range(4):
        scheduler.step()
    assert len(scheduler.decode.running) == 3
    assert all(scheduler.abort(f"r{i}") for i in range(3))
    assert not scheduler.abort("r0")
    _assert_pool_free(smol_engine)


def test_small_pool_serves_many_requests_correctly(smollm2_dir: Path, smol_engine: Engine) -> None:
    """20 requests of ~160 tokens (4x the pool) through a 768-token pool: all finish, all correct."""
    tok = smol_engine.tokenizer
    topics = ["rivers", "mountains", "volcanoes", "deserts", "forests"]
    prompts = []
    for i in range(20):
        base = f"Here is a long lesson about {topics[i % 5]}. " + "It covers facts, history and science. " * 16
        prompts.append(tok.encode(base + f"Question number {i}: what is interesting?", add_special_tokens=False))
    assert all(140 <= len(p) <= 180 for p in prompts)
    params = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}

    reference = Engine(str(smollm2_dir), max_total_tokens=16384, disable_radix_cache=True)
    expected = [r["output_ids"] for r in reference.generate(input_ids=prompts, sampling_params=params)]
    del reference

    small = Engine(str(smollm2_dir), max_total_tokens=768, chunked_prefill_size=256)
    results = small.generate(input_ids=prompts, sampling_params=params)
    assert [r["output_ids"] for r in results] == expected
    assert any(r["meta_info"]["cached_tokens"] > 100 for r in results)
    _assert_pool_free(small)
