"""Writing outputs atomically: files, Parquet dataset directories and report directories.

Every write goes to a complete temporary sibling first and is renamed into place, under an
advisory lock on the target, so the previous output stays whole until the new one is complete
and a second writer is refused. The rules are in :mod:`orchestrace.io._output`.

Example:
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_write(p) as fh:
    ...     _ = fh.write(b"hi")
    >>> open(p, "rb").read()
    b'hi'
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from orchestrace.io._targets import (
    _ACTIVE,
    DATASET_FILES,
    DATASET_OPTIONAL,
    MARKER,
    OutputError,
    PathLike,
    _dir_mode,
    _entries,
    _exists_error,
    _leftover,
    _not_ours_error,
    _read_marker,
    _regular,
    _show,
    check_output,
    file_mode,
    mark_of,
    mark_written,
    write_error,
    written_by_orchestrace,
)


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
    _sweep_abandoned(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    _hold(fd)  # held until it is renamed into place (or removed): it is not abandoned
    try:
        st = os.stat(target)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else file_mode()
    except OSError:
        mode = file_mode()
    with suppress(OSError):
        os.fchmod(fd, mode)
    mark_written(fd)  # what ``--force`` may replace later (marked only once held)
    return fd, tmp


def _hold(fd: int) -> None:
    """Lock a temporary output while it is written: a later run can tell it from a leftover."""
    with suppress(OSError):  # file systems without flock: no lock, and no sweeping either
        fcntl.flock(fd, fcntl.LOCK_EX)


def _sweep_abandoned(target: Path) -> None:
    """Remove what earlier writes of ``target`` left when they were killed (``kill -9``).

    A writer holds a lock on its temporary sibling until the sibling is renamed into place.
    A sibling named as orchestrace names them that nobody holds is a leftover; it is removed
    when it is orchestrace's: a file carrying the ownership mark, or a directory holding only
    a Parquet dataset's tables. Anything else, and anything a writer holds, is left alone.
    """
    prefix = f".{target.name}."
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and _leftover(name)):
            continue
        p = target.parent / name
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a writer holds it (or this file system has no locks)
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) and mark_of(fd) is True:
                os.unlink(p)
            elif stat.S_ISDIR(mode):
                inside = _entries(p)
                tables = {*DATASET_FILES, *DATASET_OPTIONAL, MARKER}
                if inside and all(n in tables and _regular(p / n) for n in inside):
                    shutil.rmtree(p)  # (an empty one may be a writer's that is not held yet)
        except OSError:
            pass  # gone meanwhile, or not ours to remove: left alone
        finally:
            os.close(fd)


def _publish(tmp: str, target: Path, force: bool, owned: bool = False) -> None:
    if force:
        # checked again at the rename: a user's file may have appeared during a long write
        if not owned and _regular(target) and not written_by_orchestrace(target):
            raise _not_ours_error(target)
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
    owned: bool = False,
) -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    ``path`` is checked first (see :func:`check_output`). A crash or error never leaves a
    half-written file where a good one was, and never leaves the temporary file behind.

    Args:
        path: The output file.
        mode: ``"wb"`` or ``"w"``.
        force: Replace ``path`` if it exists (a file orchestrace wrote: see
            :func:`~orchestrace.io._targets.written_by_orchestrace`).
        inputs: Files the output may not be.
        owned: ``path`` is known to be orchestrace's (see :func:`check_output`).

    Raises:
        OutputError: The output may not be written there, or writing failed.
    """
    target = check_output(path, force=force, kind="file", inputs=inputs, owned=owned)
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
            _publish(tmp, target, force, owned)  # still held: never taken for a leftover
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
    _sweep_abandoned(target)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        held = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise write_error(path, err) from None
    _hold(held)  # until it is renamed into place (or removed)
    try:
        os.chmod(tmp, _dir_mode())
    except OSError as err:
        os.close(held)
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(path, err) from None
    try:
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
                        tempfile.mkdtemp(
                            prefix=f".{target.name}.", suffix=".old", dir=target.parent
                        )
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
    finally:
        os.close(held)  # (after the rename: held until it is in place)


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
    inside = active is not None and os.path.abspath(target.parent) == active[0]
    # inside a report directory the file is ours (the directory's marker lists it); a file
    # written on its own is replaced only when orchestrace wrote it
    with atomic_write(target, mode, force=True, owned=inside) as fh:
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
