"""A forced tool choice (required, named, Anthropic "any") always answers with its calls.

Greedy SmolLM2 asked for the time in Tokyo under tool_choice "required" repeats the same
get_time call inside the constrained array until max_tokens (issue #22). The reply must carry
the complete calls decoded so far as tool_calls (never the raw array as content), the stream
the same calls, and ``parallel_tool_calls: false`` exactly one call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.engine.tools.tool_defs import ANTHROPIC_TOOLS, MODEL, TOOLS, check_call, streamed_calls

pytestmark = pytest.mark.slow

# NOTE: found by trying prompts: greedy SmolLM2 loops on this one (48 tokens: 1 complete call
# and a cut one; 120 tokens: several repeats).
LOOPING: dict[str, Any] = {
    "messages": [{"role": "user", "content": "What time is it in Tokyo?"}],
    "tools": TOOLS,
    "temperature": 0,
}


def _calls(reply: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c.function.name, check_call(c.function.name, c.function.arguments))
        for c in reply.choices[0].message.tool_calls or []
    ]


@pytest.mark.parametrize("max_tokens", [48, 120])
def test_required_cut_off_answers_the_complete_calls(client: OpenAI, max_tokens: int) -> None:
    reply = client.chat.completions.create(
        model=MODEL, tool_choice="required", max_tokens=max_tokens, **LOOPING
    )
    choice = reply.choices[0]
    # NOTE: as vLLM and OpenAI: a reply cut by max_tokens says "length", calls or not.
    assert choice.finish_reason == "length"
    assert choice.message.content is None, "the constrained JSON must not leak as content"
    calls = _calls(reply)
    assert calls and all(name == "get_time" for name, _ in calls)
    assert reply.usage is not None and reply.usage.completion_tokens == max_tokens

    streamed, finish = streamed_calls(
        client, tool_choice="required", max_tokens=max_tokens, **LOOPING
    )
    assert finish == "length"
    assert [(name, json.loads(args)) for _, name, args in streamed] == calls


def test_no_parallel_calls_means_exactly_one(client: OpenAI) -> None:
    kwargs: dict[str, Any] = {"tool_choice": "required", "max_tokens": 120, **LOOPING}
    reply = client.chat.completions.create(model=MODEL, parallel_tool_calls=False, **kwargs)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = _calls(reply)
    assert len(calls) == 1

    streamed, finish = streamed_calls(client, parallel_tool_calls=False, **kwargs)
    assert finish == "tool_calls"
    assert [(name, json.loads(args)) for _, name, args in streamed] == calls


def test_named_call_cut_inside_its_arguments_sends_no_half_call(client: OpenAI) -> None:
    kwargs: dict[str, Any] = {
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
        "max_tokens": 8,
        **LOOPING,
    }
    reply = client.chat.completions.create(model=MODEL, **kwargs)
    choice = reply.choices[0]
    assert choice.finish_reason == "length"
    assert not choice.message.tool_calls
    assert not choice.message.content, "the cut JSON must not leak as content"

    streamed, finish = streamed_calls(client, **kwargs)
    assert finish == "length" and streamed == []


def test_anthropic_any_cut_off_gives_tool_use_blocks(claude: Anthropic) -> None:
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 120,
        "messages": LOOPING["messages"],
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": {"type": "any"},
        "extra_body": {"temperature": 0},
    }
    message = claude.messages.create(**kwargs)
    assert message.stop_reason == "max_tokens"
    assert [b.type for b in message.content if b.type != "tool_use"] == []
    inputs = [b.input for b in message.content if b.type == "tool_use"]
    assert len(inputs) > 1

    with claude.messages.stream(**kwargs) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert [b.input for b in final.content if b.type == "tool_use"] == inputs


def test_anthropic_any_without_parallel_use_gives_one_call(claude: Anthropic) -> None:
    message = claude.messages.create(
        model=MODEL,
        max_tokens=120,
        messages=LOOPING["messages"],
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body={"temperature": 0},
    )
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["tool_use"]
