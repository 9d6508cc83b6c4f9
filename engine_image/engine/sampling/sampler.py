"""Batched next-token sampling from a step's logits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.draw import exponential_race
from engine.sampling.filters import filter_probs
from engine.sampling.penalties import RequestPenaltyState, apply_penalties


@dataclass(frozen=True)
class SampleOutput:
    """The tokens chosen for one step.

    `logprobs` [B] fp32 is each chosen token's log-probability; `top_logprobs[i]` is
    (token ids, log-probabilities) of row i's most likely tokens, most likely first.
    Both are None unless requested.
    """

    next_token_ids: torch.Tensor  # [B] int64
    logprobs: torch.Tensor | None
    top_logprobs: list[tuple[list[int], list[float]]] | None
    # Set by ``to_host`` on CUDA: recorded once the copies to the host have run.
    copied: torch.cuda.Event | None = None

    def to_host(self) -> SampleOutput:
        """This output with its tensors in (pinned) host memory, copied without waiting:
        ``wait_on_host`` before reading them. Host tensors come back as they are."""
        if self.next_token_ids.device.type != "cuda":
            return self
        ids = _copy_to_host(self.next_token_ids)
        logprobs = _copy_to_host(self.logprobs) if self.logprobs is not None else None
        copied = torch.cuda.Event()
        copied.record()
        return SampleOutput(ids, logprobs, self.top_logprobs, copied)

    def wait_on_host(self) -> None:
        """Waits for ``to_host``'s copies (only those: not for work queued after them)."""
        if self.copied is not None:
            self.copied.synchronize()


class Sampler:
    """Turns logits into next tokens; pure torch, knows nothing of the model or scheduler.

    Per step: penalties -> logit_bias -> log-probs -> greedy rows take the argmax; sampled rows
    divide by temperature, softmax, filter with top-k / top-p / min-p and draw.

    NOTE: log-probs are the log_softmax of the penalised (and biased) logits BEFORE temperature and
    filtering (vLLM's and SGLang's "raw" log-probs): they describe the model's
    distribution, not the sampling one, so a filtered-out token still has a finite value.
    """

    def sample(
        self,
        logits: torch.Tensor,
        info: SamplingBatchInfo,
        *,
        penalty_states: Sequence[RequestPenaltyState | None] | None = None,
        return_logprob: bool = False,
        top_logprobs_nums: Sequence[int] | None = None,
    ) -> SampleOutput:
        """Sample one token per row of `logits` [B, V] (any float dtype; computed in fp32).

        `penalty_states[i]` is row i's state (None for rows without penalties); it may be
        omitted when no row uses penalties. `top_logprobs_nums[i]` is how many top
        log-probs row i wants (0 for none) and requires `return_logprob`.
        """
        _check_batch(logits, info, return_logprob, top_logprobs_nums)
        if info.penalties is not None:
            if penalty_states is None:
                raise ValueError("the batch uses penalties but no penalty_states were given")
            logits = apply_penalties(logits, info.penalties, penalty_states)
        else:
            logits = logits.float()
        if info.logit_bias is not None:
            logits = info.logit_bias.apply(logits)

        if info.all_greedy:
            next_token_ids = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits / info.temperatures, dim=-1)
            sampled = exponential_race(filter_probs(probs, info), info.generators)
            next_token_ids = torch.where(info.greedy_mask, logits.argmax(dim=-1), sampled)

        if not return_logprob:
            return SampleOutput(next_token_ids=next_token_ids, logprobs=None, top_logprobs=None)
        all_logprobs = torch.log_softmax(logits, dim=-1)
        chosen = all_logprobs.gather(1, next_token_ids.unsqueeze(1)).squeeze(1)
        top = None
        if top_logprobs_nums is not None and any(top_logprobs_nums):
            top = _top_logprobs(all_logprobs, top_logprobs_nums)
        return SampleOutput(next_token_ids=next_token_ids, logprobs=chosen, top_logprobs=top)


def _check_batch(
    logits: torch.Tensor,
    info: SamplingBatchInfo,
    return_logprob: bool,
    top_logprobs_nums: Sequence[int] | None,
) -> None:
    expected = (info.batch_size, info.vocab_size)
    if logits.dim() != 2 or tuple(logits.shape) != expected:
        raise ValueError(f"logits shape {tuple(logits.shape)} does not match batch {expected}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got {logits.dtype}")
    if top_logprobs_nums is not None:
        if len(top_logprobs_nums) != info.batch_size:
            raise ValueError(
                f"got {len(top_logprobs_nums)} top_logprobs_nums for a batch of {info.batch_size}"
            )
        if any(n < 0 for n in top_logprobs_nums):
            raise ValueError("top_logprobs_nums must be >= 0")
        if any(top_logprobs_nums) and not return_logprob:
            raise ValueError("top_logprobs_nums requires return_logprob=True")


def _top_logprobs(
    all_logprobs: torch.Tensor, nums: Sequence[int]
) -> list[tuple[list[int], list[float]]]:
    """One batched top-k for the largest request, then a single device-to-host copy."""
    k = min(max(nums), all_logprobs.shape[-1])
    values, ids = all_logprobs.topk(k, dim=-1, sorted=True)
    id_rows, value_rows = ids.tolist(), values.tolist()
    return [(id_rows[r][:n], value_rows[r][:n]) for r, n in enumerate(nums)]


def _copy_to_host(tensor: torch.Tensor) -> torch.Tensor:
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return host.copy_(tensor, non_blocking=True)
