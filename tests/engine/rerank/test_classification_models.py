"""The engine's classification models against transformers' own, in process (no server)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from engine.config.classification import num_labels, relevance_activation
from engine.engine_config import EngineConfig
from engine.ipc.messages import ClassifyRequest
from engine.memory import RadixCache
from engine.models.bert import BertConfig
from engine.models.sequence_classification import CrossEncoder
from engine.models.weight_loader import iterate_weights
from engine.runtime.cross_encoder_runner import CrossEncoderRunner
from engine.runtime.decoder_classifier import DecoderClassifier
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.forward_only import ForwardOnlyQueue
from engine.scheduler.request_kv import RequestKV
from tests.engine.rerank.conftest import DOCUMENTS, QUERY


def _reference_logits(model_dir: Path, encoded: dict[str, torch.Tensor]) -> torch.Tensor:
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(**encoded).logits


def _ours(model_dir: Path) -> CrossEncoder:
    model = CrossEncoder(BertConfig.from_dir(model_dir))
    model.load_weights(iterate_weights(model_dir))
    return model.eval()


@pytest.mark.parametrize("fixture", ["bert_reranker_dir", "xlmr_reranker_dir"])
def test_cross_encoder_logits_equal_transformers(fixture: str, request: pytest.FixtureRequest) -> None:
    model_dir: Path = request.getfixturevalue(fixture)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encoded = tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS, padding=True, return_tensors="pt")
    expected = _reference_logits(model_dir, dict(encoded))
    got = _ours(model_dir)(encoded["input_ids"], encoded["attention_mask"], encoded.get("token_type_ids"))
    assert got.shape == expected.shape == (len(DOCUMENTS), 1)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert ("token_type_ids" in encoded) == (fixture == "bert_reranker_dir")


def test_bert_token_types_matter(bert_reranker_dir: Path) -> None:
    """The second segment really is read as type 1: all-zero types give other logits."""
    tokenizer = AutoTokenizer.from_pretrained(bert_reranker_dir)
    encoded = tokenizer(QUERY, DOCUMENTS[0], return_tensors="pt")
    model = _ours(bert_reranker_dir)
    with_types = model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    without = model(encoded["input_ids"], encoded["attention_mask"], None)
    assert not torch.allclose(with_types, without)


def test_xlmr_runner_positions_and_context(xlmr_reranker_dir: Path) -> None:
    runner = CrossEncoderRunner(EngineConfig(str(xlmr_reranker_dir), device="cpu"))
    assert runner.context_length == 128, "max_position_embeddings 130 less the offset pad_token_id + 1"
    tokenizer = AutoTokenizer.from_pretrained(xlmr_reranker_dir)
    encoded = tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS, padding=True, return_tensors="pt")
    prompts = tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS)["input_ids"]
    torch.testing.assert_close(runner.classify(prompts, None), _reference_logits(xlmr_reranker_dir, dict(encoded)), atol=1e-5, rtol=1e-5)


def test_queue_splits_pairs_and_token_types_by_budget(bert_reranker_dir: Path) -> None:
    """A token budget smaller than the request runs it in several forwards; each forward gets
    its own prompts' token types."""
    runner = CrossEncoderRunner(EngineConfig(str(bert_reranker_dir), device="cpu"))
    tokenizer = AutoTokenizer.from_pretrained(bert_reranker_dir)
    encoded = tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS)
    queue = ForwardOnlyQueue(runner, token_budget=40)
    assert queue.add(ClassifyRequest("r", encoded["input_ids"], encoded["token_type_ids"])) is None
    outputs = [queue.run_once() for _ in range(len(DOCUMENTS))]
    done = [o for o in outputs if o is not None]
    assert len(done) == 1 and outputs[0] is None, "the request needed more than one forward"
    whole = runner.classify(encoded["input_ids"], encoded["token_type_ids"])
    torch.testing.assert_close(torch.tensor(done[0].values), whole, atol=1e-5, rtol=1e-5)


def test_queue_refuses_bad_token_types(bert_reranker_dir: Path) -> None:
    queue = ForwardOnlyQueue(CrossEncoderRunner(EngineConfig(str(bert_reranker_dir), device="cpu")), None)
    short = queue.add(ClassifyRequest("a", [[101, 2000, 102]], [[0, 0]]))
    assert short is not None and "one id per input token" in short.message
    out_of_range = queue.add(ClassifyRequest("b", [[101, 2000, 102]], [[0, 2, 0]]))
    assert out_of_range is not None and "token_type_ids must be in [0, 2)" in out_of_range.message


def test_reward_model_equals_transformers(reward_dir: Path) -> None:
    runner = ModelRunner(EngineConfig(str(reward_dir), device="cpu", max_total_tokens=512, max_running_requests=8))
    classifier = DecoderClassifier(runner, RequestKV(runner, RadixCache(runner.allocator)))
    tokenizer = AutoTokenizer.from_pretrained(reward_dir)
    eos = tokenizer.eos_token_id
    texts = ["The answer is 42.", "I am not sure, maybe ask someone else?", "Yes."]
    # NOTE: the last prompt ends in the pad token (eos here): transformers scores the token before it.
    prompts = [tokenizer.encode(t) for t in texts] + [tokenizer.encode(texts[0]) + [eos, eos]]
    got = classifier.classify(prompts, None)
    assert got is not None and got.shape == (4, 1)
    reference = AutoModelForSequenceClassification.from_pretrained(reward_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = torch.cat([reference(torch.tensor([p])).logits for p in prompts])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got[3], got[0])
    assert runner.allocator.available_size() == 512, "the borrowed KV slots were given back"


@pytest.mark.parametrize(
    ("config", "logit", "score"),
    [
        ({"id2label": {"0": "LABEL_0"}}, 2.0, 1 / (1 + math.exp(-2.0))),  # one label: sigmoid
        ({"id2label": {"0": "a", "1": "b"}}, 2.0, 2.0),  # several labels: the raw logit
        ({"id2label": {"0": "x"}, "sentence_transformers": {"activation_fn": "torch.nn.modules.linear.Identity"}}, 2.0, 2.0),
        ({"id2label": {"0": "x"}, "sbert_ce_default_activation_function": "torch.nn.modules.activation.Tanh"}, 0.5, math.tanh(0.5)),
    ],
)
def test_relevance_activation_follows_sentence_transformers(config: dict[str, object], logit: float, score: float) -> None:
    assert relevance_activation(config)(logit) == pytest.approx(score)


def test_num_labels_reads_id2label() -> None:
    assert num_labels({"id2label": {"0": "a", "1": "b", "2": "c"}}) == 3
    assert num_labels({}) == 2
    with pytest.raises(ValueError, match="not supported"):
        relevance_activation({"sentence_transformers": {"activation_fn": "my.module.Evil"}})
