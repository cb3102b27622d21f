r"""Read and check the paper pool: every problem is one line naming file, line, column and fix.

The checks follow the taxonomy in :mod:`orchestrace.papers.taxonomy`: the file must be UTF-8
without a byte-order mark, comma-separated, start with the header, keep every entry on one line,
and every tag must be one of its column's values. Keys, years, arXiv ids, URLs and dates are
checked too, duplicates are reported with the line of the first occurrence, and an excluded
record that is also retained is reported against both files.

Reading and decoding a file's bytes live in ``_source``, the checks of one field in ``_fields``;
this module checks files and the pool, and is the public home of all three.

Example:
    >>> import os, tempfile
    >>> from orchestrace.papers.taxonomy import PAPER_COLUMNS
    >>> row = dict.fromkeys(PAPER_COLUMNS, "x")
    >>> row.update(key="a", year="2025", arxiv_id="2501.00001", url="https://arxiv.org/abs/1",
    ...            category="survey", is_rl="no", reward_type="NA", credit_granularity="NA",
    ...            orchestration_form="NA", scenario="general", is_core="core", verified="yes")
    >>> text = ",".join(PAPER_COLUMNS) + "\n" + ",".join(row.values()) + "\n"
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "papers.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write(text.replace("survey", "sruvey"))
    >>> for p in check_papers(path):
    ...     print(str(p).replace(d + os.sep, ""))  # doctest: +NORMALIZE_WHITESPACE
    papers.csv: line 2, column 9 (category): unknown value 'sruvey'; did you mean 'survey'?
      use one of: rl_method, survey, benchmark, framework, industry, classical_marl
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrace.errors import Problem
from orchestrace.papers._fields import (
    ARXIV_URL,
    NEW_ARXIV,
    arxiv_month,
    arxiv_year,
    field_problem,
    show,
    where,
)
from orchestrace.papers._source import (
    MAX_BYTES,
    PaperPoolError,
    PathLike,
    decode,
    problem,
    read_source,
)
from orchestrace.papers.taxonomy import (
    EXCLUDED_COLUMNS,
    OPTIONAL_COLUMNS,
    PAPER_COLUMNS,
    Column,
)

__all__ = [
    "MAX_BYTES",
    "PaperPoolError",
    "Pool",
    "Table",
    "arxiv_month",
    "arxiv_year",
    "check_excluded",
    "check_papers",
    "check_pool",
    "load_pool",
    "read_pool",
    "read_source",
    "read_table",
]


@dataclass
class Table:
    """The rows of one pool file, as text, with the line each row starts on.

    Attributes:
        source: The file as given.
        header: Column names in file order.
        rows: One ``{column: value}`` mapping per entry.
        lines: The line each row starts on (1 is the header).
    """

    source: str
    header: list[str]
    rows: list[dict[str, str]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def column(self, name: str) -> list[str]:
        """Every row's value of ``name`` (``""`` where the column is absent)."""
        return [r.get(name, "") for r in self.rows]


@dataclass
class Pool:
    """A checked paper pool: the retained entries and, optionally, the exclusion log.

    Attributes:
        papers: Rows of ``papers.csv``.
        excluded: Rows of ``excluded.csv``, or ``None`` when not given.
    """

    papers: Table
    excluded: Table | None = None


