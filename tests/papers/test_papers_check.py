"""The pool checker: one fault at a time, each reported as one line with file, line, column, fix."""

from __future__ import annotations

import os
import stat
import threading

import pytest
from _papers_pool import GOOD_EXCLUDED, GOOD_ROWS, csv_text, write_excluded, write_papers

from orchestrace.papers import PaperPoolError, check_excluded, check_papers, check_pool, load_pool
from orchestrace.papers.taxonomy import PAPER_COLUMNS


def lines(problems, base):
    return [str(p).replace(str(base) + os.sep, "") for p in problems]


def test_good_files_have_no_problems(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    e = write_excluded(tmp_path / "excluded.csv")
    assert check_pool(p, e) == []
    pool = load_pool(p, e)
    assert [r["key"] for r in pool.papers.rows] == [r["key"] for r in GOOD_ROWS]
    assert pool.papers.lines == [2, 3, 4, 5]
    assert pool.excluded is not None and len(pool.excluded.rows) == 2


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (
            {"reward_type": "sharde"},
            "papers.csv: line 2, column 11 (reward_type): unknown value 'sharde'; did you mean "
            "'shared'? use one of: shared, individual, role, process, tool, debate, verifier, "
            "orchestration, hybrid, NA",
        ),
        (
            {"credit_granularity": "Agent"},
            "papers.csv: line 2, column 12 (credit_granularity): unknown value 'Agent'; did you "
            "mean 'agent'? use one of: token, turn, message, tool, agent, role, orchestrator, "
            "team, NA",
        ),
        (
            {"orchestration_form": ""},
            "papers.csv: line 2, column 13 (orchestration_form): is empty; write NA when the "
            "entry has no orchestration_form",
        ),
        (
            {"category": " survey"},
            "papers.csv: line 2, column 9 (category): ' survey' has spaces around it; remove them",
        ),
        (
            {"title": ""},
            "papers.csv: line 2, column 2 (title): is empty; fill it in",
        ),
        (
            {"key": "mag rpo"},
            "papers.csv: line 2, column 1 (key): key 'mag rpo' has characters other than "
            "letters, digits, '.', '_', '-'; use a short id such as 'magrpo' or 'dr-mas'",
        ),
        (
            {"year": "25"},
            "papers.csv: line 2, column 5 (year): '25' is not a year; write four digits, e.g. 2025",
        ),
        (
            {"year": "2024"},
            "papers.csv: line 2, column 5 (year): year 2024 is before the arXiv submission "
            "(2025, from 2508.04652); correct the year or the arXiv id",
        ),
        (
            {"arxiv_id": "arXiv:2508.04652"},
            "papers.csv: line 2, column 6 (arxiv_id): 'arXiv:2508.04652' is not an arXiv id; "
            "write the id without the 'arXiv:' prefix",
        ),
        (
            {"arxiv_id": "2513.04652"},
            "papers.csv: line 2, column 6 (arxiv_id): '2513.04652' is not an arXiv id; the "
            "month (digits 3-4) must be 01-12",
        ),
        (
            {"url": "arxiv.org/abs/2508.04652"},
            "papers.csv: line 2, column 8 (url): 'arxiv.org/abs/2508.04652' is not an http(s) "
            "link; write full http(s) links, several separated by ';'",
        ),
        (
            {"url": "https://a.org/x ;"},
            "papers.csv: line 2, column 8 (url): an empty link between ';' separators; write "
            "full http(s) links, several separated by ';'",
        ),
        (
            {"one_liner": "two\nlines"},
            "papers.csv: line 2, column 16 (one_liner): the value spans several lines (a line "
            "break inside quotes); put the whole value on one line",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_one_bad_field(tmp_path, edits, expected):
    p = write_papers(tmp_path / "papers.csv", **edits)
    assert lines(check_papers(p), tmp_path) == [expected]


def test_quoted_newline_keeps_later_line_numbers(tmp_path):
    rows = [dict(r) for r in GOOD_ROWS]
    rows[0]["one_liner"] = "two\nlines"
    rows[2]["category"] = "blog"
    p = tmp_path / "papers.csv"
    p.write_text(csv_text(rows))
    got = lines(check_papers(p), tmp_path)
    assert got[0].startswith("papers.csv: line 2, column 16 (one_liner): the value spans")
    assert got[1].startswith("papers.csv: line 5, column 9 (category): unknown value 'blog'")


def test_duplicate_key_names_first_line(tmp_path):
    rows = [dict(r) for r in GOOD_ROWS]
    rows[3]["key"] = "magrpo"
    p = write_papers(tmp_path / "papers.csv", rows)
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 5, column 1 (key): duplicate key 'magrpo' (first on line 2); give "
        "every entry its own key"
    ]


def test_duplicate_arxiv_id(tmp_path):
    rows = [dict(r) for r in GOOD_ROWS]
    rows[1]["arxiv_id"] = "2508.04652v2"
    rows[1]["year"] = "2025"
    p = write_papers(tmp_path / "papers.csv", rows)
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 3, column 6 (arxiv_id): arXiv id 2508.04652v2 is also the id of "
        "'magrpo' (line 2); keep one entry per work"
    ]


