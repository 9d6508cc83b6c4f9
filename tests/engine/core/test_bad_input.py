"""Bad input raises a clear error and leaks nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.engine import Engine


@pytest.fixture(scope="module")
def short_context_engine(smollm2_dir: Path) -> Engine:
    return Engine(str(smollm2_dir), max_total_tokens=1024, context_length=128)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt": ""}, "prompt is empty"),
        ({"input_ids": []}, "prompt is empty"),
        ({"prompt": []}, "batch of prompts is empty"),
        ({"prompt": "hi", "input_ids": [1, 2]}, "exactly one of prompt or input_ids"),
        ({"input_ids": [1] * 200}, "context length is 128"),
        ({"input_ids": [1, 2, 10**9]}, "token ids in"),
        ({"prompt": "hi", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"prompt": "hi", "sampling_params": {"n": 0}}, "n"),
        ({"prompt": "hi", "sampling_params": {"temperature": -0.5}}, "temperature"),
        ({"prompt": "hi", "sampling_params": {"top_p": 0.0}}, "top_p"),
        ({"prompt": "hi", "sampling_params": {"top_p": 1.5}}, "top_p"),
        ({"prompt": "hi", "sampling_params": {"bogus": 1}}, "bogus"),
        ({"prompt": ["a", "b"], "sampling_params": [{}]}, "sampling_params for 2 prompts"),
        # NOTE: the second prompt is bad: the first must not be left queued.
        ({"input_ids": [[1, 2, 3], [1] * 200]}, "context length"),
    ],
)
def test_bad_input_is_refused_cleanly(short_context_engine: Engine, kwargs: dict, message: str) -> None:
    before = short_context_engine.memory_stats()
    with pytest.raises(ValueError, match=message):
        short_context_engine.generate(**kwargs)
    assert short_context_engine.scheduler.is_idle
    assert short_context_engine.memory_stats() == before


def test_max_new_tokens_zero_and_context_cap(short_context_engine: Engine) -> None:
    out = short_context_engine.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 0})
    assert out["output_ids"] == [] and out["meta_info"]["finish_reason"]["type"] == "length"
    capped = short_context_engine.generate(
        input_ids=[1] * 120, sampling_params={"temperature": 0, "max_new_tokens": 50, "ignore_eos": True}
    )
    assert capped["meta_info"]["completion_tokens"] == 8  # 120 + 8 == context length 128
    assert capped["meta_info"]["finish_reason"] == {"type": "length", "length": 8}


def test_stop_strings_are_trimmed(short_context_engine: Engine) -> None:
    ids = short_context_engine.tokenizer.encode("1, 2, 3, 4,", add_special_tokens=False)
    free = short_context_engine.generate(input_ids=ids, sampling_params={"temperature": 0, "max_new_tokens": 12})
    assert "7" in free["text"]
    stopped = short_context_engine.generate(
        input_ids=ids, sampling_params={"temperature": 0, "max_new_tokens": 12, "stop": ["7"]}
    )
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": "7"}
    assert stopped["text"] == free["text"][: free["text"].index("7")]
