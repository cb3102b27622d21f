"""validate prints at most 100 problems per file, then counts the rest."""

from __future__ import annotations

from orchestrace.cli import main
from orchestrace.errors import OrchestraceError
from orchestrace.rewards.compose import load_spec
from orchestrace.trace.graph import CycleError


def test_many_damaged_lines_print_a_bounded_report(tmp_path, capsys):
    path = tmp_path / "pretty.jsonl"
    # pretty-printed JSON under a .jsonl name: every line is a damaged record
    lines = ["{"] + ['  "x": [1,'] * 400
    path.write_text("\n".join(lines) + "\n")
    assert main(["validate", "--keep-going", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 101
    assert out[-1].endswith(
        "more problem(s) (the first 100 are shown); fix these and validate again"
    )


def test_cycle_error_is_a_project_error():
    assert issubclass(CycleError, OrchestraceError)
    assert issubclass(CycleError, ValueError)


def test_deeply_nested_spec_is_one_clear_error(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    try:
        load_spec(spec)
    except OrchestraceError as err:
        assert "nested too deeply to read" in str(err)
    else:  # pragma: no cover
        raise AssertionError("a 100,000-deep spec was accepted")
