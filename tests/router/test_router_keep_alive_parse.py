"""`keep_alive` values as Ollama reads them (router/keep_alive.py), and the 400 for bad ones."""

from __future__ import annotations

import pytest

from router.errors import RouterError
from router.keep_alive import parse_keep_alive


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (300, 300.0),
        (0, 0.0),
        (0.5, 0.5),
        (-1, -1.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("300ms", 0.3),
        ("-1m", -60.0),
        ("0", 0.0),
        ("300", 300.0),
        (" 10s ", 10.0),
        ("1.5h", 5400.0),
    ],
)
def test_valid_values(value: object, seconds: float | None) -> None:
    parsed = parse_keep_alive(value)
    assert parsed == pytest.approx(seconds) if seconds is not None else parsed is None


@pytest.mark.parametrize("value", [True, "soon", "5 minutes", "m5", "", [5], {"s": 1}, float("inf")])
def test_bad_values_are_a_400_naming_the_field(value: object) -> None:
    with pytest.raises(RouterError) as caught:
        parse_keep_alive(value)
    assert caught.value.status == 400
    assert caught.value.param == "keep_alive"
