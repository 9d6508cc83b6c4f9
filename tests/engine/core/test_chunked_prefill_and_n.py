"""Chunked prefill does not change outputs; n > 1 shares the prompt and is reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.engine import Engine
from tests.engine.core.conftest import chat

pytestmark = pytest.mark.slow


def test_chunked_prefill_equals_unchunked(smollm2_dir: Path, smol_engine: Engine) -> None:
    tok = smol_engine.tokenizer
    long = tok.encode("A story about a lighthouse keeper and the sea. " * 30, add_special_tokens=False)
    short = chat(smol_engine, "Name three colours.")
    params = {"temperature": 0, "max_new_tokens": 16}
    smol_engine.flush_cache()
    expected = [r["output_ids"] for r in smol_engine.generate(input_ids=[long, short], sampling_params=params)]

    chunked = Engine(str(smollm2_dir), max_total_tokens=4096, chunked_prefill_size=64)
    assert len(long) > 4 * 64
    got = chunked.generate(input_ids=[long, short], sampling_params=params)
    assert [r["output_ids"] for r in got] == expected


def test_n2_with_seed_is_reproducible_and_shares_prompt(smol_engine: Engine) -> None:
    ids = chat(smol_engine, "Tell me a short story about a cat.")
    params = {"n": 2, "seed": 1234, "temperature": 0.9, "max_new_tokens": 20, "ignore_eos": True}
    smol_engine.flush_cache()
    first = smol_engine.generate(input_ids=ids, sampling_params=params)
    second = smol_engine.generate(input_ids=ids, sampling_params=params)
    assert isinstance(first, list) and len(first) == 2
    assert [r["output_ids"] for r in first] == [r["output_ids"] for r in second]
    assert first[0]["output_ids"] != first[1]["output_ids"]  # distinct seeds per sample
    # Both samples reuse the prompt's KV, computed once by the hidden prefill request.
    assert all(r["meta_info"]["cached_tokens"] >= len(ids) - 1 for r in first)


def test_seeded_sampling_independent_of_batch(smol_engine: Engine) -> None:
    ids = chat(smol_engine, "Describe the moon.")
    params = {"seed": 7, "temperature": 1.0, "top_p": 0.9, "max_new_tokens": 16, "ignore_eos": True}
    alone = smol_engine.generate(input_ids=ids, sampling_params=params)
    other = chat(smol_engine, "Describe the sun.")
    together = smol_engine.generate(
        input_ids=[other, ids], sampling_params=[{"temperature": 0.7, "max_new_tokens": 5}, params]
    )
    assert together[1]["output_ids"] == alone["output_ids"]
