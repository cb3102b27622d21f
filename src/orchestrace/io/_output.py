"""Where outputs go: every writer checks its target here and replaces it atomically.

The rules, shared by every command and writer:

* An output never deletes or replaces what orchestrace did not write. A directory is a Parquet
  dataset target only when its name ends in ``.parquet`` or it holds exactly the dataset's
  three tables (and the ``_orchestrace.json`` marker); any other directory is refused, even
  with ``--force``.
* An existing output (a file, or one of our datasets or report directories) is replaced only
  with ``--force`` (``overwrite=True`` in Python), and always by writing a complete temporary
  sibling first and renaming it into place, so the previous output stays whole until the new
  one is complete.
* Output paths are checked before any work starts: a trailing slash, ``.``/``..``, a parent
  that is missing or a file, an unwritable directory, or an output that is also an input each
  give one line saying what to do.
* A write that fails (disk full, permission denied) is reported as :class:`OutputError`; its
  temporary files are removed and the previous output is left intact.
* New files get the mode the user's umask gives (``0o666 & ~umask``); a replaced file keeps
  its mode.
* A writer holds an advisory lock (``flock``) on its output while it writes; a second writer
  on the same path is refused instead of interleaving with the first.
"""

from __future__ import annotations

import contextvars
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Literal

from orchestrace.errors import TraceError

__all__ = [
    "DATASET_FILES",
    "FORCE_HINT",
    "MARKER",
    "OutputError",
    "StreamTarget",
    "atomic_write",
    "check_output",
    "file_mode",
    "is_our_dataset",
    "lock_path",
    "mark_report_dir",
    "replace_dir",
    "report_dir",
    "report_file",
    "write_error",
]

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

    Returns:
        The output path.

    Raises:
        OutputError: The output may not be written there; the message says what to do.
    """
    try:
        return _check_output(path, force, kind, inputs, report)
    except OSError as err:  # a name too long, a symlink loop...: the system's own words
        raise write_error(path, err) from None


def _check_output(
    path: PathLike, force: bool, kind: Kind, inputs: Iterable[PathLike], report: str
) -> Path:
    raw = os.fspath(path)
    shown = _show(raw)
    if not raw:
        raise OutputError(raw, "the output path is empty; give a file name")
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
    return p


# ---------------------------------------------------------------------- locks
def _lock(fd: int, path: PathLike) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OutputError(
            path,
            f"{_show(path)} is being written by another orchestrace process; wait for it to "
            "finish or choose another path",
        ) from None
    except OSError:
        pass  # file systems without flock: no lock, as before


@contextmanager
def lock_path(path: PathLike) -> Iterator[None]:
    """Hold the writers' lock of an existing output file (nothing when it does not exist).

    Raises:
        OutputError: Another process is writing it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        yield
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            _lock(fd, path)
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- files
def _mkstemp(target: Path) -> tuple[int, str]:
    """A temporary sibling of ``target`` with the mode the output will have.

    That is the mode of the file it replaces, if there is one (a file the user made private
    stays private), else the umask's.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        st = os.stat(target)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else file_mode()
    except OSError:
        mode = file_mode()
    with suppress(OSError):
        os.fchmod(fd, mode)
    return fd, tmp


def _publish(tmp: str, target: Path, force: bool) -> None:
    if force:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # atomic "create if absent": never replaces a file made meanwhile
    except FileExistsError:
        raise _exists_error(target) from None
    except OSError as err:
        if err.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EXDEV,
            errno.EMLINK,
        ):
            raise
        if target.exists() or target.is_symlink():
            raise _exists_error(target) from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


@contextmanager
def atomic_write(
    path: PathLike,
    mode: str = "wb",
    *,
    force: bool = False,
    inputs: Iterable[PathLike] = (),
) -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    ``path`` is checked first (see :func:`check_output`). A crash or error never leaves a
    half-written file where a good one was, and never leaves the temporary file behind.

    Args:
        path: The output file.
        mode: ``"wb"`` or ``"w"``.
        force: Replace ``path`` if it exists.
        inputs: Files the output may not be.

    Raises:
        OutputError: The output may not be written there, or writing failed.
    """
    target = check_output(path, force=force, kind="file", inputs=inputs)
    try:
        fd, tmp = _mkstemp(target)
    except OSError as err:
        raise write_error(path, err) from None
    try:
        encoding = None if "b" in mode else "utf-8"
        with lock_path(target), os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _publish(tmp, target, force)
    except OSError as err:
        with suppress(OSError):
            os.unlink(tmp)
        raise write_error(path, err) from None
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------- directories
def _write_marker(d: Path, kind: str, files: Iterable[str] = ()) -> None:
    """Write the marker atomically: a complete temporary sibling renamed into place."""
    data = {"writer": "orchestrace", "kind": kind, "files": sorted(set(files))}
    fd, tmp = _mkstemp(d / MARKER)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, d / MARKER)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


