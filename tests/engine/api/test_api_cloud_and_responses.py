"""SageMaker, Vertex AI and OpenAI /v1/responses against the real engine server on SmolLM2.

One server without --api-key and --enable-metrics; the Vertex predict route comes from
$AIP_PREDICT_ROUTE.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from openai import OpenAI

from tests.engine.api.conftest import VERTEX_ROUTE
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

MODEL = "smollm2"
FRANCE_QUESTION = "What is the capital of France?"
FRANCE = [{"role": "user", "content": FRANCE_QUESTION}]




@pytest.fixture(scope="module")
def http(server: EngineServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def client(server: EngineServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)


# ------------------------------------------------------------------ without the flags


def test_no_metrics_route_without_enable_metrics(http: httpx.Client) -> None:
    assert http.get("/metrics").status_code == 404


def test_no_key_needed_without_api_key(http: httpx.Client) -> None:
    assert http.get("/v1/models").status_code == 200


def test_cors_headers_without_flags(http: httpx.Client) -> None:
    reply = http.get("/v1/models", headers={"Origin": "http://example.com"})
    assert reply.headers["access-control-allow-origin"] in ("*", "http://example.com")


# ------------------------------------------------------------------ SageMaker


def test_sagemaker_ping(http: httpx.Client) -> None:
    reply = http.get("/ping")
    assert reply.status_code == 200


def test_sagemaker_invocations_chat_body(http: httpx.Client) -> None:
    reply = http.post("/invocations", json={"messages": FRANCE, "temperature": 0, "max_tokens": 30})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "The capital of France is Paris."
    assert body["usage"]["prompt_tokens"] > 0


def test_sagemaker_invocations_generate_body(http: httpx.Client) -> None:
    body = {
        "text": "The capital city of France is",
        "sampling_params": {"temperature": 0, "max_new_tokens": 4},
    }
    reply = http.post("/invocations", json=body)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert "Paris" in result["text"]
    assert result["meta_info"]["completion_tokens"] == len(result["output_ids"]) <= 4
    assert result["meta_info"]["finish_reason"] is not None


def test_sagemaker_invocations_bad_bodies_are_400(http: httpx.Client) -> None:
    json_type = {"content-type": "application/json"}
    # NOTE: neither text nor input_ids; no messages; not an object; not JSON.
    assert http.post("/invocations", json={"sampling_params": {}}).status_code == 400
    assert http.post("/invocations", json={"messages": []}).status_code == 400
    assert http.post("/invocations", content=b"[1, 2]", headers=json_type).status_code == 400
    reply = http.post("/invocations", content=b"{", headers=json_type)
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"


# ------------------------------------------------------------------ Vertex AI


def test_vertex_predictions(http: httpx.Client) -> None:
    body = {
        "instances": [
            {"text": "The capital city of France is"},
            {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 1}},
        ],
        "parameters": {"temperature": 0, "max_new_tokens": 4},
    }
    reply = http.post(VERTEX_ROUTE, json=body)
    assert reply.status_code == 200, reply.text
    predictions = reply.json()["predictions"]
    assert len(predictions) == 2
    assert "Paris" in predictions[0]["text"]
    assert predictions[0]["meta_info"]["completion_tokens"] <= 4
    assert predictions[1]["meta_info"]["completion_tokens"] == 1
    assert predictions[0]["text"].startswith(predictions[1]["text"])


def test_vertex_default_route_is_replaced_by_the_env_one(http: httpx.Client) -> None:
    assert http.post("/vertex_generate", json={"instances": []}).status_code == 404
    assert http.post(VERTEX_ROUTE, json={"instances": []}).json() == {"predictions": []}


def test_vertex_bad_bodies_are_400(http: httpx.Client) -> None:
    assert http.post(VERTEX_ROUTE, json={"instances": "x"}).status_code == 400
    assert (
        http.post(VERTEX_ROUTE, json={"instances": [{"text": "hi", "bogus": 1}]}).status_code == 400
    )
    assert (
        http.post(VERTEX_ROUTE, json={"instances": [{"text": "hi", "stream": True}]}).status_code
        == 400
    )


# ------------------------------------------------------------------ /v1/responses


def test_responses_non_streamed(client: OpenAI) -> None:
    response = client.responses.create(
        model=MODEL, input=FRANCE_QUESTION, temperature=0, max_output_tokens=30
    )
    assert "Paris" in response.output_text
    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.model == MODEL
    assert response.output[0].type == "message"
    assert response.output[0].role == "assistant"
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


def test_responses_message_items_and_instructions(client: OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        instructions="You are a helpful assistant.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": FRANCE_QUESTION}]}],
        temperature=0,
        max_output_tokens=30,
    )
    assert "Paris" in response.output_text
    assert response.instructions == "You are a helpful assistant."


def test_responses_cut_by_max_output_tokens_is_incomplete(client: OpenAI) -> None:
    response = client.responses.create(
        model=MODEL, input=FRANCE_QUESTION, temperature=0, max_output_tokens=2
    )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None and response.usage.output_tokens == 2


def test_responses_streamed(client: OpenAI) -> None:
    reference = client.responses.create(
        model=MODEL, input=FRANCE_QUESTION, temperature=0, max_output_tokens=30
    )
    events = list(
        client.responses.create(
            model=MODEL, input=FRANCE_QUESTION, temperature=0, max_output_tokens=30, stream=True
        )
    )
    types = [e.type for e in events]
    head = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    tail = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert types[:4] == head
    assert types[-4:] == tail
    middle = types[4:-4]
    assert middle and set(middle) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))

    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    done = events[-4]
    completed = events[-1]
    assert done.type == "response.output_text.done"
    assert text == done.text
    assert completed.type == "response.completed"
    assert completed.response.output_text == text == reference.output_text
    assert "Paris" in text
    assert events[0].response.status == "in_progress"  # type: ignore[union-attr]
    assert completed.response.usage is not None and completed.response.usage.output_tokens > 0


def test_responses_streamed_incomplete_ends_with_response_incomplete(client: OpenAI) -> None:
    events = list(
        client.responses.create(
            model=MODEL, input=FRANCE_QUESTION, temperature=0, max_output_tokens=2, stream=True
        )
    )
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"  # type: ignore[union-attr]


def test_responses_refuses_what_it_cannot_do(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_123")
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=MODEL,
            input=[
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "http://x/y.png"}],
                }
            ],  # type: ignore[list-item]
        )
