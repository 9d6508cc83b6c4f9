"""The one-call decode stack (models/quantized_decode_stack.py) computes what the Python
decoder layers compute, bit for bit: the same tokens and log-probs, on a Qwen2 GGUF (q/k/v
biases, grouped KV heads) at a batch of several requests; models it does not run (Qwen3's q/k
norms) decode through the Python layers."""

from __future__ import annotations

from typing import Any

from gguf import GGMLQuantizationType

from engine.engine import Engine
from engine.models.llama import LlamaFamilyForCausalLM
from engine.models.quantized_decode_stack import QuantizedDecodeStack
from tests.support.gguf_files import tiny_gguf

PROMPTS = [[1, 504, 2365, 3421, 30], [42, 7, 9001, 12, 33, 5], [4093, 314, 2253]]
PARAMS = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}


def _generate(engine: Engine) -> list[Any]:
    results = engine.generate(input_ids=PROMPTS, sampling_params=PARAMS, return_logprob=True)
    assert isinstance(results, list)
    return [(r["output_ids"], r["meta_info"]["output_token_logprobs"]) for r in results]


def _model(engine: Engine) -> LlamaFamilyForCausalLM:
    model = engine.runner.model
    assert isinstance(model, LlamaFamilyForCausalLM)
    return model


def test_decode_stack_equals_the_python_layers() -> None:
    engine = Engine(
        str(tiny_gguf("qwen2", GGMLQuantizationType.Q4_K)),
        max_total_tokens=512, context_length=128, disable_radix_cache=True,
    )
    stacked = _generate(engine)
    model = _model(engine)
    assert isinstance(model.decode_stack, QuantizedDecodeStack)
    model.decode_stack = None
    assert _generate(engine) == stacked


def test_qk_norm_models_decode_through_the_python_layers() -> None:
    engine = Engine(str(tiny_gguf("qwen3", GGMLQuantizationType.Q5_K)), max_total_tokens=512, context_length=128)
    _generate(engine)
    assert _model(engine).decode_stack is None
