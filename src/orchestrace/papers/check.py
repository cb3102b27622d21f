r"""Read and check the paper pool: every problem is one line naming file, line, column and fix.

The checks follow the taxonomy in :mod:`orchestrace.papers.taxonomy`: the file must be UTF-8
without a byte-order mark, comma-separated, start with the header, keep every entry on one line,
and every tag must be one of its column's values. Keys, years, arXiv ids, URLs and dates are
checked too, duplicates are reported with the line of the first occurrence, and an excluded
record that is also retained is reported against both files.

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
import difflib
import io
import os
import re
import select
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from orchestrace.errors import OrchestraceError, Problem
from orchestrace.papers.taxonomy import (
    EXCLUDED_COLUMNS,
    NA,
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

PathLike = str | os.PathLike[str]
#: Largest pool file read (bytes); a paper pool is a few hundred kilobytes.
MAX_BYTES = 64 << 20
#: Lines of non-UTF-8 bytes reported one by one before the rest are summarised.
_MAX_ENCODING_LINES = 10
_BOM = b"\xef\xbb\xbf"
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_NEW_ARXIV = re.compile(r"(\d{2})(\d{2})\.(\d{4,5})(v\d+)?\Z")
_OLD_ARXIV = re.compile(r"[a-z-]+(\.[A-Z]{2})?/(\d{2})(\d{2})\d{3}(v\d+)?\Z")
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s?#]+?)(?:\.pdf)?/?(?:[?#]|\Z)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_COUNT = re.compile(r"[1-9][0-9]*\Z")
_DECISIONS = ("O1", "O2", "O3", "O4", "O5")
_PIPE_IDLE_S = float(os.environ.get("ORCHESTRACE_PIPE_IDLE_S", "30"))


class PaperPoolError(OrchestraceError):
    """A pool file cannot be used; ``problems`` lists every problem found.

    Attributes:
        problems: One :class:`~orchestrace.errors.Problem` per problem, each naming the file,
            line, column and fix.

    Example:
        >>> err = PaperPoolError([Problem("x", "is a directory", "pass a CSV file",
        ...                               path="file", source="d")])
        >>> str(err)
        'd: file: is a directory; pass a CSV file'
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = [str(p) for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(
                f"... and {len(self.problems) - 20} more "
                "(`orchestrace papers check` lists every one)"
            )
        if len(lines) == 1:
            super().__init__(lines[0])
        else:
            head = f"{len(self.problems)} problems in the paper pool"
            super().__init__(head + ":\n  " + "\n  ".join(lines))


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


# ---------------------------------------------------------------------- reading bytes
def _problem(source: str, where: str, message: str, fix: str, code: str) -> Problem:
    if not source.isprintable():  # a file name with control characters stays on one line
        source = source.encode("unicode_escape", "backslashreplace").decode("ascii")
    return Problem(code, message, fix, path=where, source=source)


def _fail(source: str, message: str, fix: str, code: str = "unreadable") -> PaperPoolError:
    return PaperPoolError([_problem(source, "file", message, fix, code)])


def _read_pipe(fd: int, src: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        ready, _, _ = select.select([fd], [], [], _PIPE_IDLE_S)
        if not ready:
            raise _fail(
                src,
                f"no data arrived for {_PIPE_IDLE_S:g} s (a pipe or FIFO with no writer?)",
                "start the program that writes to it first, or pass a regular file",
            )
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            continue
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_BYTES:
            raise _fail(src, f"longer than {MAX_BYTES:,} bytes", "this is not a paper pool")
        chunks.append(chunk)


def read_source(path: PathLike) -> bytes:
    """Return the bytes of a pool file (``"-"``: standard input).

    Pipes and FIFOs are read to their end, giving up after ``ORCHESTRACE_PIPE_IDLE_S``
    seconds (default 30) without data; directories, devices and sockets are refused.

    Raises:
        PaperPoolError: Missing, unreadable, not a file, or longer than :data:`MAX_BYTES`.
    """
    src = os.fspath(path)
    fix_path = "check the path"
    try:
        if src == "-":
            fd = os.dup(sys.stdin.fileno())
        else:
            st = os.stat(src)
            if stat.S_ISDIR(st.st_mode):
                raise _fail(src, "is a directory", "pass the CSV file (e.g. papers.csv)")
            fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _fail(src, "no such file", fix_path) from None
    except PermissionError:
        raise _fail(src, "permission denied", "make the file readable") from None
    except NotADirectoryError:
        raise _fail(src, "no such file (a parent in the path is a file)", fix_path) from None
    except OSError as err:
        raise _fail(src, f"cannot open: {err.strerror or err}", fix_path) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise _fail(src, "is not a regular file (a device or socket)", "pass a CSV file")
        if stat.S_ISFIFO(mode):
            return _read_pipe(fd, src)
        os.set_blocking(fd, True)
        data = b""
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise _fail(src, f"longer than {MAX_BYTES:,} bytes", "this is not a paper pool")
        return data
    except IsADirectoryError:
        raise _fail(src, "is a directory", "pass the CSV file (e.g. papers.csv)") from None
    except PermissionError:
        raise _fail(src, "permission denied", "make the file readable") from None
    except OSError as err:
        raise _fail(src, f"cannot read: {err.strerror or err}", fix_path) from None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- decoding
def _decode(data: bytes, src: str) -> tuple[str, list[Problem]]:
    problems: list[Problem] = []
    if data.startswith(_BOM):
        problems.append(
            _problem(
                src,
                "line 1, column 1",
                "the file starts with a UTF-8 byte-order mark",
                "save it as UTF-8 without BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`)",
                "bom",
            )
        )
        data = data[3:]
    try:
        return data.decode("utf-8"), problems
    except UnicodeDecodeError:
        pass
    bad = 0
    for i, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            bad += 1
            if bad <= _MAX_ENCODING_LINES:
                col = len(line[: err.start].decode("utf-8", "replace")) + 1
                byte = line[err.start : err.start + 1].hex().upper()
                problems.append(
                    _problem(
                        src,
                        f"line {i}, column {col}",
                        f"byte 0x{byte} is not UTF-8 text",
                        "save the file as UTF-8 (it may be Latin-1 or Windows-1252)",
                        "not-utf8",
                    )
                )
    if bad > _MAX_ENCODING_LINES:
        problems.append(
            _problem(
                src,
                "file",
                f"{bad - _MAX_ENCODING_LINES} more lines hold bytes that are not UTF-8",
                "save the file as UTF-8",
                "not-utf8",
            )
        )
    return data.decode("utf-8", "replace"), problems


def _show(value: str, limit: int = 60) -> str:
    text = value.encode("unicode_escape", "backslashreplace").decode("ascii")
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return "'" + text.replace("'", "\\'") + "'"


def _where(line: int, index: int, name: str) -> str:
    return f"line {line}, column {index + 1} ({name})"


# ---------------------------------------------------------------------- one field
def _arxiv_problem(value: str) -> str | None:
    if value.lower().startswith("arxiv:"):
        return "write the id without the 'arXiv:' prefix"
    m = _NEW_ARXIV.match(value)
    if m:
        return None if 1 <= int(m.group(2)) <= 12 else "the month (digits 3-4) must be 01-12"
    m = _OLD_ARXIV.match(value)
    if m:
        return None if 1 <= int(m.group(3)) <= 12 else "the month must be 01-12"
    return "write an arXiv id as YYMM.NNNNN (e.g. 2508.04652), or leave it empty"


def arxiv_year(value: str) -> int | None:
    """The year of an arXiv id (``2508.04652`` -> 2025), ``None`` when not an arXiv id."""
    m = _NEW_ARXIV.match(value)
    if m and 1 <= int(m.group(2)) <= 12:
        return 2000 + int(m.group(1))
    m = _OLD_ARXIV.match(value)
    if m and 1 <= int(m.group(3)) <= 12:
        yy = int(m.group(2))
        return (1900 if yy >= 91 else 2000) + yy
    return None


def arxiv_month(value: str) -> tuple[int, int] | None:
    """``(year, month)`` of first submission encoded in an arXiv id, ``None`` otherwise.

    Example:
        >>> arxiv_month("2508.04652"), arxiv_month("cs/9901001"), arxiv_month("")
        ((2025, 8), (1999, 1), None)
    """
    year = arxiv_year(value)
    if year is None:
        return None
    new = _NEW_ARXIV.match(value)
    old = _OLD_ARXIV.match(value)
    month = int(new.group(2)) if new else int(old.group(3)) if old else 0
    return year, month


def _url_problem(value: str) -> str | None:
    parts = [p.strip() for p in value.split(";")]
    for part in parts:
        if not part:
            return "an empty link between ';' separators"
        if any(ch.isspace() for ch in part):
            return f"link {_show(part)} contains spaces"
        u = urlsplit(part)
        if u.scheme not in ("http", "https") or "." not in u.netloc:
            return f"{_show(part)} is not an http(s) link"
    return None


def _field_problem(col: Column, value: str, this_year: int) -> tuple[str, str, str] | None:
    """``(code, message, fix)`` for a bad field, else ``None``."""
    if "\n" in value or "\r" in value:
        return (
            "quoted-newline",
            "the value spans several lines (a line break inside quotes)",
            "put the whole value on one line",
        )
    if "\x00" in value:
        return "nul", "the value holds a NUL byte (binary data?)", "remove it"
    if value != value.strip():
        return "spaces", f"{_show(value)} has spaces around it", "remove them"
    if not value:
        if col.empty_ok:
            return None
        if NA in col.values:
            return "empty", "is empty", f"write {NA} when the entry has no {col.name}"
        return "empty", "is empty", "fill it in"
    if col.values:
        if value in col.values:
            return None
        choices = ", ".join(col.values)
        near = [v for v in col.values if v.lower() == value.lower()] or difflib.get_close_matches(
            value, list(col.values), n=1, cutoff=0.75
        )
        hint = f"did you mean {_show(near[0])}? " if near else ""
        return "unknown-value", f"unknown value {_show(value)}", f"{hint}use one of: {choices}"
    kind = col.kind
    if kind == "key" and not _KEY.match(value):
        return (
            "bad-key",
            f"key {_show(value)} has characters other than letters, digits, '.', '_', '-'",
            "use a short id such as 'magrpo' or 'dr-mas'",
        )
    if kind == "year":
        if not (value.isascii() and value.isdigit() and len(value) == 4):
            return "bad-year", f"{_show(value)} is not a year", "write four digits, e.g. 2025"
        if not 1900 <= int(value) <= this_year + 1:
            return "bad-year", f"year {value} is out of range", f"write 1900-{this_year + 1}"
    if kind == "arxiv":
        fix = _arxiv_problem(value)
        if fix:
            return "bad-arxiv", f"{_show(value)} is not an arXiv id", fix
    if kind == "identifier" and value.lower().startswith("arxiv:"):
        fix = _arxiv_problem(value[6:])
        if fix:
            return "bad-arxiv", f"{_show(value)} is not an arXiv id", fix
    if kind == "urls":
        msg = _url_problem(value)
        if msg:
            return "bad-url", msg, "write full http(s) links, several separated by ';'"
    if kind == "date":
        ok = bool(_DATE.match(value))
        if ok:
            try:
                _dt.date.fromisoformat(value)
            except ValueError:
                ok = False
        if not ok:
            return "bad-date", f"{_show(value)} is not a date", "write YYYY-MM-DD, e.g. 2026-04-26"
    if kind == "count" and value != NA and not _COUNT.match(value):
        return "bad-count", f"{_show(value)} is not a whole number", f"write e.g. 16, or {NA}"
    if kind == "decisions" and value != NA:
        parts = value.split(";")
        bad = [p for p in parts if p not in _DECISIONS]
        if bad or len(set(parts)) != len(parts):
            return (
                "bad-decisions",
                f"{_show(value)} is not a list of sub-decisions",
                f"write codes O1-O5 separated by ';' (e.g. O1;O5) without repeats, or {NA}",
            )
    return None


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
                    _problem(
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
            msg = f"the first line is not a header (it starts with {_show(header[0], 30)})"
        return [
            _problem(src, "line 1", msg, f"make the first line the header: {expected}", "header")
        ]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(header):
        if h in seen:
            problems.append(
                _problem(
                    src,
                    f"line 1, column {i + 1}",
                    f"column {_show(h)} appears twice (first as column {seen[h] + 1})",
                    "remove one of them",
                    "duplicate-column",
                )
            )
        seen.setdefault(h, i)
        if h not in columns and h not in OPTIONAL_COLUMNS and h.strip().lower() in columns:
            problems.append(
                _problem(
                    src,
                    f"line 1, column {i + 1}",
                    f"column {_show(h)} should be named {_show(h.strip().lower())}",
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
            _problem(
                src,
                "line 1",
                f"this is {other_name} (its header), not {name}",
                "pass papers.csv first and excluded.csv second",
                "missing-column",
            )
        ]
    if missing:
        problems.append(
            _problem(
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
            _problem(
                src,
                "file",
                "the file is empty",
                f"write the header ({','.join(columns)}) and one entry per line",
                "empty-file",
            )
        ]
    text, problems = _decode(data, src)
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
        problems.append(_problem(src, f"line {last + 1}", reason, fix, "csv"))
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
                _problem(
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
                _problem(
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
            found = _field_problem(col, row[h], this_year)
            if found:
                code, message, fix = found
                problems.append(_problem(src, _where(line, i, h), message, fix, code))
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
                _problem(
                    table.source,
                    _where(line, idx, column),
                    f"duplicate {what} {_show(v)} (first on line {first[v]})",
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
        base = aid.split("v")[0] if _NEW_ARXIV.match(aid) else aid
        if base in seen:
            k, ln = seen[base]
            problems.append(
                _problem(
                    table.source,
                    _where(line, idx, "arxiv_id"),
                    f"arXiv id {aid} is also the id of {_show(k)} (line {ln})",
                    "keep one entry per work",
                    "duplicate-arxiv",
                )
            )
        else:
            seen[base] = (row["key"], line)
        year = row["year"]
        if len(year) == 4 and year.isascii() and year.isdigit() and int(year) < ay:
            problems.append(
                _problem(
                    table.source,
                    _where(line, table.header.index("year"), "year"),
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
        m = _ARXIV_URL.search(part)
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
                _problem(
                    excluded.source,
                    _where(line, idx, "record_id"),
                    f"record {_show(row['record_id'])} is also retained: same {what} as "
                    f"{_show(key)} ({papers.source} line {pline})",
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
