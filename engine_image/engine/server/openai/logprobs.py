"""Log-probabilities in OpenAI's chat and completions formats."""

from __future__ import annotations

from engine.server.openai.protocol import (
    ChoiceLogprobs,
    CompletionLogprobs,
    TokenLogprob,
    TopLogprob,
)
from engine.text.tokenizer import TextTokenizer


def _token(tokenizer: TextTokenizer, token_id: int) -> tuple[str, list[int]]:
    text = tokenizer.decode([token_id])
    return text, list(text.encode("utf-8"))


def chat_logprobs(
    tokenizer: TextTokenizer,
    token_ids: list[int],
    logprobs: list[float],
    top: list[list[tuple[float, int]]],
) -> ChoiceLogprobs:
    content = []
    for i, (token_id, logprob) in enumerate(zip(token_ids, logprobs)):
        text, raw = _token(tokenizer, token_id)
        alternatives = []
        for alt_logprob, alt_id in top[i] if i < len(top) else []:
            alt_text, alt_raw = _token(tokenizer, alt_id)
            alternatives.append(TopLogprob(token=alt_text, logprob=alt_logprob, bytes=alt_raw))
        content.append(TokenLogprob(token=text, logprob=logprob, bytes=raw, top_logprobs=alternatives))
    return ChoiceLogprobs(content=content)


def completion_logprobs(
    tokenizer: TextTokenizer,
    token_ids: list[int],
    logprobs: list[float],
    top: list[list[tuple[float, int]]],
    text_offset: int,
) -> CompletionLogprobs:
    tokens = [_token(tokenizer, t)[0] for t in token_ids]
    offsets = []
    for token in tokens:
        offsets.append(text_offset)
        text_offset += len(token)
    top_maps = [{_token(tokenizer, alt_id)[0]: lp for lp, alt_id in step} for step in top] if top else None
    return CompletionLogprobs(tokens=tokens, token_logprobs=list(logprobs), top_logprobs=top_maps, text_offset=offsets)