@contextmanager
def replace_dir(
    path: PathLike,
    *,
    force: bool = False,
    inputs: Iterable[PathLike] = (),
    kind: str = "parquet-dataset",
) -> Iterator[Path]:
    """Build a dataset directory in a temporary sibling and swap it in when complete.

    Yields the temporary directory to fill. On success the marker is added, an existing
    dataset (ours, checked again right before) is renamed aside, the new one renamed in, and
    the old one removed. On failure the temporary directory is removed and the old dataset is
    left as it was.

    Raises:
        OutputError: The output may not be written there, or writing failed.
    """
    target = check_output(path, force=force, kind="dataset", inputs=inputs)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        os.chmod(tmp, _dir_mode())
    except OSError as err:
        raise write_error(path, err) from None
    old: Path | None = None
    moved = False
    try:
        yield tmp
        _write_marker(tmp, kind)
        if target.exists() or target.is_symlink():
            # checked again now: something may have appeared since the first check
            check_output(path, force=force, kind="dataset")
            if target.is_dir() and not _entries(target):
                target.rmdir()
            else:
                old = Path(
                    tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
                )
                os.rename(target, old / "previous")
                moved = True
        os.rename(tmp, target)
        moved = False
    except BaseException as exc:
        # put the previous dataset back (an interrupt between the two renames included)
        if moved and old is not None and not (target.exists() or target.is_symlink()):
            with suppress(OSError):
                os.rename(old / "previous", target)
        if old is not None and not (old / "previous").exists():
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # the previous dataset, ours (checked above)


def _inside(name: Any, directory: Path) -> bool:
    if not isinstance(name, (str, bytes, os.PathLike)):
        return False
    try:
        here = os.path.abspath(os.fsdecode(name))
        return os.path.commonpath([here, os.path.abspath(directory)]) == os.path.abspath(directory)
    except ValueError:
        return False


def _report_files(p: Path) -> list[str]:
    return [n for n in _entries(p) if n != MARKER and not _leftover(n) and _regular(p / n)]


def mark_report_dir(path: PathLike, report: str) -> None:
    """Record in ``path`` that orchestrace wrote it (``report``: which command), listing its files.

    A later run of the same command may then replace them with ``--force``. Temporary
    siblings left by interrupted writes of the listed files are removed.

    Raises:
        OutputError: The marker cannot be written (the previous one, if any, stays whole).
    """
    p = Path(path)
    names = _report_files(p)
    try:
        _write_marker(p, report, names)
    except OSError as err:
        raise write_error(p / MARKER, err) from None
    ours = {*names, MARKER}
    for n in _entries(p):
        if _leftover(n) and any(n.startswith(f".{x}.") for x in ours) and _regular(p / n):
            with suppress(OSError):
                os.unlink(p / n)


def _register(d: Path, kind: str, name: str) -> None:
    """Add ``name`` to the marker of report directory ``d`` before it is written."""
    marker = _read_marker(d)
    listed = marker.get("files") if marker is not None else None
    files = {str(x) for x in listed} if isinstance(listed, list) else set()
    if name in files:
        return
    try:
        _write_marker(d, kind, {*files, *_report_files(d), name})
    except OSError as err:
        raise write_error(d / MARKER, err) from None


