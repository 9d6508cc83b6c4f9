"""What the load generator sends: random prompts of set lengths, a shared system prompt with
distinct questions, and multi-turn chats that grow. Deterministic from a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
TOKEN_RANGE = (100, 40000)  # ordinary vocabulary ids: no special or control tokens
WORDS = ("river", "stone", "lamp", "garden", "harbor", "signal", "copper", "meadow", "orbit")


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Request:
    """One request: a plain prompt for /v1/completions or messages for /v1/chat/completions."""

    max_tokens: int
    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] = ()

    @property
    def endpoint(self) -> str:
        return COMPLETIONS if self.prompt is not None else CHAT

    def body(self, model: str, extra: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            **extra,
        }
        if self.prompt is not None:
            body["prompt"] = self.prompt
        else:
            body["messages"] = [{"role": role, "content": text} for role, text in self.messages]
        return body


def random_text(tokenizer: Tokenizer, tokens: int, rng: random.Random) -> str:
    """Text of about `tokens` tokens from random vocabulary ids (decoded, re-encoded, cut)."""
    ids = [rng.randrange(*TOKEN_RANGE) for _ in range(tokens)]
    # NOTE: decoding and re-encoding can merge or split tokens; the cut keeps the count.
    return tokenizer.decode(
        tokenizer.encode(tokenizer.decode(ids), add_special_tokens=False)[:tokens]
    )


def random_requests(
    tokenizer: Tokenizer, count: int, prompt_len: int, output_len: int, seed: int
) -> list[Request]:
    rng = random.Random(seed)
    return [
        Request(output_len, prompt=random_text(tokenizer, prompt_len, rng)) for _ in range(count)
    ]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def system_prompt(tokenizer: Tokenizer, tokens: int, seed: int) -> str:
    """A system prompt of at least `tokens` tokens made of plain sentences."""
    rng = random.Random(seed)
    text = "You are a careful assistant. Use the following notes when you answer."
    while len(tokenizer.encode(text, add_special_tokens=False)) < tokens:
        text += " " + " ".join(_sentence(rng, 12) for _ in range(10))
    return text


def question(rng: random.Random, index: int) -> str:
    return f"Question {index}: what does the note about the {rng.choice(WORDS)} {rng.choice(WORDS)} say?"


def shared_prefix_requests(
    tokenizer: Tokenizer, count: int, system_tokens: int, output_len: int, seed: int
) -> list[Request]:
    """`count` chats sharing one long system prompt, each with a short distinct question."""
    system = system_prompt(tokenizer, system_tokens, seed)
    rng = random.Random(seed + 1)
    return [
        Request(output_len, messages=(("system", system), ("user", question(rng, i))))
        for i in range(count)
    ]


@dataclass(frozen=True)
class Conversation:
    """A chat whose user turns are sent one after another; each request carries the history."""

    system: str
    user_turns: tuple[str, ...]
    output_len: int

    def request(self, history: list[tuple[str, str]]) -> Request:
        return Request(self.output_len, messages=(("system", self.system), *history))


def conversations(count: int, turns: int, output_len: int, seed: int) -> list[Conversation]:
    rng = random.Random(seed)
    return [
        Conversation(
            f"You are assistant number {c}. Answer briefly.",
            tuple(f"{_sentence(rng, 20)} {question(rng, t)}" for t in range(turns)),
            output_len,
        )
        for c in range(count)
    ]