def test_bom(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 1, column 1: the file starts with a UTF-8 byte-order mark; save it as "
        "UTF-8 without BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`)"
    ]


@pytest.mark.parametrize(("sep", "label"), [(";", "';'"), ("\t", "tabs")])
def test_wrong_delimiter(tmp_path, sep, label):
    p = write_papers(tmp_path / "papers.csv")
    p.write_text(p.read_text().replace(",", sep))
    assert lines(check_papers(p), tmp_path) == [
        f"papers.csv: line 1: fields are separated by {label}, not commas; save the file as "
        "comma-separated values"
    ]


def test_missing_header(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.write_text(p.read_text().split("\n", 1)[1])
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 1: the first line is not a header (it starts with 'magrpo'); make the "
        "first line the header: " + ",".join(PAPER_COLUMNS)
    ]


def test_missing_column(tmp_path):
    p = tmp_path / "papers.csv"
    header = [c for c in PAPER_COLUMNS if c != "verified"]
    p.write_text(csv_text(GOOD_ROWS, header))
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 1: missing column(s): verified; the papers.csv header is: "
        + ",".join(PAPER_COLUMNS)
    ]


def test_misnamed_and_duplicated_columns(tmp_path):
    p = tmp_path / "papers.csv"
    header = [*PAPER_COLUMNS, "Notes", "title"]
    p.write_text(csv_text(GOOD_ROWS, header))
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 1, column 19: column 'Notes' should be named 'notes'; rename it",
        "papers.csv: line 1, column 20: column 'title' appears twice (first as column 2); "
        "remove one of them",
    ]


def test_wrong_field_count(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    text = p.read_text().replace('"Liu, Shuo"', "Liu, Shuo")
    p.write_text(text)
    assert lines(check_papers(p), tmp_path) == [
        'papers.csv: line 2: 19 fields, the header has 18; quote values that contain commas ("Liu, '
        'Shuo") and check for missing or extra separators'
    ]


def test_unclosed_quote(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.write_text(p.read_text() + 'x,"never closed\n')
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 6: a quote opened on line 6 is never closed; close the quote, or "
        "remove the stray '\"'"
    ]


def test_text_after_closing_quote(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.write_text(p.read_text().replace('"Liu, Shuo"', '"Liu, Shuo"x'))
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 2: text follows a closing quote; double quotes inside a quoted value "
        '("") or quote the whole value'
    ]


def test_non_utf8_bytes(tmp_path):
    p = write_papers(tmp_path / "papers.csv", affiliation="Universit\u00e9")
    p.write_bytes(p.read_bytes().replace("\u00e9".encode(), b"\xe9"))
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 2, column 87: byte 0xE9 is not UTF-8 text; save the file as UTF-8 "
        "(it may be Latin-1 or Windows-1252)"
    ]


def test_many_non_utf8_lines_are_summarised(tmp_path):
    p = tmp_path / "papers.csv"
    p.write_bytes(b"\xff\n" * 14)
    got = lines(check_papers(p), tmp_path)
    assert len(got) == 12
    assert got[10] == (
        "papers.csv: file: 4 more lines hold bytes that are not UTF-8; save the file as UTF-8"
    )


def test_empty_file(tmp_path):
    p = tmp_path / "papers.csv"
    p.write_text("\n")
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: file: the file is empty; write the header ("
        + ",".join(PAPER_COLUMNS)
        + ") and one entry per line"
    ]


def test_optional_columns_are_checked(tmp_path):
    p = tmp_path / "papers.csv"
    rows = [dict(r, team_size="NA", trace_length="", subdecisions="NA") for r in GOOD_ROWS]
    rows[0].update(team_size="~300", subdecisions="O1;O6")
    p.write_text(csv_text(rows))
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 2, column 19 (team_size): '~300' is not a whole number; write e.g. "
        "16, or NA",
        "papers.csv: line 2, column 21 (subdecisions): 'O1;O6' is not a list of "
        "sub-decisions; write codes O1-O5 separated by ';' (e.g. O1;O5) without repeats, or NA",
    ]


def test_excluded_bad_date_stage_and_duplicate(tmp_path):
    rows = [dict(r) for r in [*GOOD_EXCLUDED, GOOD_EXCLUDED[0]]]
    rows[1]["date_screened"] = "2026-02-30"
    rows[1]["stage"] = "title_screen"
    e = write_excluded(tmp_path / "excluded.csv", rows)
    got = lines(check_excluded(e), tmp_path)
    assert got == [
        "excluded.csv: line 3, column 7 (date_screened): '2026-02-30' is not a date; write "
        "YYYY-MM-DD, e.g. 2026-04-26",
        "excluded.csv: line 3, column 8 (stage): unknown value 'title_screen'; use one of: "
        "abstract_screen, full_text_screen, artifact_screen, duplicate_screen",
        "excluded.csv: line 4, column 1 (record_id): duplicate record id 'E001' (first on "
        "line 2); give every entry its own record id",
    ]


