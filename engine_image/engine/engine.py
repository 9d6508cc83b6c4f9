"""The offline engine: the whole generation pipeline in one process, for tests and benchmarks.

``Engine(model_path=...).generate(prompts or input_ids, sampling_params)`` returns SGLang's
output shape: ``{"text", "output_ids", "meta_info"}`` per sequence.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from engine.constrained import DEFAULT_GRAMMAR_BACKEND, create_grammar_backend
from engine.core.errors import InvalidRequest
from engine.engine_config import EngineConfig
from engine.gguf.hf_view import hf_directory
from engine.runtime.model_runner import ModelRunner
from engine.sampling.params import SamplingParams
from engine.scheduler.request import Req
from engine.scheduler.scheduler import Scheduler
from engine.server.native_output import native_result
from engine.text.stop_strings import trim_at_stop
from engine.text.tokenizer_files import load_tokenizer

Prompt = str | Sequence[str] | None
TokenIds = Sequence[int] | Sequence[Sequence[int]] | None
ParamsArg = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


class Engine:
    def __init__(self, model_path: str, **kwargs: Any) -> None:
        self.config = EngineConfig(model_path=model_path, **kwargs)
        self.tokenizer = load_tokenizer(self.config.tokenizer_path or hf_directory(model_path))
        self.runner = ModelRunner(self.config)
        extra_eos = [self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else []
        mc = self.runner.model_config
        grammars = create_grammar_backend(
            DEFAULT_GRAMMAR_BACKEND, self.tokenizer, mc.vocab_size, sorted({*mc.eos_token_ids, *extra_eos})
        )
        self.scheduler = Scheduler(self.runner, self._decode_tail, extra_eos, grammars)

    def generate(
        self,
        prompt: Prompt = None,
        sampling_params: ParamsArg = None,
        input_ids: TokenIds = None,
        return_logprob: bool = False,
        top_logprobs_num: int = 0,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """Generates for one prompt (a dict) or a batch (a list, n entries per prompt)."""
        prompts, batched = self._token_prompts(prompt, input_ids)
        params = self._params(sampling_params, len(prompts))
        groups = [
            self._requests(ids, p, return_logprob, top_logprobs_num) for ids, p in zip(prompts, params)
        ]
        start = time.perf_counter()
        for group in groups:
            self.scheduler.add_group(group)
        pending = {req.rid for group in groups for req in group}
        while pending:
            outputs = self.scheduler.step()
            # NOTE: a refused request (its grammar did not compile) ends as an "abort".
            pending.difference_update(refused.rid for refused in outputs.refused)
            for delta in outputs.deltas:
                if delta.finish_reason is not None:
                    pending.discard(delta.rid)
            if pending and self.scheduler.is_idle:
                raise RuntimeError("the scheduler went idle with requests unfinished")
        # NOTE: with the overlap scheduler a step may still run for requests that ended.
        self.scheduler.sync()
        latency = time.perf_counter() - start
        results = [self._result(req, latency, return_logprob) for group in groups for req in group]
        return results if batched or len(results) > 1 else results[0]

    def flush_cache(self) -> bool:
        return self.scheduler.flush_cache()

    def memory_stats(self) -> dict[str, int]:
        tree = self.scheduler.kv.tree
        return {
            "max_total_tokens": self.runner.max_total_tokens,
            "kv_pool_bytes": self.runner.kv_pool.nbytes,
            "free_slots": self.runner.allocator.available_size(),
            "radix_cache_tokens": tree.total_size(),
            "radix_evictable_tokens": tree.evictable_size(),
            "radix_protected_tokens": tree.protected_size(),
            "free_request_slots": self.runner.req_to_token_pool.available_size(),
        }

    # ------------------------------------------------------------------ helpers

    def _decode_tail(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def _token_prompts(self, prompt: Prompt, input_ids: TokenIds) -> tuple[list[list[int]], bool]:
        # NOTE: text prompts are encoded as /generate encodes them: with the tokenizer's
        # default special tokens (a BOS where the tokenizer adds one).
        if (prompt is None) == (input_ids is None):
            raise InvalidRequest("give exactly one of prompt or input_ids")
        if prompt is not None:
            if isinstance(prompt, str):
                return [self.tokenizer.encode(prompt)], False
            if not prompt:
                raise InvalidRequest("the batch of prompts is empty")
            return [self.tokenizer.encode(p) for p in prompt], True
        assert input_ids is not None
        if not input_ids:
            raise InvalidRequest("the prompt is empty")
        # NOTE: mypy does not narrow through all(); the casts rest on the check itself.
        if all(isinstance(t, int) for t in input_ids):
            return [list(cast(Sequence[int], input_ids))], False
        return [list(ids) for ids in cast(Sequence[Sequence[int]], input_ids)], True

    @staticmethod
    def _params(sampling_params: ParamsArg, count: int) -> list[SamplingParams]:
        if sampling_params is None or isinstance(sampling_params, Mapping):
            return [SamplingParams.from_dict(sampling_params or {}) for _ in range(count)]
        if len(sampling_params) != count:
            raise InvalidRequest(f"got {len(sampling_params)} sampling_params for {count} prompts")
        return [SamplingParams.from_dict(p) for p in sampling_params]

    def _requests(
        self, ids: list[int], params: SamplingParams, return_logprob: bool, top_logprobs_num: int
    ) -> list[Req]:
        params.validate(self.runner.model_config.vocab_size)
        rid = uuid.uuid4().hex
        samples = params.per_sample()
        rids = [rid] if len(samples) == 1 else [f"{rid}-{i}" for i in range(len(samples))]
        return [
            self.scheduler.new_request(r, ids, sample, return_logprob, top_logprobs_num)
            for r, sample in zip(rids, samples, strict=True)
        ]

    def _result(self, req: Req, latency: float, return_logprob: bool) -> dict[str, Any]:
        params = req.params
        text = self.tokenizer.decode(req.output_ids, params.skip_special_tokens)
        if params.stop and not params.no_stop_trim:
            text = trim_at_stop(text, params.stop)
        assert req.finish_reason is not None
        return native_result(
            req.rid,
            text,
            req.output_ids,
            (len(req.input_ids), len(req.output_ids), req.cached_tokens),
            req.finish_reason,
            latency,
            req.output_logprobs if return_logprob else None,
            req.output_top_logprobs if return_logprob else (),
        )
