"""/v1/score on SmolLM2: the label ids' next-token probabilities, against transformers in fp32."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from tests.support.engine_process import EngineServer

QUERY = "Is Paris the capital of France? Answer:"
ITEMS = [" Yes", " No", " Maybe, I am not sure"]


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="module")
def next_logits(smollm2_dir: Path) -> Callable[[list[int]], torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()

    def logits(ids: list[int]) -> torch.Tensor:
        with torch.inference_mode():
            return model(input_ids=torch.tensor([ids])).logits[0, -1]

    return logits


@pytest.fixture(scope="module")
def labels(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    return [tokenizer.encode(word)[0] for word in (" yes", " no", " Yes", " No")]


@pytest.mark.parametrize("item_first", [False, True])
@pytest.mark.parametrize("apply_softmax", [True, False])
def test_text_scores_match_transformers(
    smol_server: EngineServer,
    tokenizer: PreTrainedTokenizerBase,
    next_logits: Callable[[list[int]], torch.Tensor],
    labels: list[int],
    apply_softmax: bool,
    item_first: bool,
) -> None:
    body = {"query": QUERY, "items": ITEMS, "label_token_ids": labels, "apply_softmax": apply_softmax, "item_first": item_first}
    with smol_server.client() as http:
        reply = http.post("/v1/score", json=body)
    assert reply.status_code == 200, reply.text
    scores = reply.json()["scores"]
    assert len(scores) == len(ITEMS)
    for item, got in zip(ITEMS, scores):
        text = f"{item}{QUERY}" if item_first else f"{QUERY}{item}"
        logits = next_logits(tokenizer.encode(text))
        if apply_softmax:
            want = torch.softmax(logits[labels], dim=-1)
            assert abs(sum(got) - 1.0) < 1e-5
        else:
            want = torch.softmax(logits, dim=-1)[labels]
        assert torch.allclose(torch.tensor(got), want, atol=1e-4), (got, want.tolist())


def test_token_id_inputs(
    smol_server: EngineServer,
    tokenizer: PreTrainedTokenizerBase,
    next_logits: Callable[[list[int]], torch.Tensor],
    labels: list[int],
) -> None:
    query, item = tokenizer.encode(QUERY), tokenizer.encode(" Yes")
    body = {"query": query, "items": [item], "label_token_ids": labels, "apply_softmax": True}
    with smol_server.client() as http:
        got = http.post("/v1/score", json=body).json()["scores"][0]
    want = torch.softmax(next_logits(query + item)[labels], dim=-1)
    assert torch.allclose(torch.tensor(got), want, atol=1e-4)


@pytest.mark.parametrize(
    "body",
    [
        {"query": "q", "items": ["a"], "label_token_ids": []},
        {"query": "q", "items": ["a"], "label_token_ids": [10**7]},
        {"query": "q", "items": [], "label_token_ids": [1]},
        {"query": "q", "items": [[1, 2]], "label_token_ids": [1]},
        {"query": [1, 2], "items": ["a"], "label_token_ids": [1]},
        {"items": ["a"], "label_token_ids": [1]},
    ],
)
def test_bad_score_request_is_400(smol_server: EngineServer, body: dict[str, object]) -> None:
    with smol_server.client() as http:
        reply = http.post("/v1/score", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["message"]
