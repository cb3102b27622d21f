"""``--json`` outputs are strict JSON: a number beyond a double's range is written as null.

A valid trace can hold durations that add up beyond the largest double; Python's ``json``
would print ``Infinity`` and ``NaN``, which strict parsers refuse.
"""

from __future__ import annotations

import json
import warnings

import msgspec
import pytest

from orchestrace.cli import main
from orchestrace.cli._json import JsonLines
from orchestrace.io import dump
from orchestrace.trace.generate import generate_trace


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".parquet"])
def test_analyze_json_of_durations_beyond_a_double(tmp_path, capsys, suffix):
    tr = generate_trace(agents=4, steps=1200, depth=3, seed=1)
    events = list(tr.events)
    for i in (100, 101):
        events[i] = msgspec.structs.replace(events[i], dur=1e308)
    path = tmp_path / f"t{suffix}"
    dump(tr.replace(events=tuple(events)), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way
        assert main(["analyze", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    row = _strict(out)
    assert row["work_s"] is None and row["critical_path_s"] is None and row["speedup"] is None
    assert row["makespan_s"] == 1e308 and row["events"] == 1200
    assert err.splitlines() == [
        "warning: analyze --json: 3 number(s) are not finite (first: work_s = inf) and were "
        "written as null: JSON has no NaN or infinity"
    ]
    assert main(["analyze", str(path)]) == 0  # the text keeps inf and a short makespan
    text = capsys.readouterr().out
    assert "inf s" in text and "1.000000e+308 s" in text and max(map(len, text.splitlines())) < 200


def test_json_lines_replace_only_non_finite_numbers_and_name_the_first():
    lines = JsonLines("x --json")
    assert lines.dumps({"a": [1.5, float("nan")], "b": {"c": -float("inf")}, "d": True}) == (
        '{"a": [1.5, null], "b": {"c": null}, "d": true}'
    )
    assert (lines.replaced, lines.first) == (2, "a[1] = nan")
    assert lines.dumps({"a": 1e308}) == '{"a": 1e+308}' and lines.replaced == 2
    assert JsonLines("x", compact=True).dumps({"a": 1, "b": [2]}) == '{"a":1,"b":[2]}'


def test_analyze_token_totals_are_exact_and_costs_warn_nothing(tmp_path, capsys):
    tr = generate_trace(agents=4, steps=300, depth=2, seed=2)
    events = [msgspec.structs.replace(e, tokens_in=2**62, cost=1e308) for e in tr.events]
    path = tmp_path / "t.json"
    dump(tr.replace(events=tuple(events)), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["analyze", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    row = _strict(out)
    assert row["tokens_in"] == 300 * 2**62  # numpy's int64 sum wrapped to a negative number
    assert row["tokens"] == row["tokens_in"] + row["tokens_out"] and row["cost"] is None
    assert "cost = inf" in err or "cost" in err


def test_report_files_list_what_they_could_not_hold():
    from orchestrace.io._output import report_json

    doc = {"cells": [{"ci": [float("nan"), 1.0]}], "ratio": float("inf")}
    text = report_json(doc)
    back = _strict(text)
    assert back["cells"][0]["ci"] == [None, 1.0] and back["ratio"] is None
    assert back["non_finite"] == ["cells[0].ci[0] = nan", "ratio = inf"]
    assert _strict(report_json({"a": 1.0})) == {"a": 1.0}  # nothing added when all is finite


def test_bench_json_of_a_suite_without_cells_says_where_its_points_are(
    tmp_path, capsys, monkeypatch
):
    import orchestrace.cli.bench as bench

    report = {
        "cells": [],
        "envelope": [{"agents": 8}],
        "suite": {"id": "envelope-v1"},
        "runs": [],
        "missing": {"runs": [], "cells": []},
    }
    monkeypatch.setattr(bench, "run_suite", lambda *a, **k: report)
    monkeypatch.setattr(bench, "write_report", lambda *a, **k: tmp_path / "out")
    out = tmp_path / "out"
    assert main(["bench", "--suite", "envelope-v1", "--json", "-o", str(out), "--no-progress"]) == 0
    stdout, err = capsys.readouterr()
    assert stdout == ""  # no per-cell rows: nothing that is not JSON on stdout
    assert err.strip() == (
        f"note: envelope-v1 has no per-cell rows to print (it measures the scale envelope); "
        f"its 1 points are in {out / 'report.json'}"
    )
