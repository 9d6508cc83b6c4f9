"""Prompt token ids from text or ids, and the checks every generating surface runs on them."""

from __future__ import annotations

from typing import cast

from engine.server.context import ServerContext
from engine.server.http_errors import bad_request

# NOTE: the prompt shapes of /v1/completions and native /generate: one text, texts, one id
# list, or id lists.
PromptInput = str | list[str] | list[int] | list[list[int]]


def prompts_of(ctx: ServerContext, prompt: PromptInput) -> tuple[list[list[int]], bool]:
    """Token ids per prompt, and whether ``prompt`` was a batch (texts or id lists).

    An empty list is one empty prompt (``check_prompt`` refuses it).
    """
    if isinstance(prompt, str):
        return [ctx.tokenizer.encode(prompt)], False
    if prompt and isinstance(prompt[0], str):
        return [ctx.tokenizer.encode(p) for p in prompt], True
    if prompt and isinstance(prompt[0], list):
        return [list(p) for p in prompt], True
    # NOTE: mypy does not narrow a union of lists by its first item; the checks above did.
    return [list(cast(list[int], prompt))], False


def check_prompt(
    ctx: ServerContext, ids: list[int], max_tokens: int | None = None, param: str = "max_tokens"
) -> int:
    """A 400 for an empty prompt, one that fills the context, or a ``max_tokens`` (named
    ``param`` in the request) that the context cannot hold after the prompt.

    Returns the completion budget: ``max_tokens``, or all the context leaves when it is None.
    NOTE: as vLLM, an explicit budget is refused rather than shortened; native /generate
    passes none, so its max_new_tokens is clamped to the context by the scheduler, as SGLang.
    """
    if not ids:
        raise bad_request("the prompt is empty")
    if len(ids) >= ctx.context_length:
        raise bad_request(
            f"the prompt has {len(ids)} tokens; this model's context length is {ctx.context_length}"
        )
    if max_tokens is None:
        return ctx.context_length - len(ids)
    if len(ids) + max_tokens > ctx.context_length:
        raise bad_request(
            f"This model's maximum context length is {ctx.context_length} tokens. However, you "
            f"requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} "
            f"in the completion). Please reduce the length of the messages or completion.",
            param=param,
        )
    return max_tokens
