"""Per-request sampling parameters: SGLang's field names and defaults, parsing and validation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from engine.sampling.errors import InvalidSamplingParams

# NOTE: SGLang treats any temperature below this as greedy decoding (argmax, top_k=1 semantics).
GREEDY_TEMPERATURE_EPS = 1e-6
# NOTE: OpenAI's documented range for frequency_penalty and presence_penalty is [-2, 2].
MAX_ABS_ADDITIVE_PENALTY = 2.0
# NOTE: seeds feed torch.Generator.manual_seed, which takes an unsigned 64-bit value.
MAX_SEED = 2**64 - 1
# NOTE: the grammar fields, by SGLang's sampling parameter names; at most one may be set.
GRAMMAR_KINDS = ("json_schema", "regex", "ebnf")
# NOTE: OpenAI's range for a logit_bias value.
MAX_ABS_LOGIT_BIAS = 100.0


class SamplingParams(msgspec.Struct, frozen=True):
    """How one request samples; defaults match SGLang's `SamplingParams`.

    Built once where a request enters the engine (`from_dict` + `validate`) and carried typed
    from there on, through ZMQ included. `seed` makes the request reproducible (see
    `engine.sampling.seeding`). A request with n > 1 is expanded into n sequences by
    `per_sample`, which gives each its own seed; otherwise all n would sample the same tokens.
    """

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = []
    stop_token_ids: list[int] = []
    ignore_eos: bool = False
    n: int = 1
    seed: int | None = None
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    # NOTE: at most one grammar constrains the output (see engine.constrained); json_schema
    # is the schema as JSON text, as in SGLang.
    json_schema: str | None = None
    regex: str | None = None
    ebnf: str | None = None
    # NOTE: as SGLang and OpenAI: token id (a decimal string, JSON keys being strings) → a bias
    # added to that token's logit before sampling.
    logit_bias: dict[str, float] | None = None

    @property
    def is_greedy(self) -> bool:
        """True when decoding is argmax: temperature ~ 0 or top_k == 1."""
        return self.temperature < GREEDY_TEMPERATURE_EPS or self.top_k == 1

    @property
    def has_penalties(self) -> bool:
        """True when any of the frequency / presence / repetition penalties changes logits."""
        return (
            self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.repetition_penalty != 1.0
        )

    @property
    def grammar(self) -> tuple[str, str] | None:
        """The output grammar as (kind, text), kind one of GRAMMAR_KINDS; None if unconstrained."""
        for kind in GRAMMAR_KINDS:
            text = getattr(self, kind)
            if text is not None:
                return kind, text
        return None

    def __post_init__(self) -> None:
        # NOTE: OpenAI allows `stop` to be a single string; keep it as a one-element list.
        # force_setattr is msgspec's way to normalise a frozen Struct while it is built.
        if isinstance(self.stop, str):
            msgspec.structs.force_setattr(self, "stop", [self.stop])

    def per_sample(self) -> list[SamplingParams]:
        """The n single-sample params of this request: seed, seed + 1, ... when seeded."""
        if self.n == 1:
            return [self]
        return [
            msgspec.structs.replace(self, n=1, seed=None if self.seed is None else self.seed + i)
            for i in range(self.n)
        ]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SamplingParams:
        """Build from a JSON-like mapping, rejecting unknown keys and wrongly typed values.

        Only types are checked here (OpenAI's single-string `stop` becomes a one-element
        list); ranges are checked by `validate`, which needs the model's vocab size.
        """
        kwargs: dict[str, Any] = {}
        for key, value in d.items():
            coerce = _FIELD_COERCERS.get(key)
            if coerce is None:
                raise InvalidSamplingParams(str(key), f"unknown sampling parameter {key!r}")
            kwargs[key] = coerce(key, value)
        return cls(**kwargs)

    def validate(self, vocab_size: int | None = None) -> None:
        """Raise `InvalidSamplingParams` naming the first bad field and its allowed range.

        Types are re-checked so directly constructed params get the same clear errors;
        stop_token_ids are range-checked against `vocab_size` when it is given.
        """
        for name, coerce in _FIELD_COERCERS.items():
            coerce(name, getattr(self, name))
        if self.max_new_tokens < 0:
            _fail("max_new_tokens", "must be >= 0", self.max_new_tokens)
        if self.n < 1:
            _fail("n", "must be >= 1", self.n)
        if self.temperature < 0.0:
            _fail("temperature", "must be >= 0 (0 means greedy)", self.temperature)
        if not 0.0 < self.top_p <= 1.0:
            _fail("top_p", "must be in (0, 1]", self.top_p)
        if self.top_k == 0 or self.top_k < -1:
            _fail("top_k", "must be -1 (disabled) or >= 1", self.top_k)
        if not 0.0 <= self.min_p <= 1.0:
            _fail("min_p", "must be in [0, 1]", self.min_p)
        if self.repetition_penalty <= 0.0:
            _fail("repetition_penalty", "must be > 0 (1 disables it)", self.repetition_penalty)
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if abs(value) > MAX_ABS_ADDITIVE_PENALTY:
                _fail(name, "must be in [-2, 2]", value)
        if any(s == "" for s in self.stop):
            _fail("stop", "must not contain empty strings", self.stop)
        for token_id in self.stop_token_ids:
            if token_id < 0 or (vocab_size is not None and token_id >= vocab_size):
                allowed = f"[0, {vocab_size})" if vocab_size is not None else ">= 0"
                _fail("stop_token_ids", f"entries must be token ids in {allowed}", token_id)
        if self.logit_bias:
            _check_logit_bias(self.logit_bias, vocab_size)
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            _fail("seed", "must be in [0, 2**64 - 1]", self.seed)
        grammars = [kind for kind in GRAMMAR_KINDS if getattr(self, kind) is not None]
        if len(grammars) > 1:
            raise InvalidSamplingParams(
                grammars[1],
                f"sampling parameters {' and '.join(map(repr, grammars))} are mutually exclusive",
            )
        for kind in grammars:
            if not getattr(self, kind).strip():
                _fail(kind, "must not be empty", getattr(self, kind))


def logit_bias_ids(bias: Mapping[str, float]) -> dict[int, float]:
    """A validated ``logit_bias`` keyed by int token id."""
    return {int(token): value for token, value in bias.items()}


def _check_logit_bias(bias: Mapping[str, float], vocab_size: int | None) -> None:
    for token, value in bias.items():
        if not token.isdigit() or not token.isascii():
            _fail("logit_bias", "keys must be token ids (non-negative integers)", token)
        if vocab_size is not None and int(token) >= vocab_size:
            _fail("logit_bias", f"keys must be token ids in [0, {vocab_size})", int(token))
        if abs(value) > MAX_ABS_LOGIT_BIAS:
            _fail("logit_bias", "values must be in [-100, 100]", value)


def _fail(name: str, requirement: str, value: object) -> None:
    raise InvalidSamplingParams(name, f"sampling parameter {name!r} {requirement}, got {value!r}")


def _type_error(name: str, expected: str, value: object) -> InvalidSamplingParams:
    return InvalidSamplingParams(
        name, f"sampling parameter {name!r} must be {expected}, got {type(value).__name__}"
    )


# NOTE: bool is a subclass of int in Python; every numeric check below excludes it so that
# `"n": true` is rejected rather than read as 1.
def _as_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an integer", value)
    return value


def _as_optional_int(name: str, value: object) -> int | None:
    return None if value is None else _as_int(name, value)


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(name, "a number", value)
    if not math.isfinite(value):
        raise InvalidSamplingParams(name, f"sampling parameter {name!r} must be finite")
    return float(value)


def _as_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _type_error(name, "a boolean", value)
    return value


def _as_optional_str(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return value


def _as_str_list(name: str, value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise _type_error(name, "a string or a list of strings", value)
    return list(value)


def _as_int_list(name: str, value: object) -> list[int]:
    if not isinstance(value, list | tuple):
        raise _type_error(name, "a list of integers", value)
    return [_as_int(name, v) for v in value]


def _as_optional_bias(name: str, value: object) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _type_error(name, "an object of token id → number", value)
    return {_bias_key(name, k): _as_float(name, v) for k, v in value.items()}


def _bias_key(name: str, key: object) -> str:
    # NOTE: an int key (a Python caller's dict) is read as its decimal string.
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    if not isinstance(key, str):
        raise _type_error(name, "keyed by token ids", key)
    return key


# NOTE: keyed by the annotation strings (this module uses postponed annotations), so adding a
# field with a type that has no coercer fails at import instead of slipping past from_dict.
_COERCERS_BY_TYPE: dict[str, Callable[[str, object], Any]] = {
    "int": _as_int,
    "int | None": _as_optional_int,
    "float": _as_float,
    "bool": _as_bool,
    "str | None": _as_optional_str,
    "list[str]": _as_str_list,
    "list[int]": _as_int_list,
    "dict[str, float] | None": _as_optional_bias,
}
_FIELD_COERCERS: dict[str, Callable[[str, object], Any]] = {
    name: _COERCERS_BY_TYPE[SamplingParams.__annotations__[name]]
    for name in SamplingParams.__struct_fields__
}
