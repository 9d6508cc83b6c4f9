"""/v1/embeddings and /encode on all-MiniLM-L6-v2 against sentence-transformers itself."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import numpy as np
import openai
import pytest

from tests.engine.embedding.conftest import MINILM_NAME, SENTENCES
from tests.support.engine_process import EngineServer


@pytest.fixture(scope="module")
def reference(minilm_dir: Path) -> np.ndarray:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_dir), device="cpu")
    return model.encode(SENTENCES, convert_to_numpy=True)


def _client(server: EngineServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def test_openai_client_matches_sentence_transformers(minilm_server: EngineServer, reference: np.ndarray) -> None:
    reply = _client(minilm_server).embeddings.create(model=MINILM_NAME, input=SENTENCES, encoding_format="float")
    got = np.array([d.embedding for d in sorted(reply.data, key=lambda d: d.index)], dtype=np.float32)
    assert got.shape == reference.shape == (20, 384)
    cosine = (got * reference).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(reference, axis=1))
    assert cosine.min() > 0.999, cosine
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert reply.model == MINILM_NAME
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > 20


def test_base64_decodes_to_the_float_vector(minilm_server: EngineServer) -> None:
    with minilm_server.client() as http:
        floats = http.post("/v1/embeddings", json={"input": "one sentence", "encoding_format": "float"}).json()
        encoded = http.post("/v1/embeddings", json={"input": "one sentence", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(encoded["data"][0]["embedding"]), dtype="<f4")
    assert np.array_equal(decoded, np.array(floats["data"][0]["embedding"], dtype=np.float32))
    # NOTE: the openai client asks for base64 by default and decodes it itself.
    via_client = _client(minilm_server).embeddings.create(model=MINILM_NAME, input="one sentence")
    assert np.array_equal(np.array(via_client.data[0].embedding, dtype=np.float32), decoded)


def test_token_id_inputs_equal_text_inputs(minilm_server: EngineServer) -> None:
    with minilm_server.client() as http:
        ids = http.post("/tokenize", json={"prompt": "token ids work too"}).json()["tokens"]
        by_text = http.post("/v1/embeddings", json={"input": "token ids work too"}).json()
        by_ids = http.post("/v1/embeddings", json={"input": [ids, ids]}).json()
    assert len(by_ids["data"]) == 2
    assert np.allclose(by_ids["data"][1]["embedding"], by_text["data"][0]["embedding"], atol=1e-5)


def test_native_encode(minilm_server: EngineServer, reference: np.ndarray) -> None:
    with minilm_server.client() as http:
        one = http.post("/encode", json={"text": SENTENCES[0]}).json()
        many = http.post("/encode", json={"text": SENTENCES[:3]}).json()
    assert np.allclose(one["embedding"], reference[0], atol=1e-4)
    assert [len(r["embedding"]) for r in many] == [384] * 3
    assert np.allclose(many[2]["embedding"], reference[2], atol=1e-4)
    assert one["meta_info"]["prompt_tokens"] > 2


def test_dimensions_refused_unless_supported(minilm_server: EngineServer) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        _client(minilm_server).embeddings.create(model=MINILM_NAME, input="x", dimensions=128)
    assert "dimensions" in str(err.value)
    with minilm_server.client() as http:
        same = http.post("/v1/embeddings", json={"input": "x", "dimensions": 384})
    assert same.status_code == 200 and len(same.json()["data"][0]["embedding"]) == 384


@pytest.mark.parametrize(
    "body",
    [
        {"input": []},
        {"input": ""},
        {"input": [[]]},
        {"input": [[999999]]},
        {"input": "word " * 400},
        {"input": "x", "encoding_format": "int8"},
        {"input": 5},
    ],
)
def test_bad_embedding_input_is_400(minilm_server: EngineServer, body: dict[str, object]) -> None:
    with minilm_server.client() as http:
        reply = http.post("/v1/embeddings", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/generate", {"text": "hi"}),
        ("/v1/chat/completions", {"model": MINILM_NAME, "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"model": MINILM_NAME, "prompt": "hi"}),
        ("/api/generate", {"model": MINILM_NAME, "prompt": "hi"}),
    ],
)
def test_embedding_model_refuses_generation(minilm_server: EngineServer, path: str, body: dict[str, object]) -> None:
    with minilm_server.client() as http:
        reply = http.post(path, json=body)
    assert reply.status_code == 400
    assert "embedding model" in reply.text
    with pytest.raises(openai.BadRequestError):
        _client(minilm_server).chat.completions.create(
            model=MINILM_NAME, messages=[{"role": "user", "content": "hi"}]
        )


def test_model_info_and_health(minilm_server: EngineServer) -> None:
    with minilm_server.client() as http:
        info = http.get("/get_model_info").json()
        assert http.get("/health_generate").status_code == 200
    assert info["is_generation"] is False
    assert info["architectures"] == ["BertModel"]
