"""``orchestrace papers``: exit codes, one line per problem, outputs that never clobber."""

from __future__ import annotations

import builtins
import json
import os

import pytest
from _papers_pool import write_excluded, write_papers

from orchestrace.cli import main


def run(capsys, *args):
    code = main(["papers", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_ok_and_bad(tmp_path, capsys):
    p = write_papers(tmp_path / "papers.csv")
    e = write_excluded(tmp_path / "excluded.csv")
    assert run(capsys, "check", p, e) == (
        0,
        f"{p}: ok (4 entries)\n{e}: ok (2 decisions)\n",
        "",
    )
    bad = write_papers(tmp_path / "bad.csv", reward_type="sharde", scenario="")
    code, out, err = run(capsys, "check", bad, e)
    assert code == 1 and err == ""
    assert out.splitlines() == [
        f"{bad}: line 2, column 11 (reward_type): unknown value 'sharde'; did you mean "
        "'shared'? use one of: shared, individual, role, process, tool, debate, verifier, "
        "orchestration, hybrid, NA",
        f"{bad}: line 2, column 14 (scenario): is empty; write NA when the entry has no scenario",
    ]


@pytest.mark.parametrize("action", ["stats", "coverage", "plot"])
def test_bad_pool_is_one_error_line_exit_1(tmp_path, capsys, action):
    bad = write_papers(tmp_path / "bad.csv", category="blog")
    extra = ["-o", tmp_path / "out"] if action == "plot" else []
    code, out, err = run(capsys, action, bad, *extra)
    assert code == 1 and out == ""
    assert err == (
        f"error: {bad}: line 2, column 9 (category): unknown value 'blog'; use one of: "
        "rl_method, survey, benchmark, framework, industry, classical_marl\n"
    )
    assert not (tmp_path / "out").exists()


def test_directory_and_missing_inputs(tmp_path, capsys):
    assert run(capsys, "stats", tmp_path) == (
        1,
        "",
        f"error: {tmp_path}: file: is a directory; pass the CSV file (e.g. papers.csv)\n",
    )
    code, out, _ = run(capsys, "check", tmp_path / "x.csv")
    assert (code, out) == (1, f"{tmp_path / 'x.csv'}: file: no such file; check the path\n")


def test_taxonomy(capsys):
    code, out, _ = run(capsys, "taxonomy")
    assert code == 0 and "| `credit_granularity` | `tool` | tool calls |" in out
    code, out, _ = run(capsys, "taxonomy", "--json")
    doc = json.loads(out)
    reward = next(c for c in doc["papers"] if c["name"] == "reward_type")
    assert reward["values"]["orchestration"] == "orchestration reward (R7)"


def test_stats_output_is_atomic_and_never_clobbers(tmp_path, capsys):
    p = write_papers(tmp_path / "papers.csv")
    e = write_excluded(tmp_path / "excluded.csv")
    out = tmp_path / "STATS.md"
    code, stdout, err = run(capsys, "stats", p, e, "-o", out)
    assert (code, stdout, err) == (0, "", f"wrote {out}\n")
    text = out.read_text()
    assert "| retained | 4 |\n| excluded | 2 |\n| audited | 6 |" in text
    out.write_text("mine")
    code, _, err = run(capsys, "stats", p, e, "--json", "-o", out)
    assert (code, err) == (1, f"error: {out} exists; pass --force to replace it\n")
    assert out.read_text() == "mine"
    assert run(capsys, "stats", p, e, "--json", "-o", out, "--force")[0] == 0
    assert json.loads(out.read_text())["audited"] == 6
    assert sorted(os.listdir(tmp_path)) == ["STATS.md", "excluded.csv", "papers.csv"]


def test_output_may_not_be_an_input_or_a_directory(tmp_path, capsys):
    p = write_papers(tmp_path / "papers.csv")
    code, _, err = run(capsys, "stats", p, "-o", p, "--force")
    assert (code, err) == (1, f"error: {p} is also an input; write the output to another path\n")
    code, _, err = run(capsys, "coverage", p, "-o", tmp_path, "--force")
    assert (code, err) == (
        1,
        f"error: {tmp_path} is a directory that orchestrace did not write (it holds "
        "papers.csv); choose another path\n",
    )
    code, _, err = run(capsys, "coverage", p, "-o", tmp_path / "no" / "c.md")
    assert (code, err) == (
        1,
        f"error: cannot write {tmp_path / 'no' / 'c.md'}: directory {tmp_path / 'no'} does "
        f"not exist; create it first (mkdir -p {tmp_path / 'no'}) or choose another path\n",
    )


def test_coverage_json(tmp_path, capsys):
    p = write_papers(tmp_path / "papers.csv")
    code, out, _ = run(capsys, "coverage", p, "--json")
    assert code == 0
    cov = json.loads(out)
    assert [e["key"] for e in cov["entries"]] == ["magrpo", "c3", "openai-codex"]


def test_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    p = write_papers(tmp_path / "papers.csv")
    d = tmp_path / "figs"
    code, out, _ = run(capsys, "plot", p, "-o", d)
    assert code == 0 and "note: scale.png left out" in out
    assert sorted(os.listdir(d)) == ["_orchestrace.json", "reward_credit.png", "timeline.png"]
    assert (d / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = run(capsys, "plot", p, "-o", d)
    assert code == 1 and "pass --force to replace" in err
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"envelope": [{"agents": 2, "events": 40}]}))
    code, out, _ = run(capsys, "plot", p, "-o", d, "--bench", report, "--force")
    assert code == 0 and f"wrote {d / 'scale.png'}" in out
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    code, _, err = run(capsys, "plot", p, "-o", mine, "--force")
    assert code == 1 and "did not write (it holds notes.txt)" in err
    assert os.listdir(mine) == ["notes.txt"]