@pytest.mark.parametrize(
    ("edits", "what"),
    [
        ({"identifier": "arXiv:2508.04652v1", "url": "https://x.org/a"}, "arXiv id 2508.04652"),
        ({"url": "https://arxiv.org/pdf/2603.06859.pdf", "identifier": "x"}, "arXiv id 2603.06859"),
        (
            {"screening_label": "Introducing  CODEX", "identifier": "x", "url": "https://x.org"},
            "title",
        ),
        ({"identifier": "x", "url": "https://openai.com/x/"}, "URL"),
    ],
    ids=["arxiv-identifier", "arxiv-url", "title", "url"],
)
def test_excluded_and_retained(tmp_path, edits, what):
    p = write_papers(tmp_path / "papers.csv")
    e = write_excluded(tmp_path / "excluded.csv", **edits)
    del p
    key = {"arXiv id 2508.04652": "magrpo", "arXiv id 2603.06859": "c3"}.get(what, "openai-codex")
    line = {"magrpo": 2, "c3": 3, "openai-codex": 4}[key]
    assert lines(check_pool(tmp_path / "papers.csv", e), tmp_path) == [
        f"excluded.csv: line 2, column 1 (record_id): record 'E001' is also retained: same "
        f"{what} as '{key}' (papers.csv line {line}); keep the work in one file: remove the exclusion "
        "or the retained entry"
    ]


def test_directory_missing_and_device(tmp_path):
    assert lines(check_pool(tmp_path), tmp_path.parent) == [
        f"{tmp_path.name}: file: is a directory; pass the CSV file (e.g. papers.csv)"
    ]
    assert lines(check_pool(tmp_path / "nope.csv"), tmp_path) == [
        "nope.csv: file: no such file; check the path"
    ]
    assert [str(p) for p in check_pool("/dev/null")] == [
        "/dev/null: file: is not a regular file (a device or socket); pass a CSV file"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.chmod(0)
    try:
        assert lines(check_pool(p), tmp_path) == [
            "papers.csv: file: permission denied; make the file readable"
        ]
    finally:
        p.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_fifo_with_a_writer_and_without(tmp_path, monkeypatch):
    # as the trace readers: a FIFO nobody opens for writing gives up after the writer wait
    monkeypatch.setenv("ORCHESTRACE_FIFO_WRITER_S", "0.2")
    fifo = tmp_path / "papers.csv"
    os.mkfifo(fifo)
    assert lines(check_pool(fifo), tmp_path) == [
        "papers.csv: file: a FIFO that no program opened for writing within 0.2 s; start the "
        "writer first, or pass a file (ORCHESTRACE_FIFO_WRITER_S sets the wait)"
    ]
    text = csv_text(GOOD_ROWS, list(PAPER_COLUMNS))
    monkeypatch.setattr("orchestrace.papers._source._PIPE_IDLE_S", 5.0)

    def writer():
        with open(fifo, "w") as fh:
            fh.write(text)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert check_pool(fifo) == []
    finally:
        t.join(5)


def test_load_pool_raises_every_problem(tmp_path):
    p = write_papers(tmp_path / "papers.csv", reward_type="x", scenario="y")
    with pytest.raises(PaperPoolError) as info:
        load_pool(p)
    assert len(info.value.problems) == 2
    assert str(info.value).startswith("2 problems in the paper pool:\n  ")


def test_files_given_in_the_wrong_order(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    e = write_excluded(tmp_path / "excluded.csv")
    assert lines(check_pool(e, p), tmp_path) == [
        "excluded.csv: line 1: this is excluded.csv (its header), not papers.csv; pass "
        "papers.csv first and excluded.csv second",
        "papers.csv: line 1: this is papers.csv (its header), not excluded.csv; pass "
        "papers.csv first and excluded.csv second",
    ]


def test_row_of_separators_only(tmp_path):
    p = write_papers(tmp_path / "papers.csv")
    p.write_text(p.read_text() + "," * 17 + "\n")
    assert lines(check_papers(p), tmp_path) == [
        "papers.csv: line 6: an empty row (only separators); remove the line"
    ]


def test_mutated_files_give_problem_lines_never_exceptions(tmp_path):
    import random

    base = write_papers(tmp_path / "base.csv").read_bytes()
    rng = random.Random(16)
    junk = [b",", b'"', b"\n", b"\r", b";", b"\t", b"\x00", b"\xff", b"\xef\xbb\xbf", b"NA", b" "]
    p = tmp_path / "papers.csv"
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data) + 1)
            if rng.random() < 0.5:
                data[i:i] = rng.choice(junk)
            else:
                del data[i : i + rng.randint(1, 20)]
        p.write_bytes(bytes(data))
        for problem in check_pool(p):
            text = str(problem)
            assert "\n" not in text and text.startswith(f"{p}: ")


def test_permission_denied_is_one_line(tmp_path, monkeypatch):
    p = write_papers(tmp_path / "papers.csv")

    def denied(*args, **kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("orchestrace.papers.check.os.open", denied)
    assert lines(check_pool(p), tmp_path) == [
        "papers.csv: file: permission denied; make the file readable"
    ]
