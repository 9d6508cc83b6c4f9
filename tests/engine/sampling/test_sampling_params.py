"""SamplingParams: SGLang defaults, from_dict parsing and user-facing validation."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.sampling.errors import InvalidSamplingParams
from engine.sampling.params import SamplingParams


def test_defaults_match_sglang() -> None:
    p = SamplingParams()
    assert (p.max_new_tokens, p.temperature, p.top_p, p.top_k, p.min_p) == (128, 1.0, 1.0, -1, 0.0)
    assert (p.frequency_penalty, p.presence_penalty, p.repetition_penalty) == (0.0, 0.0, 1.0)
    assert p.stop == [] and p.stop_token_ids == [] and p.seed is None and p.n == 1
    assert not p.ignore_eos and p.skip_special_tokens and p.spaces_between_special_tokens
    assert not p.no_stop_trim and not p.is_greedy and not p.has_penalties
    p.validate(vocab_size=10)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_new_tokens", -1),
        ("n", 0),
        ("temperature", -0.1),
        ("temperature", math.nan),
        ("top_p", 0.0),
        ("top_p", 1.01),
        ("top_k", 0),
        ("top_k", -2),
        ("min_p", -0.01),
        ("min_p", 1.5),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", -1.0),
        ("frequency_penalty", 2.5),
        ("frequency_penalty", -2.01),
        ("presence_penalty", 3.0),
        ("presence_penalty", -3.0),
        ("stop_token_ids", [5, 10]),
        ("stop_token_ids", [-1]),
        ("seed", -1),
        ("stop", ["ok", ""]),
    ],
)
def test_validate_rejects_out_of_range(field: str, value: object) -> None:
    params = SamplingParams(**{field: value})
    with pytest.raises(InvalidSamplingParams) as excinfo:
        params.validate(vocab_size=10)
    assert excinfo.value.field == field
    assert repr(field) in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_validate_range_message_names_allowed_range() -> None:
    with pytest.raises(InvalidSamplingParams, match=r"'top_p' must be in \(0, 1\], got 0.0"):
        SamplingParams(top_p=0.0).validate()
    with pytest.raises(InvalidSamplingParams, match=r"token ids in \[0, 10\), got 10"):
        SamplingParams(stop_token_ids=[10]).validate(vocab_size=10)


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_new_tokens": 0},
        {"temperature": 0.0},
        {"top_p": 1.0, "top_k": -1, "min_p": 1.0},
        {"top_k": 1_000_000},
        {"frequency_penalty": -2.0, "presence_penalty": 2.0, "repetition_penalty": 0.5},
        {"stop_token_ids": [0, 9], "seed": 0},
        {"seed": 2**64 - 1},
    ],
)
def test_validate_accepts_boundaries(overrides: dict[str, object]) -> None:
    SamplingParams(**overrides).validate(vocab_size=10)


def test_stop_token_ids_unbounded_without_vocab() -> None:
    SamplingParams(stop_token_ids=[10**6]).validate()


def test_from_dict_rejects_unknown_key() -> None:
    with pytest.raises(InvalidSamplingParams, match=r"^unknown sampling parameter 'foo'$"):
        SamplingParams.from_dict({"temperature": 0.5, "foo": 1})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", "hot"),
        ("temperature", None),
        ("n", True),
        ("max_new_tokens", 3.0),
        ("stop", [1]),
        ("stop", 7),
        ("stop_token_ids", "1"),
        ("stop_token_ids", [1, "2"]),
        ("ignore_eos", 1),
        ("seed", 1.5),
        ("top_p", math.inf),
    ],
)
def test_from_dict_rejects_wrong_types(field: str, value: object) -> None:
    with pytest.raises(InvalidSamplingParams, match=repr(field)) as excinfo:
        SamplingParams.from_dict({field: value})
    assert excinfo.value.field == field


def test_validate_rechecks_types_of_direct_construction() -> None:
    with pytest.raises(InvalidSamplingParams, match="'top_k' must be an integer, got float"):
        SamplingParams(top_k=2.0).validate()  # type: ignore[arg-type]


def test_from_dict_normalises() -> None:
    p = SamplingParams.from_dict(
        {"stop": "###", "temperature": 1, "stop_token_ids": (3, 4), "seed": None}
    )
    assert p.stop == ["###"]
    assert p.temperature == 1.0 and isinstance(p.temperature, float)
    assert p.stop_token_ids == [3, 4]
    assert SamplingParams(stop="x").stop == ["x"]


@pytest.mark.parametrize(
    ("overrides", "greedy"),
    [
        ({"temperature": 0.0}, True),
        ({"temperature": 1e-7}, True),
        ({"top_k": 1}, True),
        ({"temperature": 1e-5}, False),
        ({"top_k": 2}, False),
    ],
)
def test_is_greedy(overrides: dict[str, object], greedy: bool) -> None:
    assert SamplingParams(**overrides).is_greedy is greedy


@given(
    temperature=st.floats(0, 5),
    top_p=st.floats(0.01, 1),
    top_k=st.integers(-1, 50).filter(lambda k: k != 0),
    stop=st.lists(st.text(min_size=1), max_size=3),
    seed=st.none() | st.integers(0, 2**64 - 1),
)
def test_from_dict_round_trips(
    temperature: float, top_p: float, top_k: int, stop: list[str], seed: int | None
) -> None:
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, stop=stop, seed=seed)
    params.validate(vocab_size=100)
    assert SamplingParams.from_dict(msgspec.structs.asdict(params)) == params
