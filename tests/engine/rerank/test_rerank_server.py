"""/v1/rerank, /v2/rerank, /classify and /v1/classify on real engine servers, against transformers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from tests.engine.rerank.conftest import DOCUMENTS, QUERY, RERANK_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def expected(bert_reranker_dir: Path) -> list[float]:
    """sigmoid(logit) per (QUERY, document) pair: sentence-transformers' CrossEncoder default."""
    tokenizer = AutoTokenizer.from_pretrained(bert_reranker_dir)
    model = AutoModelForSequenceClassification.from_pretrained(bert_reranker_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(**tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS, padding=True, return_tensors="pt")).logits
    return torch.sigmoid(logits[:, 0]).tolist()


def _reference_logits(model_dir: Path, texts: list[str]) -> list[list[float]]:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        return [model(**tokenizer(text, return_tensors="pt")).logits[0].tolist() for text in texts]


def test_rerank_scores_equal_transformers(bert_rerank_server: EngineServer, expected: list[float]) -> None:
    with bert_rerank_server.client() as http:
        reply = http.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})
    assert reply.status_code == 200, reply.text
    results = reply.json()
    assert [r["index"] for r in results] == sorted(range(len(DOCUMENTS)), key=lambda i: -expected[i])
    for r in results:
        assert r["score"] == pytest.approx(expected[r["index"]], abs=1e-4)
        assert r["document"] == DOCUMENTS[r["index"]]
        assert r["meta_info"]["prompt_tokens"] > 0
    assert len({round(r["score"], 4) for r in results}) > 1, "random weights still rank documents apart"


def test_top_n_and_return_documents(bert_rerank_server: EngineServer, expected: list[float]) -> None:
    best = sorted(range(len(DOCUMENTS)), key=lambda i: -expected[i])[:2]
    with bert_rerank_server.client() as http:
        reply = http.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "return_documents": False})
    assert [r["index"] for r in reply.json()] == best
    assert all("document" not in r for r in reply.json())


def test_cohere_shape_on_v2(bert_rerank_server: EngineServer, bert_reranker_dir: Path, expected: list[float]) -> None:
    with bert_rerank_server.client() as http:
        body = http.post("/v2/rerank", json={"model": RERANK_NAME, "query": QUERY, "documents": DOCUMENTS, "top_n": 3}).json()
        tokens = [http.post("/tokenize", json={"prompt": d}).json()["count"] for d in DOCUMENTS]
    assert body["model"] == RERANK_NAME and body["id"].startswith("rerank-")
    assert [r["index"] for r in body["results"]] == sorted(range(len(DOCUMENTS)), key=lambda i: -expected[i])[:3]
    for r in body["results"]:
        assert r["relevance_score"] == pytest.approx(expected[r["index"]], abs=1e-4)
        assert r["document"] == {"text": DOCUMENTS[r["index"]]}
    # NOTE: each pair is [CLS] query [SEP] document [SEP]: the query's tokens once per document.
    query_tokens = len(AutoTokenizer.from_pretrained(bert_reranker_dir)(QUERY)["input_ids"]) - 2
    assert body["usage"]["total_tokens"] == sum(tokens) + len(DOCUMENTS) * (query_tokens + 1)


def test_classify_returns_raw_logits(bert_rerank_server: EngineServer, bert_reranker_dir: Path) -> None:
    expected = _reference_logits(bert_reranker_dir, DOCUMENTS[:2])
    with bert_rerank_server.client() as http:
        one = http.post("/classify", json={"text": DOCUMENTS[0]}).json()
        many = http.post("/classify", json={"text": DOCUMENTS[:2]}).json()
        openai_shape = http.post("/v1/classify", json={"input": DOCUMENTS[:2]}).json()
    assert one["embedding"] == pytest.approx(expected[0], abs=1e-4)
    assert [r["embedding"] for r in many] == [pytest.approx(e, abs=1e-4) for e in expected]
    assert [d["index"] for d in openai_shape["data"]] == [0, 1]
    assert openai_shape["data"][0] == {"index": 0, "label": "LABEL_0", "probs": [1.0], "num_classes": 1}
    assert openai_shape["usage"]["prompt_tokens"] == sum(r["meta_info"]["prompt_tokens"] for r in many)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": QUERY, "documents": []}, "documents must not be empty"),
        ({"query": " ", "documents": DOCUMENTS}, "query must not be empty"),
        ({"query": QUERY, "documents": DOCUMENTS, "top_n": 0}, "top_n"),
        ({"documents": DOCUMENTS}, "query"),
    ],
)
def test_bad_rerank_requests_are_400(bert_rerank_server: EngineServer, body: dict[str, object], message: str) -> None:
    with bert_rerank_server.client() as http:
        reply = http.post("/v1/rerank", json=body)
    assert reply.status_code == 400
    assert message in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": RERANK_NAME, "messages": [{"role": "user", "content": "hi"}]}),
        ("/generate", {"text": "hi"}),
        ("/v1/completions", {"model": RERANK_NAME, "prompt": "hi"}),
    ],
)
def test_rerank_model_refuses_generation(bert_rerank_server: EngineServer, path: str, body: dict[str, object]) -> None:
    with bert_rerank_server.client() as http:
        reply = http.post(path, json=body)
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert "cross-encoder (rerank) model: it cannot generate text" in reply.json()["error"]["message"]


@pytest.mark.parametrize(("path", "body"), [("/v1/embeddings", {"input": "hi"}), ("/encode", {"text": "hi"})])
def test_rerank_model_refuses_embeddings(bert_rerank_server: EngineServer, path: str, body: dict[str, object]) -> None:
    with bert_rerank_server.client() as http:
        reply = http.post(path, json=body)
        info = http.get("/get_model_info").json()
    assert reply.status_code == 400
    assert "it has no embeddings; use /v1/rerank or /classify" in reply.json()["error"]["message"]
    assert info["is_generation"] is False
    assert info["architectures"] == ["BertForSequenceClassification"]


def test_reward_model_classify_equals_transformers(reward_server: EngineServer, reward_dir: Path) -> None:
    texts = ["The answer is 42.", "I am not sure, maybe ask someone else?"]
    expected = _reference_logits(reward_dir, texts)
    with reward_server.client() as http:
        one = http.post("/classify", json={"text": texts[0]})
        many = http.post("/classify", json={"text": texts}).json()
        ids = http.post("/tokenize", json={"prompt": texts[1]}).json()["tokens"]
        by_ids = http.post("/classify", json={"input_ids": [ids]}).json()
    assert one.status_code == 200, one.text
    assert one.json()["embedding"] == pytest.approx(expected[0], abs=1e-4)
    assert [r["embedding"] for r in many] == [pytest.approx(e, abs=1e-4) for e in expected]
    assert by_ids[0]["embedding"] == pytest.approx(expected[1], abs=1e-4)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/rerank", {"query": QUERY, "documents": DOCUMENTS}, "this is a reward model"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, "reward (sequence-classification) model: it cannot generate"),
        ("/v1/embeddings", {"input": "hi"}, "it has no embeddings"),
        ("/v1/score", {"query": "hi", "items": ["a"], "label_token_ids": [1]}, "this is a reward model"),
    ],
)
def test_reward_model_refuses_other_kinds(reward_server: EngineServer, path: str, body: dict[str, object], message: str) -> None:
    with reward_server.client() as http:
        reply = http.post(path, json=body)
    assert reply.status_code == 400
    assert message in reply.json()["error"]["message"]
