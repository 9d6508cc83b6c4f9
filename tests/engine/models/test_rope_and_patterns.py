"""RoPE yarn and longrope against transformers' own functions; which layers slide, and the
rotary bases of Gemma 3, read from config.json as the Hub has them (before transformers 5
wrote ``layer_types`` and per-type ``rope_parameters``); what stays unsupported is refused
in one line that names it."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from transformers import Gemma2Config, Gemma3TextConfig, LlamaConfig, Phi3Config, Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from engine.config.model_config import ModelConfig
from engine.config.rope_config import rope_config
from engine.core.errors import UnsupportedModelError
from engine.layers.rotary import RotaryEmbedding, attention_factor, inverse_frequencies

SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "max_position_embeddings": 512}
HEAD_DIM = 16
SHORT = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8]
LONG = [1.0, 1.5, 2.4, 3.9, 6.0, 9.0, 13.0, 18.0]
YARN: dict[str, dict[str, Any]] = {
    "plain": {"factor": 4.0, "original_max_position_embeddings": 128},
    "mscale": {"factor": 8.0, "original_max_position_embeddings": 64, "mscale": 0.707, "mscale_all_dim": 0.707},
    "attention-factor": {"factor": 4.0, "original_max_position_embeddings": 128, "attention_factor": 1.3},
    "no-truncate": {"factor": 4.0, "original_max_position_embeddings": 128, "truncate": False, "beta_fast": 16},
}


@pytest.mark.parametrize("params", list(YARN.values()), ids=list(YARN))
def test_yarn_matches_transformers(params: dict[str, Any]) -> None:
    hf = LlamaConfig(**SHAPE, rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, **params})
    expected, expected_factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    rope = rope_config(hf.to_dict())
    torch.testing.assert_close(inverse_frequencies(rope, HEAD_DIM), expected, rtol=1e-6, atol=0)
    assert attention_factor(rope) == pytest.approx(expected_factor, rel=1e-12)


def test_longrope_matches_transformers_below_and_past_the_original_context() -> None:
    """Phi-3's layout: no factor (the context's growth), the original context at top level."""
    hf = Phi3Config(
        **SHAPE, original_max_position_embeddings=64,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": SHORT, "long_factor": LONG},
    )
    short, factor = ROPE_INIT_FUNCTIONS["longrope"](hf)
    long, _ = ROPE_INIT_FUNCTIONS["longrope"](hf, seq_len=65)
    rope = rope_config(hf.to_dict())
    assert rope.factor == 8.0 and factor == pytest.approx(math.sqrt(1 + math.log(8) / math.log(64)))
    assert attention_factor(rope) == pytest.approx(factor, rel=1e-12)
    torch.testing.assert_close(inverse_frequencies(rope, HEAD_DIM), short, rtol=1e-6, atol=0)
    torch.testing.assert_close(inverse_frequencies(rope, HEAD_DIM, long=True), long, rtol=1e-6, atol=0)
    # NOTE: our cache switches by position: the short factors below 64, the long from 64 on.
    rotary = RotaryEmbedding(rope, HEAD_DIM, 128, torch.device("cpu"))
    for position, freqs in ((63, short), (64, long), (127, long)):
        angles = position * freqs
        torch.testing.assert_close(rotary.cos_cache[position, : HEAD_DIM // 2], angles.cos() * factor)


def test_the_first_phi3_configs_su_is_longrope() -> None:
    raw = {"rope_scaling": {"type": "su", "short_factor": SHORT, "long_factor": LONG},
           "original_max_position_embeddings": 64, "max_position_embeddings": 512}
    assert rope_config(raw).rope_type == "longrope"


def _windows(raw: dict[str, Any]) -> tuple[int | None, ...]:
    return ModelConfig.from_dict(raw, "tiny").attention.layer_windows


@pytest.mark.parametrize(
    ("hf", "architecture"),
    [
        (Gemma2Config(**SHAPE, num_key_value_heads=2, sliding_window=8, head_dim=16), "Gemma2ForCausalLM"),
        (Gemma3TextConfig(**{**SHAPE, "num_hidden_layers": 7}, sliding_window=8, head_dim=16), "Gemma3ForCausalLM"),
        (Qwen2Config(**{**SHAPE, "num_hidden_layers": 4}, use_sliding_window=True, sliding_window=8,
                     max_window_layers=2), "Qwen2ForCausalLM"),
    ],
    ids=["gemma2", "gemma3", "qwen2"],
)
def test_sliding_layers_without_layer_types_follow_transformers(hf: Any, architecture: str) -> None:
    raw = {**hf.to_dict(), "architectures": [architecture]}
    expected = tuple(8 if t == "sliding_attention" else None for t in hf.layer_types)
    assert None in expected and 8 in expected
    assert _windows(raw) == expected
    old = {k: v for k, v in raw.items() if k != "layer_types"}
    assert _windows(old) == expected


def test_gemma3_hub_config_rotates_local_layers_with_their_own_base() -> None:
    raw = {
        **Gemma3TextConfig(**SHAPE, head_dim=16).to_dict(), "architectures": ["Gemma3ForCausalLM"],
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    del raw["rope_parameters"]
    config = ModelConfig.from_dict(raw, "tiny")
    assert (config.rope.theta, config.rope.rope_type, config.rope.factor) == (1000000.0, "linear", 8.0)
    assert config.local_rope is not None
    assert (config.local_rope.theta, config.local_rope.rope_type) == (10000.0, "default")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope type 'dynamic' is not supported"),
        ({"hidden_act": "relu"}, "hidden_act 'relu' is not supported"),
        ({"architectures": ["Gemma3ForConditionalGeneration"]}, "unsupported architecture (Gemma3ForConditionalGeneration)"),
    ],
)
def test_what_stays_unsupported_is_refused_in_one_line(change: dict[str, Any], named: str) -> None:
    raw = {**LlamaConfig(**SHAPE).to_dict(), "architectures": ["LlamaForCausalLM"]}
    raw.pop("rope_parameters")
    with pytest.raises(UnsupportedModelError) as caught:
        ModelConfig.from_dict({**raw, **change}, "tiny")
    assert named in str(caught.value) and "\n" not in str(caught.value)