# ---------------------------------------------------------------------- one file
def _header_problems(
    header: list[str], src: str, columns: Mapping[str, Column], name: str
) -> list[Problem]:
    expected = ",".join(columns)
    raw = ",".join(header)
    if len(header) == 1:
        for sep, label in ((";", "';'"), ("\t", "tabs"), ("|", "'|'")):
            if sep in header[0]:
                return [
                    problem(
                        src,
                        "line 1",
                        f"fields are separated by {label}, not commas",
                        "save the file as comma-separated values",
                        "delimiter",
                    )
                ]
    if not any(h.strip() in columns for h in header):
        if not raw.strip():
            msg = "the first line is empty"
        else:
            msg = f"the first line is not a header (it starts with {show(header[0], 30)})"
        return [
            problem(src, "line 1", msg, f"make the first line the header: {expected}", "header")
        ]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(header):
        if h in seen:
            problems.append(
                problem(
                    src,
                    f"line 1, column {i + 1}",
                    f"column {show(h)} appears twice (first as column {seen[h] + 1})",
                    "remove one of them",
                    "duplicate-column",
                )
            )
        seen.setdefault(h, i)
        if h not in columns and h not in OPTIONAL_COLUMNS and h.strip().lower() in columns:
            problems.append(
                problem(
                    src,
                    f"line 1, column {i + 1}",
                    f"column {show(h)} should be named {show(h.strip().lower())}",
                    "rename it",
                    "column-name",
                )
            )
    missing = [c for c in columns if columns[c].required and c not in header]
    other, other_name = (
        (EXCLUDED_COLUMNS, "excluded.csv")
        if columns is PAPER_COLUMNS
        else (PAPER_COLUMNS, "papers.csv")
    )
    if missing and set(other) <= set(header):
        return [
            problem(
                src,
                "line 1",
                f"this is {other_name} (its header), not {name}",
                "pass papers.csv first and excluded.csv second",
                "missing-column",
            )
        ]
    if missing:
        problems.append(
            problem(
                src,
                "line 1",
                f"missing column(s): {', '.join(missing)}",
                f"the {name} header is: {expected}",
                "missing-column",
            )
        )
    return problems


def read_table(
    path: PathLike, columns: Mapping[str, Column], *, name: str = "papers.csv"
) -> tuple[Table | None, list[Problem]]:
    """Read one pool file and check every row against ``columns``.

    Args:
        path: The CSV file (``"-"``: standard input).
        columns: The expected columns (:data:`~orchestrace.papers.taxonomy.PAPER_COLUMNS` or
            :data:`~orchestrace.papers.taxonomy.EXCLUDED_COLUMNS`).
        name: What the file is, for messages.

    Returns:
        The table (``None`` when the file has no usable header) and the problems found.

    Raises:
        PaperPoolError: The file cannot be read at all (missing, a directory, unreadable).
    """
    src = os.fspath(path)
    data = read_source(path)
    if not data.strip():
        return None, [
            problem(
                src,
                "file",
                "the file is empty",
                f"write the header ({','.join(columns)}) and one entry per line",
                "empty-file",
            )
        ]
    text, problems = decode(data, src)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    last = 0
    try:
        for fields in reader:
            records.append((last + 1, fields))
            last = reader.line_num
    except csv.Error as err:
        msg = str(err)
        if "end of data" in msg:
            reason, fix = (
                f"a quote opened on line {last + 1} is never closed",
                "close the quote, or remove the stray '\"'",
            )
        elif "field limit" in msg:
            reason, fix = "a field is too long (an unclosed quote?)", "check the quotes there"
        elif "expected after" in msg:
            reason, fix = (
                "text follows a closing quote",
                'double quotes inside a quoted value ("") or quote the whole value',
            )
        else:
            reason, fix = f"not valid CSV ({msg})", "fix the quoting there"
        problems.append(problem(src, f"line {last + 1}", reason, fix, "csv"))
        return None, problems
    header = records[0][1]
    head = _header_problems(header, src, columns, name)
    problems += head
    if any(p.code in ("delimiter", "header", "missing-column", "duplicate-column") for p in head):
        return None, problems
    table = Table(src, header)
    known = {**columns, **OPTIONAL_COLUMNS} if columns is PAPER_COLUMNS else dict(columns)
    this_year = _dt.date.today().year
    for line, fields in records[1:]:
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # blank line
        if not any(f.strip() for f in fields):
            problems.append(
                problem(
                    src,
                    f"line {line}",
                    "an empty row (only separators)",
                    "remove the line",
                    "empty-row",
                )
            )
            continue
        if len(fields) != len(header):
            problems.append(
                problem(
                    src,
                    f"line {line}",
                    f"{len(fields)} fields, the header has {len(header)}",
                    'quote values that contain commas ("Liu, Shuo") and check for missing or '
                    "extra separators",
                    "field-count",
                )
            )
            continue
        row = dict(zip(header, fields, strict=True))
        for i, h in enumerate(header):
            col = known.get(h)
            if col is None:
                continue
            found = field_problem(col, row[h], this_year)
            if found:
                code, message, fix = found
                problems.append(problem(src, where(line, i, h), message, fix, code))
        table.rows.append(row)
        table.lines.append(line)
    key = next(iter(columns))
    problems += _duplicates(table, key, "key" if key == "key" else "record id")
    if columns is PAPER_COLUMNS:
        problems += _paper_consistency(table)
    return table, problems


