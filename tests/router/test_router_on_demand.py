"""Models on demand at the router (issue #23): requests held while a real loader starts the
model's upstream (tests/router/echo_loader.py), as the openai, ollama and httpx clients see it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from router.__main__ import parse_args
from tests.router.echo_loader import SIZE_BYTES, OnDemandRouter, serve_on_demand

MODEL = "echo-a"
OTHER = "echo-b"
MODELS = (MODEL, OTHER)
TICK_S = 0.05
WAIT_S = 30.0


@pytest.fixture
def on_demand(log_dir: Path) -> Iterator[OnDemandRouter]:
    with serve_on_demand(log_dir, MODELS, loading_comment_s=TICK_S) as router:
        yield router


def _openai(router: OnDemandRouter) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{router.url}/v1", api_key="none", max_retries=0, timeout=WAIT_S)


def _ask(router: OnDemandRouter, text: str, model: str = MODEL) -> str:
    with _openai(router) as client:
        reply = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": text}]
        )
    return reply.choices[0].message.content or ""


def _status(router: OnDemandRouter) -> dict[str, str]:
    with _openai(router) as client:
        return {m.id: (m.model_extra or {})["status"]["value"] for m in client.models.list()}


def _held_streams(router: OnDemandRouter, count: int) -> list[openai.Stream]:  # type: ignore[type-arg]
    """`count` streamed chats, each returned once its early head came: each is held."""
    client = _openai(router)
    return [
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"held {i}"}], stream=True
        )
        for i in range(count)
    ]


def _content(stream: openai.Stream) -> str:  # type: ignore[type-arg]
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def _raw_stream(router: OnDemandRouter, text: str) -> AbstractContextManager[httpx.Response]:
    """A streamed chat over plain httpx, so the SSE comment lines can be read."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    return httpx.stream("POST", f"{router.url}/v1/chat/completions", json=body, timeout=WAIT_S)


def _lines(reply: httpx.Response) -> Iterator[str]:
    """A streamed reply's SSE lines, without the blank ones between events."""
    return (line for line in reply.iter_lines() if line)


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_catalog_lists_the_unloaded_model_then_loaded(on_demand: OnDemandRouter) -> None:
    on_demand.loader.release()
    assert _status(on_demand) == {MODEL: "unloaded", OTHER: "unloaded"}
    client = ollama.Client(host=on_demand.url)
    assert [(m.model, m.size) for m in client.list().models] == [
        (MODEL, SIZE_BYTES), (OTHER, SIZE_BYTES)
    ]
    assert client.ps().models == []

    assert _ask(on_demand, "hello there") == "hello there"

    assert _status(on_demand) == {MODEL: "loaded", OTHER: "unloaded"}
    assert [m.model for m in client.list().models] == [MODEL, OTHER]
    (running,) = client.ps().models
    assert running.model == MODEL and running.size == SIZE_BYTES
    assert running.expires_at is not None
    now = datetime.now(UTC)
    assert now < running.expires_at < now + timedelta(seconds=301)


def test_concurrent_first_requests_load_once_and_all_get_answers(
    on_demand: OnDemandRouter,
) -> None:
    streams = 12
    with ThreadPoolExecutor(streams + 4) as pool:
        held = _held_streams(on_demand, streams)
        plain = [pool.submit(_ask, on_demand, f"plain {i}") for i in range(4)]
        streamed = [pool.submit(_content, s) for s in held]
        on_demand.loader.release()
        assert [f.result(WAIT_S) for f in plain] == [f"plain {i}" for i in range(4)]
        assert [f.result(WAIT_S).strip() for f in streamed] == [
            f"held {i}" for i in range(streams)
        ]
    assert on_demand.loader.load_calls[MODEL] == 1
    assert len(on_demand.loader.procs) == 1


