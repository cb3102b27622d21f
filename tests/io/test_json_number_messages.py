"""JSON numbers a trace cannot hold are named as such, where they are."""

from __future__ import annotations

import pytest

from orchestrace import dumps, generate_trace
from orchestrace.errors import TraceFormatError
from orchestrace.io.json import loads


def _doc() -> bytes:
    return dumps(generate_trace(agents=3, steps=20, seed=1))


@pytest.mark.parametrize(
    ("token", "name"), [(b"NaN", "NaN"), (b"Infinity", "Infinity"), (b"-Infinity", "-Infinity")]
)
def test_nan_and_infinity_are_named(token: bytes, name: str) -> None:
    data = _doc().replace(b'"dur":0.0', b'"dur":' + token, 1)
    assert data != _doc()
    with pytest.raises(TraceFormatError) as got:
        loads(data)
    msg = str(got.value)
    assert f"{name} is not a JSON number; record a finite number there" in msg
    assert "line 1, column" in msg


@pytest.mark.parametrize("digits", [4301, 5000])
def test_an_integer_beyond_64_bits_is_located(digits: int) -> None:
    data = _doc().replace(b'"step":0', b'"step":' + b"9" * digits, 1)
    assert data != _doc()
    with pytest.raises(TraceFormatError) as got:
        loads(data)
    msg = str(got.value)
    at = data.index(b"9" * digits) + 1
    assert f"column {at} (byte {at - 1}): integer too long to read (over 4,300 digits)" in msg