def test_plot_bad_bench_report(tmp_path, capsys):
    p = write_papers(tmp_path / "papers.csv")
    report = tmp_path / "report.json"
    report.write_text("{not json")
    code, _, err = run(capsys, "plot", p, "-o", tmp_path / "f", "--bench", report)
    assert code == 1 and err.startswith(f"error: {report}: file: not a readable JSON report")
    report.write_text(json.dumps({"envelope": [{"agents": "many"}]}))
    code, _, err = run(capsys, "plot", p, "-o", tmp_path / "f", "--bench", report)
    assert code == 1 and "lacks whole 'agents' and 'events'" in err
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "plot", p, "-o", tmp_path / "f", "--bench", fifo)
    assert (code, err) == (
        1,
        f"error: {fifo}: file: not a regular file; pass the report.json (or its directory) "
        "that `orchestrace bench` wrote\n",
    )
    assert not (tmp_path / "f").exists()


def test_plot_without_matplotlib_says_what_to_install(tmp_path, capsys, monkeypatch):
    real = builtins.__import__

    def no_mpl(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    p = write_papers(tmp_path / "papers.csv")
    code, _, err = run(capsys, "plot", p, "-o", tmp_path / "f")
    assert (code, err) == (
        1,
        "error: the figures need matplotlib: pip install 'orchestrace[learn]'\n",
    )
    assert not (tmp_path / "f").exists()


def test_check_reads_standard_input_once(tmp_path, capsys, monkeypatch):
    p = write_papers(tmp_path / "papers.csv")
    with open(p, "rb") as fh:
        monkeypatch.setattr("sys.stdin", fh)
        assert run(capsys, "check", "-") == (0, "-: ok (4 entries)\n", "")


def test_file_name_with_a_newline_stays_on_one_line(tmp_path, capsys):
    p = write_papers(tmp_path / "a\nb.csv", category="blog")
    code, out, _ = run(capsys, "check", p)
    assert code == 1 and len(out.splitlines()) == 1
    assert out.startswith(str(tmp_path) + "/a\\nb.csv: line 2, column 9 (category)")
