"""DetokenizerManager.handle: per-rid state, message mapping, routing to tokenizer workers,
cleanup on finish."""

from __future__ import annotations

from engine.detokenizer.manager import DetokenizerManager
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    AbortRequest,
    ControlResponse,
    DetokenizeOptions,
    ExpertDistributionDump,
    RequestDelta,
    RequestError,
    TextOutputs,
    TokenOutputs,
    WeightsUpdated,
)
from engine.text.tokenizer import TextTokenizer

IM_END = 2


def token_outputs(
    rids: list[str], new_token_ids: list[list[int]], finish_reasons: list[FinishReason | None]
) -> TokenOutputs:
    return TokenOutputs(
        [
            RequestDelta(
                rid=rid,
                token_ids=ids,
                logprobs=[-0.5] * len(ids),
                top_logprobs=[[(-0.5, i)] for i in ids],
                finish_reason=finish,
                prompt_tokens=7,
                completion_tokens=len(ids),
                cached_tokens=3,
            )
            for rid, ids, finish in zip(rids, new_token_ids, finish_reasons, strict=True)
        ]
    )


def test_two_interleaved_requests(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer)
    ids = {
        "a": tokenizer.encode("Hello 世界 END tail"),
        "b": tokenizer.encode("Bonjour 😀 à tous") + [IM_END],
    }
    assert manager.handle(DetokenizeOptions(["a"], skip_special_tokens=True, stops=["END"])) == []
    assert manager.handle(DetokenizeOptions(["b"], skip_special_tokens=False, stops=[])) == []
    texts = {"a": "", "b": ""}
    for step in range(max(len(seq) for seq in ids.values())):
        rids = [rid for rid in ("b", "a") if step < len(ids[rid])]
        message = token_outputs(
            rids,
            [[ids[rid][step]] for rid in rids],
            [FinishReason("stop") if step == len(ids[rid]) - 1 else None for rid in rids],
        )
        [(worker, reply)] = manager.handle(message)
        assert worker == 0 and isinstance(reply, TextOutputs)
        assert len(reply.deltas) == len(message.deltas)
        for got, sent in zip(reply.deltas, message.deltas, strict=True):
            for field in RequestDelta.__struct_fields__:
                if field != "text":
                    assert getattr(got, field) == getattr(sent, field), field
            texts[got.rid] += got.text
        live = {rid for rid in ids if step < len(ids[rid]) - 1}
        assert set(manager.active_rids) == live
    assert texts == {"a": "Hello 世界 ", "b": "Bonjour 😀 à tous<|im_end|>"}
    assert manager.active_rids == []


def test_abort_finish_cleans_up(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer)
    manager.handle(DetokenizeOptions(["r"], skip_special_tokens=True, stops=[]))
    manager.handle(token_outputs(["r"], [tokenizer.encode("partial")], [None]))
    assert manager.active_rids == ["r"]
    [(_, reply)] = manager.handle(token_outputs(["r"], [[]], [FinishReason("abort")]))
    assert isinstance(reply, TextOutputs) and [d.text for d in reply.deltas] == [""]
    assert manager.active_rids == []


def test_refused_request_cleans_up(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer)
    manager.handle(DetokenizeOptions(["r-0", "r-1"], skip_special_tokens=True, stops=[]))
    assert manager.active_rids == ["r-0", "r-1"]
    for rid in ("r-0", "r-1"):
        manager.handle(RequestError(rid, "the grammar did not compile"))
    assert manager.active_rids == []


def test_rid_reused_after_finish_starts_fresh(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer)
    ids = tokenizer.encode("same")
    for _ in range(2):
        manager.handle(DetokenizeOptions(["r"], skip_special_tokens=True, stops=[]))
        [(_, reply)] = manager.handle(token_outputs(["r"], [ids], [FinishReason("length")]))
        assert isinstance(reply, TextOutputs) and [d.text for d in reply.deltas] == ["same"]


def test_errors_and_control_responses_pass_through(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer)
    error = RequestError("r", "prompt too long")
    control = ControlResponse("c", True, payload=ExpertDistributionDump("layer_id,expert_id,count\n"))
    assert manager.handle(error) == [(0, error)]
    assert manager.handle(control) == [(0, control)]
    assert manager.handle(AbortRequest(rid="r")) == []


def test_outputs_of_one_step_split_by_owning_worker(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer, workers=3)
    manager.handle(DetokenizeOptions(["a"], skip_special_tokens=True, stops=[], worker=2))
    manager.handle(DetokenizeOptions(["b-0", "b-1"], skip_special_tokens=True, stops=[], worker=0))
    ids = tokenizer.encode("hi")
    replies = manager.handle(token_outputs(["b-0", "a", "b-1"], [ids] * 3, [None] * 3))
    routed = {worker: [d.rid for d in reply.deltas] for worker, reply in replies if isinstance(reply, TextOutputs)}
    assert routed == {0: ["b-0", "b-1"], 2: ["a"]}


def test_answers_go_to_their_sender_and_weight_updates_to_all(tokenizer: TextTokenizer) -> None:
    manager = DetokenizerManager(tokenizer, workers=3)
    manager.handle(DetokenizeOptions(["r"], skip_special_tokens=True, stops=[], worker=1))
    duplicate = RequestError("r", "request id 'r' is already in use", worker=2)
    assert manager.handle(duplicate) == [(2, duplicate)]
    assert manager.active_rids == ["r"], "a duplicate's refusal leaves the owner's request alone"
    info = ControlResponse("c", True, worker=1)
    assert manager.handle(info) == [(1, info)]
    updated = ControlResponse("u", True, payload=WeightsUpdated(2, "/m"), worker=1)
    assert manager.handle(updated) == [(0, updated), (1, updated), (2, updated)]
