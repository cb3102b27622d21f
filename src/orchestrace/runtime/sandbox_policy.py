"""Sandbox limits and results: what a sandbox may use, and what running in one gives back.

Example:
    >>> SandboxPolicy(wall_s=5.0).wall_s, Isolation("root", "/usr/bin/python3").label
    (5.0, 'namespaces/root')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ALLOW_ENV", "MAX_SOURCE", "Isolation", "RunResult", "SandboxPolicy", "Verdict"]

#: Environment variable that allows running untrusted code without isolation (``1``).
ALLOW_ENV = "ORCHESTRACE_ALLOW_UNSANDBOXED"
#: Longest candidate program :meth:`Sandbox.check` accepts (characters).
MAX_SOURCE = 1 << 22


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one sandbox.

    Attributes:
        cpu_s: CPU seconds per process (``RLIMIT_CPU``).
        wall_s: Wall-clock seconds for the whole run (the parent kills it then).
        memory_bytes: Address space per process (``RLIMIT_AS``).
        processes: Processes and threads of the sandbox user (``RLIMIT_NPROC``).
        file_bytes: Largest file a process may write (``RLIMIT_FSIZE``).
        tmp_bytes: Size of the private writable ``/tmp``.
        open_files: Open file descriptors per process (``RLIMIT_NOFILE``).
        output_bytes: stdout and stderr kept by the parent; more kills the sandbox.
        hide: Extra directories to cover with an empty directory inside the sandbox.
        allow_unsandboxed: Run even where the machine allows no isolation (rlimits only).

    Example:
        >>> SandboxPolicy(wall_s=5.0).output_bytes
        1048576
    """

    cpu_s: float = 10.0
    wall_s: float = 15.0
    memory_bytes: int = 1 << 30
    processes: int = 8
    file_bytes: int = 8 << 20
    tmp_bytes: int = 16 << 20
    open_files: int = 64
    output_bytes: int = 1 << 20
    hide: tuple[str, ...] = ()
    allow_unsandboxed: bool = False


@dataclass(frozen=True)
class Isolation:
    """What isolation the machine allows (see :func:`detect`).

    Attributes:
        mode: ``"root"`` (namespaces, then an unprivileged uid), ``"userns"`` (namespaces in
            a user namespace) or ``"none"``.
        python: The interpreter the sandbox runs.
        reason: Why the stronger modes are not available (empty when isolated).

    Example:
        >>> Isolation("none", "/usr/bin/python3", "unshare: Operation not permitted").label
        'none'
    """

    mode: str
    python: str
    reason: str = ""

    @property
    def isolated(self) -> bool:
        """Whether untrusted code runs in namespaces."""
        return self.mode != "none"

    @property
    def label(self) -> str:
        """The short name recorded with a verdict, e.g. ``"namespaces/root"``."""
        return f"namespaces/{self.mode}" if self.isolated else "none"


@dataclass(frozen=True)
class RunResult:
    """Outcome of :meth:`Sandbox.run`.

    Attributes:
        returncode: Exit status (``128 + n`` for a signal ``n``; ``None`` when killed by the
            parent at a limit).
        output: stdout and stderr together, at most ``policy.output_bytes``.
        reason: ``"exited"``, ``"timeout"`` or ``"output-limit"``.
        seconds: Wall-clock time.
        isolation: The :attr:`Isolation.label` used.
    """

    returncode: int | None
    output: bytes
    reason: str
    seconds: float
    isolation: str


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`run_candidate_tests`.

    Attributes:
        passed: Whether every test passed (decided by the test process, never the candidate).
        reason: Why not, or ``"all tests passed"``.
        isolation: The :attr:`Isolation.label` used.
        seconds: Wall-clock time of the check.
        calls: Calls of the candidate the tests made.

    Example:
        >>> Verdict(False, "timeout after 10.0 s", "namespaces/root", 10.0).as_dict()["passed"]
        False
    """

    passed: bool
    reason: str
    isolation: str
    seconds: float
    calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict."""
        return asdict(self)
