"""Every supported architecture, loaded from a checkpoint transformers wrote, generates exactly
what transformers generates (fp32, greedy); bad model directories fail with clear errors."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    PreTrainedModel,
    Qwen2Config,
    Qwen3Config,
)

from engine.config.architectures import SUPPORTED_ARCHITECTURES
from engine.core.errors import UnsupportedModelError
from engine.engine import Engine
from engine.layers.packed_linear import PackedLinear
from tests.engine.models.conftest import (
    TINY_PROMPTS,
    TINY_SHAPE,
    TOKENIZER_FILES,
    Reference,
    assert_matches,
    build_checkpoint,
    hf_greedy,
)

MAX_NEW = 12
PROMPTS = TINY_PROMPTS
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
WINDOW = 24  # longest prompt + MAX_NEW fits, so windowed and full attention agree

CASES: dict[str, tuple[type[PretrainedConfig], dict[str, Any]]] = {
    "llama": (LlamaConfig, {}),
    "llama-tied": (LlamaConfig, {"tie_word_embeddings": True}),
    "llama3-rope": (LlamaConfig, {"rope_scaling": LLAMA3_ROPE}),
    "llama-biases": (LlamaConfig, {"attention_bias": True, "mlp_bias": True}),
    "qwen2-bias": (Qwen2Config, {}),
    "qwen3-qk-norm": (Qwen3Config, {"head_dim": 32}),
    "mistral": (MistralConfig, {"sliding_window": None}),
    "mistral-window": (MistralConfig, {"sliding_window": WINDOW}),
}


@dataclass(frozen=True)
class Case:
    path: Path
    model: PreTrainedModel
    refs: list[Reference]
    engine: Engine


def _engine(path: Path, dtype: str = "float32") -> Engine:
    return Engine(str(path), max_total_tokens=4096, device="cpu", dtype=dtype)


def _case(path: Path, config: PretrainedConfig, tokenizer_dir: Path, **save_kwargs: Any) -> Case:
    model = build_checkpoint(path, config, tokenizer_dir, **save_kwargs)
    return Case(path, model, [hf_greedy(model, p, MAX_NEW) for p in PROMPTS], _engine(path))


def _assert_matches(engine: Engine, refs: list[Reference]) -> None:
    assert_matches(engine, PROMPTS, refs, MAX_NEW)


@pytest.fixture(scope="module", params=list(CASES))
def case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path
) -> Case:
    config_cls, overrides = CASES[request.param]
    path = tmp_path_factory.mktemp(request.param)
    return _case(path, config_cls(**TINY_SHAPE, **overrides), tokenizer_dir)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Case:
    return _case(tmp_path_factory.mktemp("llama"), LlamaConfig(**TINY_SHAPE), tokenizer_dir)


def test_greedy_matches_transformers(case: Case) -> None:
    _assert_matches(case.engine, case.refs)


def test_architecture_features_are_read(case: Case) -> None:
    """Guards the test itself: each case exercises the feature it is named for."""
    engine = case.engine
    mc = engine.runner.model_config
    raw = mc.raw
    assert mc.architecture == raw["architectures"][0] == type(case.model).__name__
    biased = bool(raw.get("attention_bias"))
    assert mc.attention_bias == (biased or mc.architecture == "Qwen2ForCausalLM")
    assert mc.o_proj_bias == biased and mc.mlp_bias == bool(raw.get("mlp_bias"))
    assert mc.qk_norm == (mc.architecture == "Qwen3ForCausalLM")
    config = case.model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    assert mc.head_dim == head_dim
    assert mc.rope.rope_type == raw["rope_parameters"]["rope_type"]
    # NOTE: the whole context, windowed or not (test_families runs past a window).
    assert engine.runner.context_length == TINY_SHAPE["max_position_embeddings"]
    keys = _checkpoint_keys(case.path)
    assert ("lm_head.weight" in keys) == (not mc.tie_word_embeddings)


def test_tied_and_untied_embeddings_differ(tmp_path: Path, tokenizer_dir: Path) -> None:
    """Same seed, only tie_word_embeddings differs: the engine must follow the flag."""
    tied = build_checkpoint(
        tmp_path / "tied", LlamaConfig(**TINY_SHAPE, tie_word_embeddings=True), tokenizer_dir
    )
    untied = build_checkpoint(tmp_path / "untied", LlamaConfig(**TINY_SHAPE), tokenizer_dir)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    assert not torch.equal(untied.lm_head.weight, untied.model.embed_tokens.weight)
    for path, model in ((tmp_path / "tied", tied), (tmp_path / "untied", untied)):
        # NOTE: the two heads differ (asserted above), so matching both references proves
        # the engine followed the flag.
        _assert_matches(_engine(path), [hf_greedy(model, p, MAX_NEW) for p in PROMPTS])


def test_sharded_checkpoint(tmp_path: Path, tokenizer_dir: Path, llama: Case) -> None:
    build_checkpoint(tmp_path, LlamaConfig(**TINY_SHAPE), tokenizer_dir, max_shard_size="100KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and {s.name for s in shards} == set(index["weight_map"].values())
    assert not (tmp_path / "model.safetensors").exists()
    # NOTE: same seed and config as the `llama` case, so its reference applies unchanged.
    _assert_matches(_engine(tmp_path), llama.refs)


# ---------------------------------------------------------------- bad model directories


def _checkpoint_keys(path: Path) -> set[str]:
    return {k for f in path.glob("*.safetensors") for k in load_file(f)}


def _copy_tokenizer(tokenizer_dir: Path, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, path / name)


def test_unknown_architecture_names_the_supported_ones(tmp_path: Path, tokenizer_dir: Path) -> None:
    _copy_tokenizer(tokenizer_dir, tmp_path)
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": 50257,
        "n_embd": 64,
        "n_head": 4,
        "n_layer": 2,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError) as err:
        _engine(tmp_path)
    message = str(err.value)
    assert "GPT2LMHeadModel" in message
    assert all(arch in message for arch in SUPPORTED_ARCHITECTURES)


@pytest.mark.parametrize(
    "missing",
    [
        "model.layers.1.self_attn.k_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
        "lm_head.weight",
    ],
)
def test_missing_tensor_is_named(tmp_path: Path, llama: Case, missing: str) -> None:
    shutil.copytree(llama.path, tmp_path, dirs_exist_ok=True)
    weights = load_file(tmp_path / "model.safetensors")
    del weights[missing]
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=missing.replace(".", r"\.")):
        _engine(tmp_path)


def test_unexpected_tensor_is_named(tmp_path: Path, llama: Case) -> None:
    shutil.copytree(llama.path, tmp_path, dirs_exist_ok=True)
    weights = load_file(tmp_path / "model.safetensors")
    weights["model.layers.0.self_attn.rel_pos.weight"] = torch.zeros(4)
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.rel_pos\.weight"):
        _engine(tmp_path)


def test_missing_config_json(tmp_path: Path, llama: Case) -> None:
    shutil.copytree(llama.path, tmp_path, dirs_exist_ok=True)
    (tmp_path / "config.json").unlink()
    with pytest.raises(UnsupportedModelError, match="config.json"):
        _engine(tmp_path)


# ---------------------------------------------------------------- dtypes


def test_float16_loads_and_generates(llama: Case) -> None:
    engine = _engine(llama.path, dtype="float16")
    assert engine.runner.dtype == torch.float16
    assert engine.runner.kv_pool.dtype == torch.float16
    assert {p.dtype for p in engine.runner.model.parameters()} == {torch.float16}
    _assert_generates(engine)


def test_bfloat16_on_cpu_is_bf16_linear_weights(llama: Case) -> None:
    """On CPU, bfloat16 is the linear layers' weights (the bf16 kernels); the rest stays fp32."""
    engine = _engine(llama.path, dtype="bfloat16")
    assert engine.runner.dtype == torch.float32
    assert engine.runner.kv_pool.dtype == torch.float32
    packed = [m for m in engine.runner.model.modules() if isinstance(m, PackedLinear)]
    assert packed and all("bf16" in m.kernel_path for m in packed), {m.kernel_path for m in packed}
    assert "bf16" in engine.runner.weights.kernel
    _assert_generates(engine)


def _assert_generates(engine: Engine) -> None:
    results = engine.generate(input_ids=PROMPTS, sampling_params=GREEDY, return_logprob=True)
    for result in results:
        assert len(result["output_ids"]) == MAX_NEW
        logprobs = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)


def test_auto_dtype_on_cpu_is_float32(tmp_path: Path, llama: Case) -> None:
    """Even when config.json declares bfloat16 (as most released checkpoints do)."""
    shutil.copytree(llama.path, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    engine = _engine(tmp_path, dtype="auto")
    assert engine.runner.model_config.config_dtype == torch.bfloat16
    assert engine.runner.dtype == torch.float32
    assert engine.runner.kv_pool.dtype == torch.float32
    _assert_matches(engine, llama.refs)


def test_dummy_kv_slot_starts_zeroed(llama: Case) -> None:
    """Padded decode rows read slot 0 under a -inf mask; garbage NaN there would leak through."""
    pool = llama.engine.runner.kv_pool
    for layer in range(pool.num_layers):
        assert not pool.k_buffer(layer)[0].any() and not pool.v_buffer(layer)[0].any()
