r"""Check one field of a paper-pool row: tags, keys, years, arXiv ids, URLs, dates, counts.

Each check returns ``(code, message, fix)`` for a bad value, or ``None``. Values are shown
escaped and bounded (:func:`show`), places as line and column (:func:`where`). Public through
:mod:`orchestrace.papers.check`.

Example:
    >>> arxiv_year("2501.00001"), arxiv_month("hep-th/9901001"), arxiv_year("not-an-id")
    (2025, (1999, 1), None)
    >>> where(3, 0, "key"), show("it's")
    ('line 3, column 1 (key)', "'it\\'s'")
"""

from __future__ import annotations

import datetime as _dt
import difflib
import re
from urllib.parse import urlsplit

from orchestrace.papers.taxonomy import (
    NA,
    Column,
)

__all__ = ["ARXIV_URL", "NEW_ARXIV", "arxiv_month", "arxiv_year", "field_problem", "show", "where"]

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
NEW_ARXIV = re.compile(r"(\d{2})(\d{2})\.(\d{4,5})(v\d+)?\Z")
_OLD_ARXIV = re.compile(r"[a-z-]+(\.[A-Z]{2})?/(\d{2})(\d{2})\d{3}(v\d+)?\Z")
ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s?#]+?)(?:\.pdf)?/?(?:[?#]|\Z)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_COUNT = re.compile(r"[1-9][0-9]*\Z")
_DECISIONS = ("O1", "O2", "O3", "O4", "O5")


def show(value: str, limit: int = 60) -> str:
    text = value.encode("unicode_escape", "backslashreplace").decode("ascii")
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return "'" + text.replace("'", "\\'") + "'"


def where(line: int, index: int, name: str) -> str:
    return f"line {line}, column {index + 1} ({name})"


# ---------------------------------------------------------------------- one field
def _arxiv_problem(value: str) -> str | None:
    if value.lower().startswith("arxiv:"):
        return "write the id without the 'arXiv:' prefix"
    m = NEW_ARXIV.match(value)
    if m:
        return None if 1 <= int(m.group(2)) <= 12 else "the month (digits 3-4) must be 01-12"
    m = _OLD_ARXIV.match(value)
    if m:
        return None if 1 <= int(m.group(3)) <= 12 else "the month must be 01-12"
    return "write an arXiv id as YYMM.NNNNN (e.g. 2508.04652), or leave it empty"


def arxiv_year(value: str) -> int | None:
    """The year of an arXiv id (``2508.04652`` -> 2025), ``None`` when not an arXiv id."""
    m = NEW_ARXIV.match(value)
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
    new = NEW_ARXIV.match(value)
    old = _OLD_ARXIV.match(value)
    month = int(new.group(2)) if new else int(old.group(3)) if old else 0
    return year, month


def _url_problem(value: str) -> str | None:
    parts = [p.strip() for p in value.split(";")]
    for part in parts:
        if not part:
            return "an empty link between ';' separators"
        if any(ch.isspace() for ch in part):
            return f"link {show(part)} contains spaces"
        u = urlsplit(part)
        if u.scheme not in ("http", "https") or "." not in u.netloc:
            return f"{show(part)} is not an http(s) link"
    return None


def field_problem(col: Column, value: str, this_year: int) -> tuple[str, str, str] | None:
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
        return "spaces", f"{show(value)} has spaces around it", "remove them"
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
        hint = f"did you mean {show(near[0])}? " if near else ""
        return "unknown-value", f"unknown value {show(value)}", f"{hint}use one of: {choices}"
    kind = col.kind
    if kind == "key" and not _KEY.match(value):
        return (
            "bad-key",
            f"key {show(value)} has characters other than letters, digits, '.', '_', '-'",
            "use a short id such as 'magrpo' or 'dr-mas'",
        )
    if kind == "year":
        if not (value.isascii() and value.isdigit() and len(value) == 4):
            return "bad-year", f"{show(value)} is not a year", "write four digits, e.g. 2025"
        if not 1900 <= int(value) <= this_year + 1:
            return "bad-year", f"year {value} is out of range", f"write 1900-{this_year + 1}"
    if kind == "arxiv":
        fix = _arxiv_problem(value)
        if fix:
            return "bad-arxiv", f"{show(value)} is not an arXiv id", fix
    if kind == "identifier" and value.lower().startswith("arxiv:"):
        fix = _arxiv_problem(value[6:])
        if fix:
            return "bad-arxiv", f"{show(value)} is not an arXiv id", fix
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
            return "bad-date", f"{show(value)} is not a date", "write YYYY-MM-DD, e.g. 2026-04-26"
    if kind == "count" and value != NA and not _COUNT.match(value):
        return "bad-count", f"{show(value)} is not a whole number", f"write e.g. 16, or {NA}"
    if kind == "decisions" and value != NA:
        parts = value.split(";")
        bad = [p for p in parts if p not in _DECISIONS]
        if bad or len(set(parts)) != len(parts):
            return (
                "bad-decisions",
                f"{show(value)} is not a list of sub-decisions",
                f"write codes O1-O5 separated by ';' (e.g. O1;O5) without repeats, or {NA}",
            )
    return None
