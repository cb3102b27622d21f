"""How large a single JSON document the in-memory readers take on this machine.

A JSON trace is one document: it is decoded whole, and checking it holds every event as an
object, about :data:`BYTES_PER_BYTE` bytes of memory per byte of the file. Rather than let a
very large file push the machine into swap (or the kernel's out-of-memory killer), the
commands that read it refuse it in one line naming what to use instead: a Parquet dataset,
which ``validate`` and ``analyze`` read column-wise.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> _ = open(path, "w").write("{}")
    >>> check_json_size(path)  # small: nothing to say
    >>> try:
    ...     check_json_size(path, limit=1)
    ... except TraceFormatError as err:
    ...     print(str(err).split(": ", 1)[1][:44])
    file: this JSON document (0 MB) is too large
"""

from __future__ import annotations

import os

from orchestrace.errors import TraceFormatError
from orchestrace.io._common import PathLike, env_number

__all__ = ["BYTES_PER_BYTE", "ENV", "check_json_size", "json_limit"]

#: Memory a JSON trace needs per byte of the file, decoded and checked (measured: a 2 GB
#: document of 10,000,000 events peaks at about 11 GB).
BYTES_PER_BYTE = 6

#: Environment variable overriding the limit, in megabytes.
ENV = "ORCHESTRACE_MAX_JSON_MB"


def _available() -> int | None:
    """Bytes of memory available now (``MemAvailable``), when the system says."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def json_limit() -> int:
    """The largest JSON document, in bytes, that fits in the memory available now.

    ``$ORCHESTRACE_MAX_JSON_MB`` sets it explicitly; otherwise it is the available memory
    divided by :data:`BYTES_PER_BYTE` (1 GiB when the system does not say).

    Raises:
        ConfigError: ``$ORCHESTRACE_MAX_JSON_MB`` is not a number of megabytes > 0.
    """
    if os.environ.get(ENV) is not None:
        mb = env_number(ENV, 1024.0, "megabytes", "the limit follows the available memory")
        return int(min(mb, 1 << 40) * 1024 * 1024)
    avail = _available()
    return avail // BYTES_PER_BYTE if avail else 1 << 30


def check_json_size(path: PathLike, *, limit: int | None = None) -> None:
    """Refuse a regular file too large to decode and check as one JSON document.

    Args:
        path: The file (pipes and missing files are left to the reader).
        limit: Largest size in bytes; by default :func:`json_limit`.

    Raises:
        TraceFormatError: The file is larger than the limit; the message names its size,
            the limit and the fix (a Parquet dataset, read column-wise).
    """
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        return
    cap = json_limit() if limit is None else limit
    if size <= cap:
        return
    mb = 1024 * 1024
    raise TraceFormatError(
        str(path),
        "file",
        f"this JSON document ({size // mb:,} MB) is too large to check in memory here "
        f"(it needs about {size * BYTES_PER_BYTE // mb:,} MB; the limit is {cap // mb:,} MB)",
        "write the trace as a Parquet dataset (`orchestrace convert FILE --to parquet -o "
        "OUT.parquet` on a machine with more memory, or `orchestrace generate -o "
        f"OUT.parquet`), which is read column-wise, or raise the limit with {ENV}=N",
    )
