"""Generation and embedding models answer the classification routes with a 400 (OpenAI shape).

The routes refuse by the served model's kind before they touch the pipeline, so the app is
built here around a context that only knows the model's config (no engine processes).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from engine.server.context import ServerContext
from engine.server.http_errors import install_error_handlers
from engine.server.model_kind_guard import model_kind
from engine.server.routes_classification import classification_router
from tests.engine.rerank.conftest import DOCUMENTS, QUERY


def _client(architecture: str, is_embedding: bool) -> TestClient:
    ctx = cast(ServerContext, SimpleNamespace(hf_config={"architectures": [architecture]}, is_embedding=is_embedding))
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(classification_router(ctx))
    return TestClient(app)


_REQUESTS = [
    ("/v1/rerank", {"query": QUERY, "documents": DOCUMENTS}, "reranking needs a cross-encoder"),
    ("/v2/rerank", {"query": QUERY, "documents": DOCUMENTS}, "reranking needs a cross-encoder"),
    ("/classify", {"text": "hi"}, "classification needs a sequence-classification model"),
    ("/v1/classify", {"input": "hi"}, "classification needs a sequence-classification model"),
]


@pytest.mark.parametrize(("path", "body", "needs"), _REQUESTS)
@pytest.mark.parametrize(
    ("architecture", "is_embedding", "kind"),
    [
        ("LlamaForCausalLM", False, "this is a generation model"),
        ("BertModel", True, "this is an embedding model"),
        ("Qwen2ForCausalLM", True, "this is an embedding model"),
    ],
)
def test_other_kinds_are_refused(
    path: str, body: dict[str, object], needs: str, architecture: str, is_embedding: bool, kind: str
) -> None:
    reply = _client(architecture, is_embedding).post(path, json=body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["message"].startswith(kind) and needs in error["message"]
    assert error["type"] == "invalid_request_error"


def test_model_kind() -> None:
    assert model_kind(["XLMRobertaForSequenceClassification"], is_embedding=False) == "cross-encoder"
    assert model_kind(["LlamaForSequenceClassification"], is_embedding=True) == "reward"
    assert model_kind(["BertModel"], is_embedding=True) == "embedding"
    assert model_kind(["LlamaForCausalLM"], is_embedding=False) == "generation"
