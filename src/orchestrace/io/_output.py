"""Where outputs go: every writer checks its target here and replaces it atomically.

The rules, shared by every command and writer:

* An output never deletes or replaces what orchestrace did not write. A directory is a Parquet
  dataset target only when its name ends in ``.parquet`` or it holds exactly the dataset's
  three tables (and the ``_orchestrace.json`` marker); any other directory is refused, even
  with ``--force``.
* An existing output (a file, or one of our datasets or report directories) is replaced only
  with ``--force`` (``overwrite=True`` in Python), and always by writing a complete temporary
  sibling first and renaming it into place, so the previous output stays whole until the new
  one is complete. ``--force`` replaces only a file orchestrace wrote: every file it writes
  carries the extended attribute ``user.orchestrace.output``; a file without it (written
  before the mark, or copied) counts as orchestrace's when it begins as orchestrace writes a
  trace or a recording. Any other file is refused, even with ``--force`` (where the file
  system keeps no such attributes nothing can tell, and any file is replaced, as before).
* ``-`` is not standard output: an output named ``-`` is refused (``./-`` names such a file).
* Output paths are checked before any work starts: a trailing slash, ``.``/``..``, a parent
  that is missing or a file, an unwritable directory, or an output that is also an input each
  give one line saying what to do.
* A write that fails (disk full, permission denied) is reported as :class:`OutputError`; its
  temporary files are removed and the previous output is left intact. A writer holds a lock
  on its temporary sibling until it is in place; what a killed writer left (a temporary nobody
  holds: a marked file, or a directory of dataset tables) is removed by the next write of
  the same output.
* New files get the mode the user's umask gives (``0o666 & ~umask``); a replaced file keeps
  its mode.
* A writer holds an advisory lock (``flock``) on its output while it writes; a second writer
  on the same path is refused instead of interleaving with the first.

The target checks live in :mod:`orchestrace.io._targets`, the atomic writers of files and
directories in :mod:`orchestrace.io._atomic`; this module holds the stream target and is the one
place the rest of the package imports output helpers from.

Example:
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "run.jsonl")
    >>> with atomic_write(p) as fh:
    ...     _ = fh.write(b"{}")
    >>> check_output(p)
    Traceback (most recent call last):
    ...
    orchestrace.io._targets.OutputError: ...
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path
from typing import Any

from orchestrace._safe import strict_json
from orchestrace.io._atomic import (
    _lock,
    _mkstemp,
    atomic_write,
    lock_path,
    mark_report_dir,
    replace_dir,
    report_dir,
    report_file,
)
from orchestrace.io._targets import (
    DATASET_FILES,
    FORCE_HINT,
    MARKER,
    OutputError,
    PathLike,
    _exists_error,
    _show,
    check_output,
    file_mode,
    is_our_dataset,
    mark_written,
    write_error,
)

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
    "report_json",
    "write_error",
]


def report_json(doc: Any, *, indent: int | None = 1) -> str:
    """A report document as JSON that every parser reads (values no encoder knows as text).

    A NaN or infinity (an interval of one seed, a ratio to zero) is written as ``null``; a
    dictionary then also lists them under ``"non_finite"`` (``"path = value"``), so the file
    says what it could not hold.

    Example:
        >>> print(report_json({"ratio": float("inf"), "n": 2}, indent=None))
        {"ratio": null, "n": 2, "non_finite": ["ratio = inf"]}
    """
    text, found = strict_json(doc, indent=indent, default=str)
    if found and isinstance(doc, dict):
        text, _ = strict_json({**doc, "non_finite": found}, indent=indent, default=str)
    return text


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
            check_output(path, force=True, kind="file")  # appended to: a recording of ours
            self.fd = self._os_open(flags | os.O_APPEND)
        else:
            check_output(path, force=force, kind="file")
            try:
                self.fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, file_mode())
                mark_written(self.fd)
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
        # a new file is removed only while the path still names the file this writer made
        # (something put there since, by the user or another program, is left alone)
        ours = remove_new and self._tmp is None and self._open and self._in_place()
        self._close()
        if self._tmp is not None:
            with suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None
        elif ours:
            with suppress(OSError):
                os.unlink(self.path)
        self._release()
