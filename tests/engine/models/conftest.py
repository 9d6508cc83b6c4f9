"""Tiny random-weight Hugging Face checkpoints, written by transformers itself, for model tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    PretrainedConfig,
    PreTrainedModel,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# NOTE: different lengths so a batch mixes prefill sizes; small ids are real tokens of
# SmolLM2's tokenizer and in range for every tiny vocab.
TINY_PROMPTS: list[list[int]] = [
    [17, 305, 42],
    [9, 1204, 88, 3071, 5, 640, 211],
    [700, 31, 2, 4095, 123, 55, 999, 8, 2048, 77, 13],
]

# NOTE: vocab equals SmolLM2's so its tokenizer fits; the rest is as small as GQA allows.
TINY_SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    # NOTE: 0.02 (the default) makes attention almost uniform and logits almost flat;
    # wider weights make position (RoPE) matter and keep top-1 margins far above fp noise.
    "initializer_range": 0.1,
}


@dataclass(frozen=True)
class Reference:
    """transformers' greedy continuation of one prompt (on the model's device)."""

    output_ids: list[int]
    logprobs: list[float]  # log-prob of each chosen token
    first_logprobs: torch.Tensor  # [vocab] log-softmax of the first step


def build_checkpoint(
    path: Path, config: PretrainedConfig, tokenizer_dir: Path, seed: int = 0, **save_kwargs: Any
) -> PreTrainedModel:
    """Saves a seeded random model plus SmolLM2's tokenizer into ``path``; returns the model."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    # NOTE: transformers initialises norms to ones and biases to zeros, which would let a
    # loader that drops them (Qwen2 q/k/v bias, Qwen3 q/k norm) pass; randomise them.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif name.endswith(".bias"):
                param.copy_(0.5 * torch.randn_like(param))
    model.save_pretrained(str(path), **save_kwargs)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, path / name)
    return model


def hf_greedy(model: PreTrainedModel, prompt: list[int], max_new_tokens: int) -> Reference:
    # NOTE: no eos, like the engine's ignore_eos: the argmax may be the eos id.
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        eos_token_id=None,
    )
    ids = torch.tensor([prompt], device=model.device)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    new = out.sequences[0, len(prompt) :].tolist()
    steps = [torch.log_softmax(step[0].float(), -1) for step in out.logits]
    for i, step in enumerate(steps):
        top2 = step.topk(2).values
        # NOTE: a near-tie would make the comparison depend on fp rounding, not on the
        # engine being right; fail loudly so the seed or prompt gets changed instead.
        assert top2[0] - top2[1] > 1e-3, f"near-tie at step {i}: choose another seed"
    return Reference(new, [s[t].item() for s, t in zip(steps, new)], steps[0].cpu())


def assert_matches(engine: Any, prompts: list[list[int]], refs: list[Reference], max_new: int) -> None:
    """The engine's greedy continuations of ``prompts`` equal transformers' token for token, and
    their log-probs (of each chosen token, and the first step's top 5) agree within 1e-4."""
    greedy = {"temperature": 0, "max_new_tokens": max_new, "ignore_eos": True}
    results = engine.generate(input_ids=prompts, sampling_params=greedy, return_logprob=True, top_logprobs_num=5)
    assert isinstance(results, list) and len(results) == len(refs)
    for result, ref in zip(results, refs):
        assert result["output_ids"] == ref.output_ids
        meta = result["meta_info"]
        ours = [lp for lp, *_ in meta["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-4)
        # NOTE: the first step's top-5 checks the prefill logits beyond the argmax; by value,
        # so a near-tie inside the top-5 cannot make the test flaky.
        fifth = ref.first_logprobs.topk(5).values[-1].item()
        top = meta["output_top_logprobs"][0]
        assert len(top) == 5 and len({tok for _, tok, _ in top}) == 5
        for lp, tok, _ in top:
            assert lp == pytest.approx(ref.first_logprobs[tok].item(), abs=1e-4)
            assert lp >= fifth - 1e-4


@pytest.fixture(scope="session")
def tokenizer_dir(smollm2_dir: Path) -> Path:
    return smollm2_dir


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Tiny matmuls gain nothing from threads, and on a busy machine OpenMP's spin-waiting
    makes each one ~1000x slower; run this package single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