def _duplicates(table: Table, column: str, what: str) -> list[Problem]:
    problems: list[Problem] = []
    first: dict[str, int] = {}
    idx = table.header.index(column)
    for row, line in zip(table.rows, table.lines, strict=True):
        v = row[column]
        if not v:
            continue
        if v in first:
            problems.append(
                problem(
                    table.source,
                    where(line, idx, column),
                    f"duplicate {what} {show(v)} (first on line {first[v]})",
                    f"give every entry its own {what}",
                    "duplicate-key",
                )
            )
        else:
            first[v] = line
    return problems


def _paper_consistency(table: Table) -> list[Problem]:
    problems: list[Problem] = []
    idx = table.header.index("arxiv_id")
    seen: dict[str, tuple[str, int]] = {}
    for row, line in zip(table.rows, table.lines, strict=True):
        aid = row["arxiv_id"]
        ay = arxiv_year(aid)
        if ay is None:
            continue
        base = aid.split("v")[0] if NEW_ARXIV.match(aid) else aid
        if base in seen:
            k, ln = seen[base]
            problems.append(
                problem(
                    table.source,
                    where(line, idx, "arxiv_id"),
                    f"arXiv id {aid} is also the id of {show(k)} (line {ln})",
                    "keep one entry per work",
                    "duplicate-arxiv",
                )
            )
        else:
            seen[base] = (row["key"], line)
        year = row["year"]
        if len(year) == 4 and year.isascii() and year.isdigit() and int(year) < ay:
            problems.append(
                problem(
                    table.source,
                    where(line, table.header.index("year"), "year"),
                    f"year {year} is before the arXiv submission ({ay}, from {aid})",
                    "correct the year or the arXiv id",
                    "year-before-arxiv",
                )
            )
    return problems


# ---------------------------------------------------------------------- whole pool
def _ids_of(text: str) -> set[str]:
    ids = set()
    for part in text.split(";"):
        part = part.strip()
        if part.lower().startswith("arxiv:"):
            part = part[6:]
        m = ARXIV_URL.search(part)
        if m:
            part = m.group(1)
        if arxiv_year(part) is not None:
            ids.add(re.sub(r"v\d+\Z", "", part))
    return ids


