"""The router's reading of /get_model_info agrees with the engine's own idea of its model kind.

The router may not import the engine, so router/capabilities.py keeps its own table; this
holds it to the engine's architectures table, architecture by architecture.
"""

from __future__ import annotations

import pytest

from engine.config.architectures import (
    CROSS_ENCODER_ARCHITECTURES,
    ENCODER_ARCHITECTURES,
    REWARD_ARCHITECTURES,
    SUPPORTED_ARCHITECTURES,
)
from engine.server.model_kind_guard import ModelKind, model_kind
from router import capabilities
from router.capabilities import capabilities_from_model_info

BY_KIND: dict[ModelKind, tuple[str, ...]] = {
    "generation": capabilities.GENERATION,
    "embedding": capabilities.EMBEDDING,
    "cross-encoder": capabilities.CROSS_ENCODER,
    "reward": capabilities.REWARD,
}
CASES = [
    *((arch, False) for arch in SUPPORTED_ARCHITECTURES),  # generation models
    *((arch, True) for arch in SUPPORTED_ARCHITECTURES),  # decoder embeddings (--is-embedding)
    *((arch, True) for arch in (*ENCODER_ARCHITECTURES, *REWARD_ARCHITECTURES)),
    *((arch, False) for arch in (*CROSS_ENCODER_ARCHITECTURES, *REWARD_ARCHITECTURES)),
]


@pytest.mark.parametrize(("architecture", "is_embedding"), CASES)
def test_capabilities_follow_the_engine_model_kind(architecture: str, is_embedding: bool) -> None:
    # NOTE: the two keys of the engine's /get_model_info the router reads.
    info = {"architectures": [architecture], "is_generation": not is_embedding}
    kind = model_kind([architecture], is_embedding)
    assert capabilities_from_model_info(info) == BY_KIND[kind]


def test_the_cross_encoder_table_is_the_engine_table() -> None:
    assert capabilities.CROSS_ENCODER_ARCHITECTURES == frozenset(CROSS_ENCODER_ARCHITECTURES)


@pytest.mark.parametrize("info", [{}, {"architectures": "LlamaForCausalLM"}, {"is_generation": 1}])
def test_an_answer_that_does_not_say_gives_none(info: dict[str, object]) -> None:
    assert capabilities_from_model_info(info) == ()
