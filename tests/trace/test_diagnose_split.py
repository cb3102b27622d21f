"""Splitting msgspec's "<message> - at `$.path`" equals the regular expression it replaced."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrace.trace.diagnose import _split_at

_REFERENCE = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.S)
_PARTS = st.sampled_from(
    [" - at `", "$", "`", ".events[0]", "x", " ", "\n", "Expected `int`", "- at", "at `", "\n`"]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PARTS, max_size=8).map("".join))
def test_split_equals_the_reference(text):
    m = _REFERENCE.match(text)
    assert m is not None
    assert _split_at(text) == (m.group("msg").strip(), m.group("path") or "$")


def test_a_long_message_splits_at_its_path():
    msg = "Object contains unknown field `" + "x" * 1_000_000 + "`"
    assert _split_at(msg + " - at `$.events[3]`") == (msg, "$.events[3]")
