"""Done-when of issue #25: the engine's greedy output on SmolLM2 in each GGUF type equals
transformers' greedy on the same file dequantized, and the chosen tokens' log-probs agree.

The engine keeps the weights in their block formats (its kernels quantize activations to int8
per block, as llama.cpp does); transformers dequantizes them to float32. So the tokens are
compared over each prompt's steps where the reference's top-1 beats its top-2 by at least
MIN_MARGIN (past a closer call, another choice is no error), and at least MIN_COMPARED of all
steps must be compared, so a test that compares little fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGMLQuantizationType

from engine.engine import Engine
from tests.engine.gguf.reference import compare, transformers_greedy
from tests.support.gguf_files import smollm2_gguf

pytestmark = pytest.mark.slow

Q = GGMLQuantizationType
TYPES = (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q5_K, Q.Q6_K)
MAX_NEW = 12
MIN_MARGIN = 0.2  # nats between the reference's top-1 and top-2
LOGPROB_TOLERANCE = 0.05  # nats, |ours - reference| of each compared chosen token
MIN_COMPARED = 0.5
# NOTE: prompts whose first steps have clear margins on the Q4_1 file (most steps > 0.2 nats).
QUESTIONS = [
    "Explain photosynthesis in one sentence.",
    "List three prime numbers.",
    "Give me a tip for learning to code.",
]
RAW_TEXTS = ["1, 2, 3, 4,", "The French Revolution began in", "The quick brown fox"]


def _prompts(engine: Engine) -> list[list[int]]:
    prompts = []
    for question in QUESTIONS:
        text = engine.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
        )
        prompts.append(engine.tokenizer.encode(str(text), add_special_tokens=False))
    return prompts + [engine.tokenizer.encode(t, add_special_tokens=False) for t in RAW_TEXTS]


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_greedy_equals_transformers_on_the_dequantized_file(qtype: GGMLQuantizationType, smollm2_dir: Path) -> None:
    gguf = smollm2_gguf(qtype, smollm2_dir)
    engine = Engine(str(gguf), max_total_tokens=2048, context_length=512)
    assert engine.runner.weights.format == "gguf"
    prompts = _prompts(engine)
    results = engine.generate(
        input_ids=prompts,
        sampling_params={"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True},
        return_logprob=True,
    )
    assert isinstance(results, list)
    comparison = compare(results, transformers_greedy(gguf, prompts, MAX_NEW), MIN_MARGIN)
    assert not comparison.mismatches, comparison.mismatches
    assert comparison.compared_steps >= MIN_COMPARED * comparison.total_steps, comparison
    assert comparison.max_logprob_error <= LOGPROB_TOLERANCE, comparison
    print(f"{qtype.name}: {comparison}")
