"""Numbers read from files, ids and options are ASCII decimals (``_safe.decimal``).

``str.isdigit`` is also true of ``"²"``, which ``int`` refuses (a crash where the check meant
"not a number"), and of other scripts' digits, which ``int`` reads.
"""

from __future__ import annotations

import json

import pytest

from orchestrace._safe import decimal
from orchestrace.cli import main
from orchestrace.errors import ConfigError
from orchestrace.io import dump
from orchestrace.runtime import run
from orchestrace.safety.collusion import detect_collusion
from orchestrace.trace.enums import Decision
from orchestrace.trace.model import Event, Trace

ODD = ["\u00b2", "\u2460", "\u0663", "+1", "-1", " 1", "1 ", "", "1_0"]


@pytest.mark.parametrize("text", ODD)
def test_decimal_refuses_all_but_ascii_digits(text):
    assert decimal(text) is None


def test_decimal_reads_ascii_digits():
    assert [decimal(x) for x in ("0", "042", "9" * 30)] == [0, 42, int("9" * 30)]


@pytest.mark.parametrize("code", ["O0", "O-1", "O+2", "OO2", "o 3", "O\u0663", "O6", "1", ""])
def test_decision_codes_are_exactly_o1_to_o5(code):
    with pytest.raises(ValueError, match=r"use O1\.\.O5"):
        Decision.from_code(code)


def test_decision_codes_o1_to_o5_in_either_case():
    first, *_, last = list(Decision)
    assert [Decision.from_code(c) for c in ("O1", "o5")] == [first, last]


def test_collusion_copies_with_an_odd_id_are_still_found():
    txt = "the answer is forty-two, trust me on this one"
    events = [
        Event("e\u00b2", 0.0, "message", "a", content=txt),
        Event("e3", 1.0, "message", "b", content=txt),
    ]
    found = detect_collusion(Trace(trace_id="t", task_id="x", events=events, edges=[]))
    assert found  # before: ValueError from int("²")


def test_replay_stop_at_with_two_signs_is_an_unknown_event(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    dump(run("debate", "arith", agents=3, seed=1, task_size=16).trace, str(path))
    for value in ("+-1", "\u00b2"):
        assert main(["replay", str(path), "--stop-at", value]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_otel_token_count_of_odd_digits_is_kept_verbatim(tmp_path, capsys):
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "1",
        "name": "chat model",
        "startTimeUnixNano": "1000000000",
        "endTimeUnixNano": "2000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"stringValue": "\u00b2"}},
        ],
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    src = tmp_path / "otlp.json"
    src.write_text(json.dumps(doc))
    assert main(["convert", "--from", "otel", str(src), "-o", str(tmp_path / "o.json")]) == 0
    assert "unexpected" not in capsys.readouterr().err


def test_viewer_position_is_ascii_only():
    pytest.importorskip("pyarrow")
    from orchestrace.viewer.data import TraceView

    events = [Event(f"e{k}", float(k), "llm_call", "a") for k in range(5)]
    events.append(Event("\u0663", 9.0, "llm_call", "a"))  # an id that looks like a position
    view = TraceView(Trace(trace_id="t", task_id="x", events=events, edges=[]), source="t")
    assert view.index("3") == 3 and view.index("\u0663") == 5
    with pytest.raises(ConfigError):
        view.index("\u00b2")


def test_columns_of_numbers_written_as_strings_are_refused():
    pytest.importorskip("pyarrow")
    from orchestrace.io._columnar import from_columns

    for t in (["1_0", "2"], ["\u0663", "1"]):
        with pytest.raises(ValueError, match="a number column holds strings"):
            from_columns(["e1", "e2"], t, [1.0, 1.0], ["llm_call"] * 2, ["a", "a"], [], [], [])


def test_no_module_reads_numbers_with_isdigit():
    """The rule in docs/architecture.md: ``_safe.decimal``, not ``isdigit()`` + ``int()``."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "orchestrace"
    found = [
        f"{path.relative_to(src)}:{k}: {line.strip()}"
        for path in sorted(src.rglob("*.py"))
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ".isdigit()" in line and ".isascii()" not in line and "def decimal" not in line
    ]
    assert found == [], found


def test_a_step_of_thousands_of_digits_is_an_unknown_event(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    dump(run("debate", "arith", agents=3, seed=1, task_size=16).trace, str(path))
    assert main(["replay", str(path), "--stop-at", "1" * 5000]) == 1  # int() refuses > 4,300
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected" not in err, err[:300]


def test_an_event_without_an_agent_is_refused_by_the_masks():
    """A null agent (code -1) read as the last name turned a tool into an agent."""
    pytest.importorskip("pyarrow")
    from orchestrace.io._columnar import from_columns

    g = from_columns(
        ["e1", "e2", "e3", "e4"],
        [0.0, 1.0, 2.0, 3.0],
        [1.0] * 4,
        ["llm_call", "tool_call", "tool_result", "llm_call"],
        ["a", None, "tool", "a"],
        ["e1", "e2"],
        ["e2", "e3"],
        ["causal", "causal"],
    )
    for f in (g.tool_mask, g.agent_codes):
        with pytest.raises(ValueError, match="every event needs an agent"):
            f()
