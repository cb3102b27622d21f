"""Checking an output target before any work starts (the rules are in :mod:`orchestrace.io._output`).

:func:`check_output` refuses, in one line saying what to do, a target that would delete or
replace what orchestrace did not write, an existing output without ``--force``, a bad path
(trailing slash, ``.``/``..``, a missing or non-directory parent, an unwritable directory) and an
output that is also an input. The small helpers here (markers, dataset detection, file modes,
error wording) are shared with the writers of :mod:`orchestrace.io._atomic`.

Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> check_output(os.path.join(d, "t.json")).name
    't.json'
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import os
import re
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from orchestrace.errors import TraceError

PathLike = str | os.PathLike[str]
Kind = Literal["file", "dataset", "dir"]

#: The tables of a Parquet dataset.
DATASET_FILES = ("events.parquet", "edges.parquet", "traces.parquet")
#: Tables a dataset holds only when it has something to put in them.
DATASET_OPTIONAL = ("tokens.parquet",)
#: Small file marking a directory (dataset or report) that orchestrace wrote.
MARKER = "_orchestrace.json"
#: How messages name the replace switch; the command line sets ``"--force"``.
FORCE_HINT: contextvars.ContextVar[str] = contextvars.ContextVar(
    "orchestrace_force_hint", default="overwrite=True"
)
#: Name of a temporary sibling left by an interrupted write (see :func:`_mkstemp`).
_LEFTOVER = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp\Z", re.DOTALL)
#: The report directory being written (absolute path, kind), while :func:`report_dir` runs.
_ACTIVE: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "orchestrace_report_dir", default=None
)


class OutputError(TraceError):
    """An output cannot be written where asked; the message says why and what to do.

    Attributes:
        path: The output path as given.
    """

    def __init__(self, path: PathLike, message: str) -> None:
        self.path = str(path)
        super().__init__(message)


# ---------------------------------------------------------------------- small helpers
def _show(path: PathLike) -> str:
    text = os.fspath(path)
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 200 else text[:197] + "..."


def _umask() -> int:
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # no /proc: read it by setting it (and put it back at once)
    os.umask(old)
    return old


def file_mode() -> int:
    """Mode of a new file under the current umask (``0o666 & ~umask``)."""
    return 0o666 & ~_umask()


def _dir_mode() -> int:
    return 0o777 & ~_umask()


def write_error(path: PathLike, err: OSError) -> OutputError:
    """An :class:`OutputError` for an ``OSError`` met while writing ``path``."""
    reason = err.strerror or str(err) or type(err).__name__
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free space or choose another path"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "make the directory writable or choose another path"
    else:
        fix = "choose another path"
    return OutputError(path, f"cannot write {_show(path)}: {reason}; {fix}")


def _exists_error(path: PathLike) -> OutputError:
    return OutputError(path, f"{_show(path)} exists; pass {FORCE_HINT.get()} to replace it")


#: The extended attribute that marks a file orchestrace wrote (where the file system keeps
#: them): ``--force`` replaces only such files.
OWNER_XATTR = "user.orchestrace.output"


def mark_written(fd: int) -> None:
    """Mark the file open as ``fd`` as one orchestrace wrote (nothing where marks are unknown)."""
    setx = getattr(os, "setxattr", None)
    if setx is not None:
        # a file system without user attributes: the content tells instead
        with contextlib.suppress(OSError):
            setx(fd, OWNER_XATTR, b"1")


def mark_of(file: PathLike | int) -> bool | None:
    """Whether ``file`` (a path or an open descriptor) carries :func:`mark_written`'s mark.

    ``None`` where nothing can tell: the platform's Python or the file system keeps no user
    extended attributes.
    """
    getx = getattr(os, "getxattr", None)
    if getx is None:
        return None
    try:
        return bool(getx(file, OWNER_XATTR) == b"1")
    except OSError as err:
        return None if err.errno in _NO_ATTRIBUTES else False


def written_by_orchestrace(path: PathLike) -> bool:
    """Whether the existing regular file ``path`` is one orchestrace wrote.

    A file carries the mark :func:`mark_written` gives. Without it (written before the mark
    existed, or copied), only a trace or a recording as orchestrace writes them counts: the file
    begins ``{"trace_id":`` or ``{"header":{"trace_id":``. Where the file system keeps no
    extended attributes at all (or Python offers none, as on macOS), nothing can tell, and any
    file counts, as before the mark existed.

    Example:
        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "notes.json")
        >>> with open(p, "w") as fh:
        ...     _ = fh.write('{"notes": "precious, and they mention orchestrace"}')
        >>> written_by_orchestrace(p)
        False
    """
    if mark_of(path) is not False:
        return True  # marked, or a platform or file system without attributes: nothing can tell
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.startswith((b'{"trace_id":', b'{"header":{"trace_id":'))


#: What ``getxattr`` answers where the file system keeps no user attributes.
_NO_ATTRIBUTES = frozenset(
    getattr(errno, name) for name in ("ENOTSUP", "EOPNOTSUPP") if hasattr(errno, name)
)


def _not_ours_error(path: PathLike) -> OutputError:
    return OutputError(
        path,
        f"{_show(path)} exists and orchestrace did not write it ({FORCE_HINT.get()} replaces "
        "only orchestrace's own outputs); move it away or choose another path",
    )


def _entries(p: Path) -> list[str]:
    try:
        return sorted(os.listdir(p))
    except OSError:
        return []


def _holds(p: Path, names: Iterable[str], ours: Iterable[str] = ()) -> str:
    skip = set(ours)
    shown = []
    for name in names:
        if name in skip:
            continue
        shown.append(_show(name) + ("/" if (p / name).is_dir() else ""))
    if not shown:
        return "it holds files orchestrace does not write"
    head = ", ".join(shown[:3])
    if len(shown) > 3:
        head += f" and {len(shown) - 3} more"
    return f"it holds {head}"


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def _read_marker(p: Path) -> dict[str, Any] | None:
    m = p / MARKER
    if not _regular(m):
        return None
    try:
        if m.stat().st_size > 65536:
            return None
        data = json.loads(m.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("writer") != "orchestrace":
        return None
    return data


def is_our_dataset(path: PathLike) -> bool:
    """``True`` when ``path`` is a Parquet dataset directory as orchestrace writes it.

    That is: exactly the three tables (plain files), optionally with the token table
    (``tokens.parquet``) and the marker file.
    """
    p = Path(path)
    try:
        if not p.is_dir() or p.is_symlink():
            return False
    except OSError:
        return False
    names = set(_entries(p))
    extra = names - set(DATASET_FILES) - set(DATASET_OPTIONAL) - {MARKER}
    if extra or not set(DATASET_FILES) <= names:
        return False
    if MARKER in names and _read_marker(p) is None:
        return False
    return all(_regular(p / n) for n in names - {MARKER})


def _leftover(name: str) -> bool:
    return _LEFTOVER.match(name) is not None


def _our_report_dir(p: Path, kind: str) -> bool:
    """Whether ``p`` holds only files of an earlier ``kind`` report and leftovers of ours.

    Leftovers are the temporary siblings of an interrupted write. A directory holding nothing
    but such leftovers is ours too.
    """
    names = _entries(p)
    if not all(_regular(p / n) for n in names):
        return False
    rest = {n for n in names if n != MARKER and not _leftover(n)}
    marker = _read_marker(p)
    if MARKER in names and (marker is None or marker.get("kind") != kind):
        return False
    if marker is None:
        return not rest
    listed = marker.get("files")
    if not isinstance(listed, list):
        return False
    return rest <= {str(x) for x in listed}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _check_parent(path: PathLike, parent: Path, *, create: bool) -> None:
    shown = _show(path)
    probe = parent
    while not probe.exists():
        if probe.is_symlink():
            raise OutputError(
                path,
                f"cannot write {shown}: {_show(probe)} is a broken symbolic link; "
                "choose another path",
            )
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise OutputError(
            path,
            f"cannot write {shown}: {_show(probe)} is a file, not a directory; choose another path",
        )
    if not parent.exists():
        if create:
            probe_parent = probe
        else:
            raise OutputError(
                path,
                f"cannot write {shown}: directory {_show(parent)} does not exist; "
                f"create it first (mkdir -p {shlex.quote(_show(parent))}) or choose another path",
            )
    else:
        probe_parent = parent
    if not os.access(probe_parent, os.W_OK | os.X_OK):
        raise OutputError(
            path,
            f"cannot write {shown}: permission denied in directory {_show(probe_parent)}; "
            "make it writable or choose another path",
        )


# ---------------------------------------------------------------------- the check
def check_output(
    path: PathLike,
    *,
    force: bool = False,
    kind: Kind = "file",
    inputs: Iterable[PathLike] = (),
    report: str = "report",
    owned: bool = False,
) -> Path:
    """Check that ``path`` may be written, before any work starts.

    Args:
        path: The output as given.
        force: Replace an existing output (a file, or a directory orchestrace wrote).
        kind: ``"file"``, ``"dataset"`` (a Parquet dataset directory) or ``"dir"`` (a
            directory of reports, written into; created with its parents when missing).
        inputs: Files read by the same command; the output may not be one of them.
        report: For ``kind="dir"``: what writes it (``bench``, ``train``, ``study``...), as
            recorded in the directory's marker.
        owned: An existing file is known to be orchestrace's (a file of one of its report
            directories, a recording appended to): ``force`` replaces it without asking
            :func:`written_by_orchestrace`.

    Returns:
        The output path.

    Raises:
        OutputError: The output may not be written there; the message says what to do.
    """
    try:
        return _check_output(path, force, kind, inputs, report, owned)
    except OSError as err:  # a name too long, a symlink loop...: the system's own words
        raise write_error(path, err) from None


def _check_output(
    path: PathLike, force: bool, kind: Kind, inputs: Iterable[PathLike], report: str, owned: bool
) -> Path:
    raw = os.fspath(path)
    shown = _show(raw)
    if not raw:
        raise OutputError(raw, "the output path is empty; give a file name")
    if raw == "-":  # reads as standard output, which outputs are not written to
        raise OutputError(
            raw,
            "'-' is not standard output here: outputs are written to files; give a file name "
            "(./- for a file named '-')",
        )
    p = Path(raw)
    if kind != "dir":
        if raw.endswith(("/", os.sep)):
            raise OutputError(
                raw,
                f"{shown} ends in '/'; name a file (OUT.json, OUT.jsonl) or a dataset "
                "(OUT.parquet) without a trailing slash",
            )
        if p.name in ("", ".", ".."):
            raise OutputError(
                raw, f"{shown} is a directory, not an output name; give a file name inside it"
            )
    for src in inputs:
        if os.fspath(src) != "-" and _same_file(Path(os.fspath(src)), p):
            raise OutputError(raw, f"{shown} is also an input; write the output to another path")
    _check_parent(raw, p.parent if p.name else p, create=kind == "dir")
    if not (p.exists() or p.is_symlink()):
        return p
    if kind == "dir":
        if not p.is_dir():
            raise OutputError(raw, f"{shown} is a file; give a directory for the {report}")
        names = _entries(p)
        if not names:
            if not os.access(p, os.W_OK | os.X_OK):
                raise OutputError(
                    raw,
                    f"cannot write {shown}: permission denied; make it writable or choose "
                    "another path",
                )
            return p
        if _our_report_dir(p, report):
            if not force:
                raise _exists_error(raw)
            return p
        raise OutputError(
            raw,
            f"{shown} is a directory that orchestrace did not write ({_holds(p, names)}); "
            "choose another path",
        )
    if p.is_dir() and not p.is_symlink():
        names = _entries(p)
        if not names:
            if kind == "dataset":
                return p  # an empty directory: nothing to lose
            raise OutputError(
                raw, f"{shown} is a directory, not an output name; give a file name inside it"
            )
        if is_our_dataset(p):
            if kind != "dataset":
                raise OutputError(
                    raw, f"{shown} is a Parquet dataset; choose a file path for this format"
                )
            if not force:
                raise _exists_error(raw)
            return p
        raise OutputError(
            raw,
            f"{shown} is a directory that orchestrace did not write "
            f"({_holds(p, names, (*DATASET_FILES, MARKER))}); choose another path",
        )
    try:
        mode = os.stat(p).st_mode
    except OSError:
        mode = 0
    if p.is_symlink() and not mode:
        raise OutputError(raw, f"{shown} is a broken symbolic link; choose another path")
    if not stat.S_ISREG(mode):
        raise OutputError(raw, f"{shown} is not a regular file; choose another path")
    if not force:
        raise _exists_error(raw)
    if not owned and not written_by_orchestrace(p):
        raise _not_ours_error(raw)
    return p
