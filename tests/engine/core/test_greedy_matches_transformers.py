"""The engine's greedy tokens and log-probs equal transformers' on the same weights (fp32), with
the overlap scheduler off and on."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel

from engine.engine import Engine
from tests.engine.core.conftest import chat
from tests.support.batched_greedy import greedy_in_one_batch

pytestmark = pytest.mark.slow

MAX_NEW = 24
PAD = 2  # SmolLM2's pad and end-of-turn token

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "List three prime numbers.",
    "Who wrote Romeo and Juliet?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 7?",
    "Give me a tip for learning to code.",
]
RAW_TEXTS = [
    "Once upon a time",
    "def fibonacci(n):",
    "The quick brown fox",
    "1, 2, 3, 4,",
    "Hello",
    "import numpy as np\n",
    "The French Revolution began in",
    "Q: What color is the sky?\nA:",
    "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n",
    (
        "In mathematics, a group is a set equipped with an operation that combines any two elements "
        "to form a third element while being associative and having an identity element and inverse "
        "elements. For example, the integers with the addition operation form a group. The concept"
    ),
    "A",
    "Roses are red, violets are blue,",
]


def _prompts(engine: Engine) -> list[list[int]]:
    prompts = [chat(engine, q) for q in QUESTIONS]
    prompts += [engine.tokenizer.encode(t, add_special_tokens=False) for t in RAW_TEXTS]
    assert len(prompts) >= 20
    return prompts


@pytest.fixture(scope="module")
def reference(smol_engine: Engine, hf_smol: PreTrainedModel) -> list[tuple[list[int], list[float]]]:
    """transformers' greedy continuation and each chosen token's log-prob, prompt by prompt."""
    rows = greedy_in_one_batch(hf_smol, _prompts(smol_engine), MAX_NEW, pad=PAD)
    return [
        (row.ids, [torch.log_softmax(step.float(), -1)[tok].item() for step, tok in zip(row.logits, row.ids)])
        for row in rows
    ]


def _check(result: dict, ref: tuple[list[int], list[float]]) -> None:
    ids, logprobs = ref
    assert result["output_ids"] == ids
    ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
    assert ours == pytest.approx(logprobs, abs=1e-3)


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap-schedule"])
def test_batched_greedy_equals_transformers(overlap: bool, request: pytest.FixtureRequest, reference: list) -> None:
    engine: Engine = request.getfixturevalue("smol_overlap_engine" if overlap else "smol_engine")
    results = engine.generate(
        input_ids=_prompts(engine),
        sampling_params={"temperature": 0, "max_new_tokens": MAX_NEW},
        return_logprob=True,
    )
    assert isinstance(results, list) and len(results) == len(reference)
    for result, ref in zip(results, reference):
        _check(result, ref)


def test_single_greedy_equals_transformers(smol_engine: Engine, reference: list) -> None:
    smol_engine.flush_cache()
    prompts = _prompts(smol_engine)
    for i in (0, 3, 8, 17, 19):
        result = smol_engine.generate(
            input_ids=prompts[i],
            sampling_params={"temperature": 0, "max_new_tokens": MAX_NEW},
            return_logprob=True,
        )
        _check(result, reference[i])


def test_france_answer(smol_engine: Engine) -> None:
    result = smol_engine.generate(
        input_ids=chat(smol_engine, "What is the capital of France?"),
        sampling_params={"temperature": 0, "max_new_tokens": 20},
    )
    assert result["text"] == "The capital of France is Paris."
    assert result["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2}