def test_full_hold_queue_is_429_with_retry_after(log_dir: Path) -> None:
    with serve_on_demand(log_dir, MODELS, loading_comment_s=TICK_S, max_held_per_model=2) as router:
        held = _held_streams(router, 2)
        with pytest.raises(openai.RateLimitError) as refused:
            _ask(router, "one too many")
        assert refused.value.code == "model_queue_full"
        assert refused.value.response.headers["retry-after"] == "2"
        router.loader.release()
        assert [_content(s).strip() for s in held] == ["held 0", "held 1"]
        assert _ask(router, "room again") == "room again"


def test_failed_load_answers_every_held_request_with_the_cause(
    on_demand: OnDemandRouter,
) -> None:
    loader = on_demand.loader
    loader.fail_with = "torch.OutOfMemoryError: CUDA out of memory"
    with ThreadPoolExecutor(2) as pool:
        with _raw_stream(on_demand, "hi") as streamed:
            held = _held_streams(on_demand, 1)
            lines = _lines(streamed)
            assert next(lines) == f": loading {MODEL}"
            plain = pool.submit(_ask, on_demand, "plain")
            openai_streamed = pool.submit(_content, held[0])
            loader.release()
            rest = list(lines)
        assert streamed.status_code == 200
        assert set(rest[:-1]) <= {f": loading {MODEL}"}
        assert rest[-1].startswith("data: ") and '"code":"model_load_failed"' in rest[-1]
        assert "CUDA out of memory" in rest[-1] and "last log line" in rest[-1]
        with pytest.raises(openai.InternalServerError) as failed:
            plain.result(WAIT_S)
        assert failed.value.status_code == 503 and failed.value.code == "model_load_failed"
        assert "last log line: torch.OutOfMemoryError: CUDA out of memory" in failed.value.message
        with pytest.raises(openai.APIError, match="CUDA out of memory"):
            openai_streamed.result(WAIT_S)
    assert _status(on_demand)[MODEL] == "unloaded"

    loader.fail_with = None
    assert _ask(on_demand, "again") == "again"


def test_streamed_request_while_loading_gets_comments_then_the_stream(
    on_demand: OnDemandRouter,
) -> None:
    with _raw_stream(on_demand, "a b c") as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = _lines(reply)
        assert [next(lines), next(lines)] == [f": loading {MODEL}"] * 2
        on_demand.loader.release()
        events = [line for line in lines if not line.startswith(":")]
    assert events[-1] == "data: [DONE]"
    assert len(events) == 5 and all(e.startswith("data: {") for e in events[:-1])
    assert '"content":"a "' in events[0] and '"finish_reason":"stop"' in events[3]


def test_empty_ollama_generate_loads_and_keep_alive_0_unloads(
    on_demand: OnDemandRouter,
) -> None:
    on_demand.loader.release()
    client = ollama.Client(host=on_demand.url, timeout=WAIT_S)
    loaded = client.generate(model=MODEL, keep_alive="10m")
    assert loaded.done and loaded.done_reason == "load" and loaded.response == ""
    (running,) = client.ps().models
    assert running.model == MODEL and running.expires_at is not None
    assert running.expires_at > datetime.now(UTC) + timedelta(minutes=9)
    proc = on_demand.loader.procs[MODEL]

    unloaded = client.generate(model=MODEL, keep_alive=0)
    assert unloaded.done and unloaded.done_reason == "unload"
    _until(lambda: not client.ps().models, "the model is still loaded after keep_alive 0")
    _until(lambda: on_demand.loader.unloads[MODEL] == 1, "the loader did not unload it")
    assert proc.process.poll() is not None
    assert [m.model for m in client.list().models] == [MODEL, OTHER]
    assert _status(on_demand)[MODEL] == "unloaded"

    # NOTE: keep_alive 0 for a model not loaded answers at once and loads nothing.
    assert client.generate(model=OTHER, keep_alive=0).done_reason == "unload"
    assert on_demand.loader.load_calls[OTHER] == 0
    chat = client.chat(model=OTHER, messages=[], keep_alive="1m")
    assert chat.done_reason == "load" and chat.message.content == ""
    assert [m.model for m in client.ps().models] == [OTHER]


