"""Done-when of issue #25: the engine's greedy output on SmolLM2 in each GGUF type equals
transformers' greedy on the same file dequantized, and the chosen tokens' log-probs agree.

The engine keeps the weights in their block formats (its kernels may quantize activations
to int8 per block, as llama.cpp does); transformers dequantizes them to float32. So the two
may part only at a step where the reference's top-1 beat its top-2 by less than MIN_MARGIN;
up to there the log-probs agree within LOGPROB_TOLERANCE; and they must agree on at least
MIN_AGREED of all steps, so a test that compares little fails.

Tolerances: the kernels quantize each activation row to int8 per 32-value block, as llama.cpp
does. Doing the same to transformers' float32 model (its linear inputs, per block of 32)
moves SmolLM2's chosen-token log-probs by up to 0.32 nats (mean 0.01-0.04) on Q8_0 weights;
the engine measured up to 0.36 (Q4_1), 0.22 (Q8_0), 0.04 (BF16), 3e-5 (F32, F16: float
activations). A flip needs the two tokens' log-probs to move apart: seen at a margin of 0.65
(Q4_0). So the tokens may part where the reference's margin was under 1 nat, and the
log-probs agree within 0.5 nats per token and 0.06 on average.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType

from engine.engine import Engine
from tests.engine.gguf.reference import compare, file_weights, transformers_greedy
from tests.support.gguf_files import bundled_smollm2_gguf, smollm2_gguf

pytestmark = pytest.mark.slow

Q = GGMLQuantizationType
TYPES = (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q5_K, Q.Q6_K)
MAX_NEW = 12
MIN_MARGIN = 1.0  # nats between the reference's top-1 and top-2
LOGPROB_TOLERANCE = 0.5  # nats, |ours - reference| of each agreed chosen token
MEAN_LOGPROB_TOLERANCE = 0.06  # nats, the same on average
# NOTE: F32 and F16 layers multiply float activations: float32 round-off only.
FLOAT_TOLERANCE = {Q.F32: 1e-3, Q.F16: 1e-3}
MIN_AGREED = 0.5
# NOTE: prompts whose steps mostly have clear margins on the Q4_1 file.
QUESTIONS = [
    "Explain photosynthesis in one sentence.",
    "List three prime numbers.",
    "Give me a tip for learning to code.",
]
RAW_TEXTS = ["1, 2, 3, 4,", "The French Revolution began in", "The quick brown fox"]


def _prompts(engine: Engine) -> list[list[int]]:
    prompts = []
    for question in QUESTIONS:
        text = engine.tokenizer.render_chat([{"role": "user", "content": question}], add_generation_prompt=True)
        prompts.append(engine.tokenizer.encode(text, add_special_tokens=False))
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
    comparison = compare(results, transformers_greedy(gguf, prompts, MAX_NEW, base=smollm2_dir), MIN_MARGIN)
    assert not comparison.errors, comparison.errors
    assert comparison.agreed_steps >= MIN_AGREED * comparison.total_steps, comparison
    assert comparison.max_logprob_error <= FLOAT_TOLERANCE.get(qtype, LOGPROB_TOLERANCE), comparison
    assert comparison.mean_logprob_error <= MEAN_LOGPROB_TOLERANCE, comparison


def test_file_weights_equal_transformers_gguf_loader(smollm2_dir: Path) -> None:
    """The references above fill SmolLM2 with ``file_weights``; transformers' own GGUF loader
    gives the same float32 tensors for llama.cpp's own file (the bundled Q4_1: Q4_1 and Q8_0)."""
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf = bundled_smollm2_gguf()
    # NOTE: the loader reads the model only for its config and tensor names.
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    theirs = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    ours = file_weights(gguf)
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    for name, tensor in ours.items():
        assert torch.equal(tensor, torch.as_tensor(theirs[name]).float()), name
