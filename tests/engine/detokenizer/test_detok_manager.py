"""DetokenizerManager.handle: per-rid state, message mapping, cleanup on finish."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from engine.detokenizer.manager import DetokenizerManager
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    AbortRequest,
    ControlResponse,
    RequestError,
    TextOutputs,
    TokenOutputs,
)

IM_END = 2


def token_outputs(
    rids: list[str],
    new_token_ids: list[list[int]],
    finish_reasons: list[FinishReason | None],
    skip_special_tokens: list[bool] | None = None,
    stops: list[list[str]] | None = None,
) -> TokenOutputs:
    n = len(rids)
    return TokenOutputs(
        rids=rids,
        new_token_ids=new_token_ids,
        new_logprobs=[[-0.5] * len(ids) for ids in new_token_ids],
        new_top_logprobs=[[[(-0.5, i)] for i in ids] for ids in new_token_ids],
        finish_reasons=finish_reasons,
        prompt_tokens=[7] * n,
        completion_tokens=[len(ids) for ids in new_token_ids],
        cached_tokens=[3] * n,
        skip_special_tokens=skip_special_tokens or [True] * n,
        stops=stops or [[] for _ in range(n)],
    )


def test_two_interleaved_requests(tokenizer: PreTrainedTokenizerBase) -> None:
    manager = DetokenizerManager(tokenizer)
    ids = {
        "a": tokenizer.encode("Hello 世界 END tail"),
        "b": tokenizer.encode("Bonjour 😀 à tous") + [IM_END],
    }
    skip = {"a": True, "b": False}
    stops = {"a": ["END"], "b": []}
    texts = {"a": "", "b": ""}
    for step in range(max(len(seq) for seq in ids.values())):
        rids = [rid for rid in ("b", "a") if step < len(ids[rid])]
        message = token_outputs(
            rids,
            [[ids[rid][step]] for rid in rids],
            [FinishReason("stop") if step == len(ids[rid]) - 1 else None for rid in rids],
            skip_special_tokens=[skip[rid] for rid in rids],
            stops=[stops[rid] for rid in rids],
        )
        reply = manager.handle(message)
        assert isinstance(reply, TextOutputs)
        for field in TextOutputs.__struct_fields__:
            if field != "texts":
                assert getattr(reply, field) == getattr(message, field), field
        for rid, text in zip(reply.rids, reply.texts, strict=True):
            texts[rid] += text
        live = {rid for rid in ids if step < len(ids[rid]) - 1}
        assert set(manager.active_rids) == live
    assert texts == {"a": "Hello 世界 ", "b": "Bonjour 😀 à tous<|im_end|>"}
    assert manager.active_rids == []


def test_abort_finish_cleans_up(tokenizer: PreTrainedTokenizerBase) -> None:
    manager = DetokenizerManager(tokenizer)
    manager.handle(token_outputs(["r"], [tokenizer.encode("partial")], [None]))
    assert manager.active_rids == ["r"]
    reply = manager.handle(token_outputs(["r"], [[]], [FinishReason("abort")]))
    assert isinstance(reply, TextOutputs) and reply.texts == [""]
    assert manager.active_rids == []


def test_rid_reused_after_finish_starts_fresh(tokenizer: PreTrainedTokenizerBase) -> None:
    manager = DetokenizerManager(tokenizer)
    ids = tokenizer.encode("same")
    for _ in range(2):
        reply = manager.handle(token_outputs(["r"], [ids], [FinishReason("length")]))
        assert isinstance(reply, TextOutputs) and reply.texts == ["same"]


def test_errors_and_control_responses_pass_through(tokenizer: PreTrainedTokenizerBase) -> None:
    manager = DetokenizerManager(tokenizer)
    error = RequestError("r", "prompt too long")
    control = ControlResponse("c", True, payload={"k": 1})
    assert manager.handle(error) is error
    assert manager.handle(control) is control
    assert manager.handle(AbortRequest(rid="r")) is None