def _missing_dirs(p: Path) -> list[Path]:
    """The directories of ``p`` and its parents that do not exist yet, outermost first."""
    missing: list[Path] = []
    probe = p
    while not (probe.exists() or probe.is_symlink()) and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    return missing[::-1]


def _discard_new(p: Path, before: set[str], created: list[Path]) -> None:
    """Remove the files a failed run created in ``p``, and the directories it created.

    Only files this run wrote go: those its writers registered in the marker (see
    :func:`report_file`) and their temporary siblings. A file someone else put there while
    the run went on stays.
    """
    marker = _read_marker(p) if p.is_dir() else None
    listed = marker.get("files") if marker is not None else None
    ours = {str(x) for x in listed} if isinstance(listed, list) else set()
    ours.add(MARKER)
    for n in _entries(p):
        if n in before or n == MARKER or not _regular(p / n):
            continue
        temp = _leftover(n) and any(n.startswith(f".{x}.") for x in ours)
        if n in ours or temp:
            with suppress(OSError):
                os.unlink(p / n)
    if not before:
        with suppress(OSError):
            os.unlink(p / MARKER)
    for d in reversed(created):
        with suppress(OSError):
            d.rmdir()  # only when empty


@contextmanager
def report_file(path: PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write one file of a report directory atomically (see :func:`atomic_write`).

    The directory is created when missing. Inside :func:`report_dir`, the file is listed in
    the directory's marker before it is written, so that a run killed meanwhile leaves a
    directory a later run recognises as its own. An existing file is replaced: the directory
    was checked before the work (see :func:`report_dir`).

    Args:
        path: The file, inside the report directory.
        mode: ``"wb"`` or ``"w"``.

    Raises:
        OutputError: Writing failed (disk full, permission denied); the message names the file.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(target.parent, err) from None
    active = _ACTIVE.get()
    if active is not None and os.path.abspath(target.parent) == active[0]:
        _register(target.parent, active[1], target.name)
    with atomic_write(target, mode, force=True) as fh:
        yield fh


@contextmanager
def report_dir(path: PathLike, *, force: bool = False, report: str = "report") -> Iterator[Path]:
    """Check a directory of reports before the work, and mark it as ours after.

    The directory may be new (it is created with its parents by the writer), empty, one that
    the same command wrote before (with ``force``), or one holding only leftovers of an
    interrupted write of ours; see :func:`check_output`. Files are written with
    :func:`report_file`. When the work succeeds the marker lists the directory's files, so a
    later run may replace them with ``--force``. When it fails, the files this run created
    are removed (with the directory, if this run created it); the files of an earlier report
    stay, and the marker lists what is left. When it is interrupted (Ctrl-C), the files
    written so far (each complete) stay and are listed, so the work done is not lost.

    A call for the directory an enclosing call is already writing does nothing more.

    Raises:
        OutputError: The directory may not be written, or writing a file in it failed.
    """
    active = _ACTIVE.get()
    if active is not None and active[0] == os.path.abspath(os.fspath(path)):
        yield Path(path)  # checked and guarded by the enclosing call
        return
    p = check_output(path, force=force, kind="dir", report=report)
    before = set(_entries(p)) if p.is_dir() else set()
    created = _missing_dirs(p)
    token = _ACTIVE.set((os.path.abspath(p), report))
    failed = discarded = False
    try:
        yield p
    except OSError as err:
        failed = discarded = True
        _discard_new(p, before, created)
        if _inside(err.filename, p):  # writing the reports failed (disk full, permissions)
            raise write_error(err.filename, err) from None
        raise
    except Exception:
        failed = discarded = True
        _discard_new(p, before, created)
        raise
    except BaseException:  # interrupted: the files written so far are complete; keep them
        failed = True
        raise
    finally:
        _ACTIVE.reset(token)
        # after a failure in a new directory nothing of ours is left to mark (a file that
        # appeared meanwhile is not ours)
        if p.is_dir() and _report_files(p) and not (discarded and not before):
            try:
                mark_report_dir(p, report)
            except OutputError:
                if not failed:
                    raise


# ---------------------------------------------------------------------- streams
class StreamTarget:
    """An output file written record by record while a run goes on.

    A new file is created exclusively (never truncating anything) and written in place, so a
    crash leaves every complete record where the user asked. An existing file (with
    ``force``) is replaced by a temporary sibling renamed into place by :meth:`commit`, so it
    stays whole until the new recording is complete. Either way the output is locked while
    written: a second writer is refused.

    Args:
        path: The output file.
        force: Replace an existing file.
        append: Append to the existing file instead (nothing is replaced).

    Raises:
        OutputError: The output may not be written there, another process writes it, or the
            file cannot be created.
    """

    def __init__(self, path: PathLike, *, force: bool = False, append: bool = False) -> None:
        self.path = Path(path)
        self.shown = os.fspath(path)
        self._tmp: str | None = None
        self._guard: int | None = None
        self._open = False
        flags = os.O_WRONLY | os.O_CLOEXEC
        if append and self.path.exists():
            check_output(path, force=True, kind="file")
            self.fd = self._os_open(flags | os.O_APPEND)
        else:
            check_output(path, force=force, kind="file")
            try:
                self.fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, file_mode())
            except FileExistsError:
                if not force:
                    raise _exists_error(path) from None
                self._replace()
                return
            except OSError as err:
                raise write_error(path, err) from None
        self._open = True
        try:
            _lock(self.fd, self.shown)
        except OutputError:
            self._close()
            raise

    def _os_open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags)
        except OSError as err:
            raise write_error(self.shown, err) from None

    def _replace(self) -> None:
        guard = self._os_open(os.O_RDONLY | os.O_CLOEXEC)
        try:
            _lock(guard, self.shown)
        except OutputError:
            os.close(guard)
            raise
        self._guard = guard
        try:
            self.fd, self._tmp = _mkstemp(self.path)
        except OSError as err:
            self._release()
            raise write_error(self.shown, err) from None
        self._open = True

    def _close(self) -> None:
        if self._open:
            self._open = False
            with suppress(OSError):
                os.close(self.fd)

    def _release(self) -> None:
        if self._guard is not None:
            with suppress(OSError):
                os.close(self._guard)
            self._guard = None

    def commit(self) -> None:
        """Close the file; a replacing recording is renamed into place now.

        Raises:
            OutputError: Renaming failed (the previous file is left intact).
        """
        try:
            if self._tmp is not None:
                os.fsync(self.fd)
                os.replace(self._tmp, self.path)
                self._tmp = None
            elif not self._in_place():
                self._close()
                self._release()
                raise OutputError(
                    self.shown,
                    f"{_show(self.shown)} was moved or removed while it was being written; "
                    "the recording is not there; run again",
                )
        except OSError as err:
            self.discard()
            raise write_error(self.shown, err) from None
        self._close()
        self._release()

    def _in_place(self) -> bool:
        try:
            return os.path.samestat(os.fstat(self.fd), os.stat(self.path))
        except OSError:
            return False

    def close_partial(self) -> None:
        """Close without finishing.

        A new file keeps its complete records (read back as a partial trace); a replacing
        recording is dropped and the previous file stays.
        """
        if self._tmp is not None:
            self.discard()
            return
        self._close()
        self._release()

    def discard(self, *, remove_new: bool = False) -> None:
        """Close and drop what was written.

        Args:
            remove_new: Also remove a newly created file (a recording that cannot be
                completed); a replaced file's predecessor is always kept.
        """
        self._close()
        if self._tmp is not None:
            with suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None
        elif remove_new:
            with suppress(OSError):
                os.unlink(self.path)
        self._release()