def test_openai_keep_alive_0_unloads_after_the_request(on_demand: OnDemandRouter) -> None:
    on_demand.loader.release()
    with _openai(on_demand) as client:
        reply = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "once"}],
            extra_body={"keep_alive": 0},
        )
    assert reply.choices[0].message.content == "once"
    _until(lambda: on_demand.loader.unloads[MODEL] == 1, "keep_alive 0 did not unload it")
    assert _status(on_demand)[MODEL] == "unloaded"
    assert _ask(on_demand, "loads again") == "loads again"
    assert on_demand.loader.load_calls[MODEL] == 2


def test_client_leaving_while_held_does_not_cancel_the_load(log_dir: Path) -> None:
    with serve_on_demand(log_dir, MODELS, loading_comment_s=TICK_S, max_held_per_model=2) as router:
        (stays,) = _held_streams(router, 1)
        with _raw_stream(router, "bye") as leaves:
            assert next(_lines(leaves)) == f": loading {MODEL}"
        # NOTE: the router sees the closed connection at once (uvicorn's connection_lost).
        time.sleep(10 * TICK_S)
        # NOTE: the place of the one that left is free again: no 429.
        (next_one,) = _held_streams(router, 1)
        router.loader.release()
        assert _content(stays).strip() == "held 0"
        assert _content(next_one).strip() == "held 0"
        assert router.loader.load_calls[MODEL] == 1


def test_the_only_held_client_leaving_still_loads_the_model(on_demand: OnDemandRouter) -> None:
    with _raw_stream(on_demand, "bye") as leaves:
        assert next(_lines(leaves)) == f": loading {MODEL}"
    time.sleep(10 * TICK_S)
    on_demand.loader.release()
    _until(lambda: _status(on_demand)[MODEL] == "loaded", "the load was cancelled")
    assert _ask(on_demand, "next") == "next"
    assert on_demand.loader.load_calls[MODEL] == 1


def test_unknown_model_is_404_listing_the_available_ones(on_demand: OnDemandRouter) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        _ask(on_demand, "hi", model="no-such-model")
    assert missing.value.code == "model_not_found"
    assert f"Available models: {MODEL}, {OTHER}" in missing.value.message
    with pytest.raises(ollama.ResponseError) as not_pulled:
        ollama.Client(host=on_demand.url).generate(model="nope", keep_alive="5m")
    assert not_pulled.value.status_code == 404 and "Available models" in str(not_pulled.value)
    assert on_demand.loader.load_calls == {}


def test_loading_progress_comes_as_reasoning_content(log_dir: Path) -> None:
    with serve_on_demand(
        log_dir, MODELS, loading_comment_s=TICK_S, loading_progress=True
    ) as router, _openai(router) as client:
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x y"}], stream=True
        )
        roles: list[str | None] = []
        reasoning: list[str] = []
        content: list[str] = []
        for chunk in stream:
            delta = chunk.choices[0].delta
            if thought := (delta.model_extra or {}).get("reasoning_content"):
                assert not content, f"progress {thought!r} after the answer began"
                roles.append(delta.role)
                reasoning.append(thought)
                if len(reasoning) == 3:
                    router.loader.release()
            elif delta.content:
                content.append(delta.content)
    assert reasoning[0] == f"Loading model {MODEL}…\n"
    assert roles == [None] * len(reasoning)  # NOTE: the upstream's own first chunk gives it
    assert all(re.fullmatch(r"\d+ s\n", waited) for waited in reasoning[1:-1])
    assert re.fullmatch(r"Loaded in \d+\.\d s\.\n", reasoning[-1])
    assert len(reasoning) >= 4
    assert "".join(content) == "x y "


def test_loading_progress_is_off_unless_asked() -> None:
    assert not parse_args([])[0].loading_progress
    assert parse_args(["--loading-progress"])[0].loading_progress
