"""logit_bias: validated against the vocab with the other params, added to the logits."""

from __future__ import annotations

import pytest
import torch

from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.errors import InvalidSamplingParams
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import Sampler


@pytest.mark.parametrize(
    ("bias", "fragment"),
    [
        ({"10": 1.0}, "[0, 10)"),
        ({"-1": 1.0}, "token ids"),
        ({"x": 1.0}, "token ids"),
        ({"3": 100.5}, "[-100, 100]"),
        ({"3": -101}, "[-100, 100]"),
    ],
)
def test_bad_logit_bias_names_the_field(bias: dict[str, float], fragment: str) -> None:
    with pytest.raises(InvalidSamplingParams) as caught:
        SamplingParams.from_dict({"logit_bias": bias}).validate(vocab_size=10)
    assert caught.value.field == "logit_bias" and fragment in str(caught.value)


def test_from_dict_reads_int_keys_and_refuses_other_shapes() -> None:
    assert SamplingParams.from_dict({"logit_bias": {3: 2}}).logit_bias == {"3": 2.0}
    for bad in ([3], {"3": "high"}, {None: 1}):
        with pytest.raises(InvalidSamplingParams):
            SamplingParams.from_dict({"logit_bias": bad})


def test_bias_moves_the_greedy_token_and_leaves_other_rows_alone() -> None:
    logits = torch.tensor([[5.0, 0.0, 0.0, 1.0], [5.0, 0.0, 0.0, 1.0], [5.0, 0.0, 0.0, 1.0]])
    logits[2, 3] = float("-inf")  # NOTE: as a grammar mask leaves a forbidden token
    params = [
        SamplingParams(temperature=0, logit_bias={"2": 100, "0": -100}),
        SamplingParams(temperature=0),
        SamplingParams(temperature=0, logit_bias={"3": 100}),
    ]
    info = SamplingBatchInfo.from_params(params, "cpu", 4, [0, 0, 0])
    before = logits.clone()
    out = Sampler().sample(logits, info)
    assert out.next_token_ids.tolist() == [2, 0, 0]
    assert torch.equal(logits, before), "the step's logits are not modified in place"
