"""Tool calling through the official openai and anthropic clients on a real SmolLM2 server.

The server runs with --tool-call-parser qwen25 and --reasoning-parser qwen3. SmolLM2's chat
template knows no tools, so "auto" is checked for shape only; "required" and named choices are
constrained to valid calls on any model, so their calls must validate against the schemas.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import jsonschema
import ollama
import openai
import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.engine.tools.tool_defs import (
    ANTHROPIC_TOOLS,
    MODEL,
    SCHEMAS,
    TOOLS,
    WEATHER_PARAMETERS,
    check_call,
    streamed_calls,
)
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY: dict[str, Any] = {"temperature": 0, "max_tokens": 48}


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "get_time"}}],
    ids=["required", "named"],
)
def test_forced_call_is_valid_and_the_same_streamed_or_not(
    client: OpenAI, tool_choice: Any
) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice=tool_choice, **GREEDY
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls or []
    assert calls, "a forced tool choice must produce a call"
    for call in calls:
        assert call.id.startswith("call_") and call.type == "function"
        check_call(call.function.name, call.function.arguments)
    if isinstance(tool_choice, dict):
        assert [c.function.name for c in calls] == ["get_time"]

    streamed, finish = streamed_calls(
        client, messages=ASK, tools=TOOLS, tool_choice=tool_choice, **GREEDY
    )
    assert finish == "tool_calls"
    assert [(name, json.loads(args)) for _, name, args in streamed] == [
        (c.function.name, json.loads(c.function.arguments)) for c in calls
    ]


def test_auto_with_the_parser_answers_or_calls(client: OpenAI) -> None:
    """SmolLM2 may or may not call; either way the reply has OpenAI's shape."""
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=16
    )
    choice = reply.choices[0]
    assert choice.finish_reason in ("stop", "length", "tool_calls")
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        for call in choice.message.tool_calls:
            assert call.function.name in SCHEMAS
            assert isinstance(json.loads(call.function.arguments), dict)
    else:
        assert choice.message.content
    # NOTE: --reasoning-parser qwen3 is on; SmolLM2 writes no <think> block.
    assert getattr(choice.message, "reasoning_content", None) is None


def test_history_with_calls_and_results_is_accepted(client: OpenAI) -> None:
    history: list[Any] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "unit": "celsius"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
    ]
    # NOTE: only the prompt matters here; two tokens keep the test short.
    reply = client.chat.completions.create(
        model=MODEL, messages=history, tools=TOOLS, tool_choice="auto", max_tokens=2
    )
    assert reply.choices[0].finish_reason in ("length", "stop")
    assert reply.usage is not None and reply.usage.prompt_tokens > 40


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": None, "tool_choice": "required"}, "tool_choice"),
        ({"tools": TOOLS + TOOLS[:1], "tool_choice": "required"}, "tools"),
        ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
        ({"tool_choice": "sometimes"}, None),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, None),
        (
            {
                "tool_choice": "required",
                "messages": [
                    *ASK,
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "get_time", "arguments": "{not json"},
                            }
                        ],
                    },
                ],
            },
            "messages",
        ),
    ],
    ids=[
        "unknown-named",
        "required-no-tools",
        "duplicate",
        "with-format",
        "bad-choice",
        "bad-name",
        "bad-history",
    ],
)
def test_bad_tool_requests_are_openai_400s(
    server: EngineServer, body: dict[str, Any], param: str | None
) -> None:
    request = {"model": MODEL, "messages": ASK, "tools": TOOLS, "max_tokens": 4, **body}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=request, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


# ---------------------------------------------------------------- Anthropic

def test_anthropic_named_tool_gives_a_tool_use_block(claude: Anthropic) -> None:
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 48,
        "messages": ASK,
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "extra_body": {"temperature": 0},
    }
    message = claude.messages.create(**kwargs)
    assert message.stop_reason == "tool_use"
    uses = [block for block in message.content if block.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, WEATHER_PARAMETERS)

    with claude.messages.stream(**kwargs) as stream:
        events = list(stream)
        final = stream.get_final_message()
    partial = "".join(
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    )
    assert json.loads(partial) == uses[0].input
    assert final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
        ("tool_use", uses[0].input)
    ]


def test_anthropic_tool_result_history_is_accepted(claude: Anthropic) -> None:
    message = claude.messages.create(
        model=MODEL,
        max_tokens=2,
        tools=ANTHROPIC_TOOLS,
        messages=[
            *ASK,
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris", "unit": "celsius"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 degrees"},
                    {"type": "text", "text": "And the time at UTC+1?"},
                ],
            },
        ],
    )
    assert message.stop_reason in ("max_tokens", "end_turn")
    assert message.usage.input_tokens > 40


def test_anthropic_bad_tool_choice_is_an_anthropic_400(claude: Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL,
            max_tokens=4,
            messages=ASK,
            tools=ANTHROPIC_TOOLS,
            tool_choice={"type": "tool"},  # type: ignore[typeddict-item]
        )
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    assert "name" in caught.value.body["error"]["message"]  # type: ignore[index]


def test_openai_client_error_type_for_unknown_named_tool(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}},
            max_tokens=4,
        )


# ---------------------------------------------------------------- Ollama


def test_ollama_chat_with_tools_has_ollamas_shape(server: EngineServer) -> None:
    reply = ollama.Client(host=server.url, timeout=300).chat(
        model=MODEL, messages=ASK, tools=TOOLS, options={"num_predict": 4, "temperature": 0}
    )
    assert reply.done and reply.message.role == "assistant"
    for call in reply.message.tool_calls or []:
        assert call.function.name in SCHEMAS and isinstance(call.function.arguments, dict)
