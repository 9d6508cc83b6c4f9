"""Every supported MoE architecture, loaded from a checkpoint transformers wrote, computes the
logits transformers computes and generates the same greedy tokens (fp32), radix cache or not."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from transformers import PreTrainedModel

from engine.engine import Engine
from engine.models.llama import MLP
from engine.models.moe import SparseMoeBlock
from engine.runtime.decoder_forward_only import DecoderForwardOnly
from tests.engine.models.conftest import (
    TINY_PROMPTS,
    TOKENIZER_FILES,
    Reference,
    build_checkpoint,
    hf_greedy,
)
from tests.engine.moe.conftest import MOE_CASES

MAX_NEW = 8
PROMPTS = TINY_PROMPTS
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}


@dataclass(frozen=True)
class Case:
    path: Path
    model: PreTrainedModel
    refs: list[Reference]
    engine: Engine


def _engine(path: Path) -> Engine:
    return Engine(str(path), max_total_tokens=2048, device="cpu", dtype="float32")


@pytest.fixture(scope="module", params=list(MOE_CASES))
def case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path
) -> Case:
    path = tmp_path_factory.mktemp(request.param)
    model = build_checkpoint(path, MOE_CASES[request.param], tokenizer_dir)
    return Case(path, model, [hf_greedy(model, p, MAX_NEW) for p in PROMPTS], _engine(path))


def _hf_last_logprobs(model: PreTrainedModel, prompts: list[list[int]]) -> torch.Tensor:
    with torch.inference_mode():
        rows = [model(torch.tensor([p])).logits[0, -1] for p in prompts]
    return torch.log_softmax(torch.stack(rows).float(), dim=-1)


def _our_last_logprobs(engine: Engine, prompts: list[list[int]]) -> torch.Tensor:
    forward = DecoderForwardOnly(engine.runner, engine.scheduler.kv, is_embedding=False)
    logprobs = forward.score(prompts, list(range(engine.runner.model_config.vocab_size)))
    assert logprobs is not None
    return logprobs


def test_layers_follow_the_config(case: Case) -> None:
    """Guards the comparison: the same layers are MoE, the features are read."""
    hf_layers = case.model.model.layers
    ours = case.engine.runner.model.layers
    for hf_layer, layer in zip(hf_layers, ours, strict=True):
        is_moe = hasattr(hf_layer.mlp, "experts")
        assert isinstance(layer.mlp, SparseMoeBlock if is_moe else MLP)
        if is_moe:
            assert (layer.mlp.shared_expert is not None) == hasattr(hf_layer.mlp, "shared_expert")
    mc = case.engine.runner.model_config
    assert mc.moe is not None and mc.moe.top_k == 2
    assert mc.qk_norm == (mc.architecture == "Qwen3MoeForCausalLM")
    assert mc.attention_bias == (mc.architecture == "Qwen2MoeForCausalLM")


def test_logits_match_transformers(case: Case) -> None:
    """Whole last-position distributions of a batch of prompts, not just the argmax."""
    ours = _our_last_logprobs(case.engine, PROMPTS)
    torch.testing.assert_close(ours, _hf_last_logprobs(case.model, PROMPTS), atol=1e-4, rtol=0)


def test_greedy_matches_transformers(case: Case) -> None:
    case.engine.flush_cache()
    results = case.engine.generate(input_ids=PROMPTS, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(results, list)
    for result, ref in zip(results, case.refs, strict=True):
        assert result["output_ids"] == ref.output_ids
        ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-4)


def test_greedy_matches_transformers_on_a_cached_prefix(case: Case) -> None:
    """A prompt extending a finished request's prompt and output: its prefix comes from the
    radix cache, only the rest is prefilled, and the continuation still matches."""
    case.engine.flush_cache()
    first = case.engine.generate(input_ids=PROMPTS[2], sampling_params=GREEDY)
    assert isinstance(first, dict) and first["output_ids"] == case.refs[2].output_ids
    follow_up = PROMPTS[2] + case.refs[2].output_ids[:4] + [3000, 77, 1500]
    second = case.engine.generate(input_ids=follow_up, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(second, dict)
    assert second["meta_info"]["cached_tokens"] >= len(PROMPTS[2])
    ref = hf_greedy(case.model, follow_up, MAX_NEW)
    assert second["output_ids"] == ref.output_ids
    ours = [lp for lp, *_ in second["meta_info"]["output_token_logprobs"]]
    assert ours == pytest.approx(ref.logprobs, abs=1e-4)


def test_stacked_expert_checkpoint_loads(case: Case, tmp_path: Path) -> None:
    """transformers 5's in-memory layout (``mlp.experts.gate_up_proj`` stacked over experts)
    loads as well as the Hub's per-expert tensors that save_pretrained writes."""
    state = {k: v.contiguous() for k, v in case.model.state_dict().items()}
    assert any(k.endswith("mlp.experts.gate_up_proj") for k in state)
    save_file(state, str(tmp_path / "model.safetensors"))
    shutil.copy(case.path / "config.json", tmp_path / "config.json")
    for name in TOKENIZER_FILES:
        shutil.copy(case.path / name, tmp_path / name)
    assert "architectures" in json.loads((tmp_path / "config.json").read_text())
    torch.testing.assert_close(
        _our_last_logprobs(_engine(tmp_path), PROMPTS),
        _our_last_logprobs(case.engine, PROMPTS),
        atol=0,
        rtol=0,
    )
