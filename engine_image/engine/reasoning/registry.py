"""Reasoning formats by ``--reasoning-parser`` name (SGLang's names)."""

from __future__ import annotations

from engine.reasoning.parser import ReasoningFormat

REASONING_FORMATS: dict[str, ReasoningFormat] = {
    # NOTE: Qwen3 writes the opening tag itself; without it the output is all answer.
    "qwen3": ReasoningFormat(),
    # NOTE: DeepSeek-R1's template opens the block in the prompt; the output may lack the tag.
    "deepseek-r1": ReasoningFormat(starts_in_reasoning=True),
}


def reasoning_format(name: str) -> ReasoningFormat:
    try:
        return REASONING_FORMATS[name]
    except KeyError:
        known = ", ".join(REASONING_FORMATS)
        raise ValueError(f"unknown reasoning parser {name!r}; known: {known}") from None