def _title_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _cross_problems(papers: Table, excluded: Table) -> list[Problem]:
    by_id: dict[str, tuple[str, int]] = {}
    by_title: dict[str, tuple[str, int]] = {}
    by_url: dict[str, tuple[str, int]] = {}
    for row, line in zip(papers.rows, papers.lines, strict=True):
        ref = (row["key"], line)
        for i in _ids_of(row["arxiv_id"]) | _ids_of(row["url"]):
            by_id.setdefault(i, ref)
        if _title_key(row["title"]):
            by_title.setdefault(_title_key(row["title"]), ref)
        for u in row["url"].split(";"):
            if u.strip():
                by_url.setdefault(u.strip().rstrip("/").lower(), ref)
    problems: list[Problem] = []
    idx = excluded.header.index("record_id")
    for row, line in zip(excluded.rows, excluded.lines, strict=True):
        hit: tuple[str, tuple[str, int]] | None = None
        for i in sorted(_ids_of(row["identifier"]) | _ids_of(row["url"])):
            if i in by_id:
                hit = (f"arXiv id {i}", by_id[i])
                break
        if hit is None and _title_key(row["screening_label"]) in by_title:
            hit = ("title", by_title[_title_key(row["screening_label"])])
        if hit is None:
            for u in row["url"].split(";"):
                if u.strip().rstrip("/").lower() in by_url:
                    hit = ("URL", by_url[u.strip().rstrip("/").lower()])
                    break
        if hit is not None:
            what, (key, pline) = hit
            problems.append(
                problem(
                    excluded.source,
                    where(line, idx, "record_id"),
                    f"record {show(row['record_id'])} is also retained: same {what} as "
                    f"{show(key)} ({papers.source} line {pline})",
                    "keep the work in one file: remove the exclusion or the retained entry",
                    "excluded-and-retained",
                )
            )
    return problems


def check_papers(path: PathLike) -> list[Problem]:
    """Check ``papers.csv``; return every problem (empty when the file is good).

    Raises:
        PaperPoolError: The file cannot be read at all.
    """
    return read_table(path, PAPER_COLUMNS, name="papers.csv")[1]


def check_excluded(path: PathLike) -> list[Problem]:
    """Check ``excluded.csv``; return every problem (empty when the file is good).

    Raises:
        PaperPoolError: The file cannot be read at all.
    """
    return read_table(path, EXCLUDED_COLUMNS, name="excluded.csv")[1]


def _read_pool(
    papers: PathLike, excluded: PathLike | None
) -> tuple[Table | None, Table | None, list[Problem]]:
    problems: list[Problem] = []
    ptab: Table | None = None
    etab: Table | None = None
    for path, cols, name in ((papers, PAPER_COLUMNS, "papers.csv"),) + (
        ((excluded, EXCLUDED_COLUMNS, "excluded.csv"),) if excluded is not None else ()
    ):
        try:
            tab, found = read_table(path, cols, name=name)
        except PaperPoolError as err:
            problems += err.problems
            continue
        problems += found
        if cols is PAPER_COLUMNS:
            ptab = tab
        else:
            etab = tab
    if ptab is not None and etab is not None:
        problems += _cross_problems(ptab, etab)
    return ptab, etab, problems


def read_pool(
    papers: PathLike, excluded: PathLike | None = None
) -> tuple[Pool | None, list[Problem]]:
    """Read and check the pool once; return it (``None`` when any problem) and the problems.

    Each file is read exactly once, so ``"-"`` (standard input) works.
    """
    ptab, etab, problems = _read_pool(papers, excluded)
    if problems or ptab is None or (excluded is not None and etab is None):
        return None, problems
    return Pool(ptab, etab), []


def check_pool(papers: PathLike, excluded: PathLike | None = None) -> list[Problem]:
    """Check both files and that no excluded record is also retained.

    Unreadable files are reported as problems too, so this never raises for bad input.

    Example:
        >>> [str(p) for p in check_pool("no/such/papers.csv")]
        ['no/such/papers.csv: file: no such file; check the path']
    """
    for name, value in (("papers", papers), ("excluded", excluded)):
        if not (value is None and name == "excluded") and not isinstance(value, str | os.PathLike):
            what = type(value).__name__
            return [
                Problem(
                    "bad-path",
                    f"{name} is a {what}, not a path",
                    "pass the path of the CSV file",
                    path=name,
                )
            ]
    return _read_pool(papers, excluded)[2]


def load_pool(papers: PathLike, excluded: PathLike | None = None) -> Pool:
    """Read and check the pool; raise with every problem unless it is clean.

    Raises:
        PaperPoolError: Any problem in either file (each names file, line, column and fix).
    """
    pool, problems = read_pool(papers, excluded)
    if pool is None:
        raise PaperPoolError(problems)
    return pool
