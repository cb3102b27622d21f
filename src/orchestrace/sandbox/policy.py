"""Sandbox limits and results: what a sandbox may use and see, and what running in one gives back.

Example:
    >>> SandboxPolicy(wall_s=5.0).wall_s, Isolation("root", "/usr/bin/python3").label
    (5.0, 'namespaces/root')
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
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


# -- what a sandbox sees of the machine ---------------------------------------------------------


def _binds(python: str) -> list[str]:
    """Directories the interpreter needs, bound read-only (outermost only)."""
    cands = [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/libx32",
        "/bin",
        "/sbin",
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.base_exec_prefix),
        os.path.dirname(python),
        os.path.realpath(sysconfig.get_paths()["stdlib"]),
    ]
    out: list[str] = []
    for p in sorted(set(cands), key=len):
        if p == "/" or not os.path.lexists(p):
            continue
        if os.path.islink(p) and os.path.dirname(p) != "/":
            p = os.path.realpath(p)
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _hidden(binds: list[str], extra: tuple[str, ...]) -> list[str]:
    """Package directories (and ``extra``) under the binds, to cover inside the sandbox."""
    cands = [*extra, *site.getsitepackages([sys.base_prefix, sys.base_exec_prefix])]
    for scheme_vars in ({"base": sys.base_prefix, "platbase": sys.base_exec_prefix},):
        paths = sysconfig.get_paths(vars=scheme_vars)
        cands += [paths["purelib"], paths["platlib"]]
    cands += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    for root in ("/usr/lib", "/usr/local/lib", "/usr/lib64", "/usr/local/lib64", "/usr/share"):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for n in names:
            if n.startswith("python"):
                cands += [f"{root}/{n}/dist-packages", f"{root}/{n}/site-packages"]
    out: list[str] = []
    for c in cands:
        p = os.path.realpath(c)
        inside = any(p.startswith(b.rstrip("/") + "/") for b in binds)
        if inside and os.path.isdir(p) and p not in out:
            out.append(p)
    return out
