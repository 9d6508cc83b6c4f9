"""Decoder embeddings (SmolLM2 with --is-embedding): the last token's final hidden state, normalised."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openai
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from tests.engine.embedding.conftest import SENTENCES, SMOL_EMBED_NAME, SMOL_NAME
from tests.support.engine_process import EngineServer


@pytest.fixture(scope="module")
def reference(smollm2_dir: Path) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModel.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    rows = []
    with torch.inference_mode():
        for text in SENTENCES[:6]:
            ids = torch.tensor([tokenizer.encode(text)])
            last = model(input_ids=ids).last_hidden_state[0, -1]
            rows.append(torch.nn.functional.normalize(last, dim=-1).numpy())
    return np.stack(rows)


def test_last_token_pooling_matches_transformers(smol_embed_server: EngineServer, reference: np.ndarray) -> None:
    client = openai.OpenAI(base_url=f"{smol_embed_server.url}/v1", api_key="unused", max_retries=0)
    reply = client.embeddings.create(model=SMOL_EMBED_NAME, input=SENTENCES[:6], encoding_format="float")
    got = np.array([d.embedding for d in reply.data], dtype=np.float32)
    assert got.shape == (6, 576)
    assert np.abs(got - reference).max() < 1e-4
    with smol_embed_server.client() as http:
        native = http.post("/encode", json={"text": SENTENCES[0]}).json()
    assert np.abs(np.array(native["embedding"]) - reference[0]).max() < 1e-4


def test_embedding_decoder_refuses_generation(smol_embed_server: EngineServer) -> None:
    with smol_embed_server.client() as http:
        chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        generate = http.post("/generate", json={"text": "hi"})
        assert http.get("/get_model_info").json()["is_generation"] is False
    assert chat.status_code == generate.status_code == 400
    assert "embedding model" in chat.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [("/encode", {"text": "hello"}), ("/v1/embeddings", {"model": SMOL_NAME, "input": "hello"})],
)
def test_generation_model_refuses_embeddings(smol_server: EngineServer, path: str, body: dict[str, object]) -> None:
    with smol_server.client() as http:
        reply = http.post(path, json=body)
    assert reply.status_code == 400
    assert "generation model" in reply.json()["error"]["message"]
