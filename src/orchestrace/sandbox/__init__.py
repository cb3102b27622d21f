r"""Run untrusted Python (model-written code) in a throwaway sandbox.

Each sandbox is a fresh Python interpreter (the base interpreter, ``-I -S``) started by a small
launcher that uses what Linux gives:

* **namespaces** (``unshare(2)``): its own mount, PID, network, IPC and UTS namespaces; as an
  unprivileged user also its own user namespace. The PID namespace gets a fresh ``/proc``, so
  nothing outside the sandbox (the checker, its environment, ``/proc/<ppid>``) is visible or can
  be signalled; the network namespace has no interface but a down loopback, so nothing can be
  reached; when the sandbox ends, the kernel kills every process left in its PID namespace
  (double-forked daemons included).
* **a private root** (``pivot_root(2)``): an empty read-only tmpfs holding read-only binds of
  what the interpreter needs (``/usr``, ``/lib*``, the interpreter's prefix), with every
  ``site-packages``/``dist-packages`` directory (and any path in
  :attr:`SandboxPolicy.hide`) covered by an empty read-only tmpfs, ``/dev/null``-like devices,
  the fresh ``/proc`` and a small writable ``/tmp`` (the only writable place).
* **no privileges**: as root it switches to an unused unprivileged uid; in every mode it drops
  all capabilities and sets ``no_new_privs``.
* **fewer kernel interfaces**: a seccomp filter (x86_64, aarch64) refuses ``ptrace``, the key
  system calls, module loading, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``,
  mounts and namespaces; the parent's session keyring is left for an empty one.
* **rlimits**: CPU seconds, address space, processes, file size, open files, no core dumps; the
  parent enforces the wall-clock limit and reads the sandbox's output with a cap (beyond it the
  sandbox is killed), so it never buffers more than :attr:`SandboxPolicy.output_bytes`.

:func:`detect` finds what the machine allows. Where no isolation is possible, running untrusted
code is refused with a :class:`~orchestrace.errors.RuntimeError_` unless the caller opts in
(``allow_unsandboxed=True`` or ``ORCHESTRACE_ALLOW_UNSANDBOXED=1``); the code then runs with
rlimits, the seccomp filter, a new session and an empty environment only.

:func:`run_candidate_tests` grades a candidate function with a pass/fail signal the candidate
cannot forge: the tests run in one sandbox, the candidate in another; every call of
``candidate(...)`` in the tests is forwarded over a pipe and its result comes back in a strict
tagged format of exact builtin types (``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``; subclasses are refused), so the
tests compare genuine builtins, and the verdict travels on a channel the candidate never sees.

This module is the parent's side (starting sandboxes, enforcing the wall clock and the output
cap, the candidate-test protocol); the limits and results are in
:mod:`~orchestrace.sandbox.policy`, the launcher in
:mod:`~orchestrace.sandbox._launcher` and the value format and what runs inside a
sandbox in :mod:`~orchestrace.sandbox._payload` (both standard-library only).

Example:
    >>> from orchestrace.sandbox import run_candidate_tests
    >>> v = run_candidate_tests(
    ...     "def add(a, b):\n    return a + b\n", "add",
    ...     "def check(candidate):\n    assert candidate(2, 3) == 5\n")  # doctest: +SKIP
    >>> v.passed, v.isolation  # doctest: +SKIP
    (True, 'namespaces/root')
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import marshal
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrace.errors import RuntimeError_
from orchestrace.sandbox import _launcher as _sandbox_launcher
from orchestrace.sandbox import _payload as _sandbox_payload
from orchestrace.sandbox._payload import decode_value, encode_value
from orchestrace.sandbox.policy import (
    ALLOW_ENV,
    MAX_SOURCE,
    Isolation,
    RunResult,
    SandboxPolicy,
    Verdict,
    _binds,
    _hidden,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "ALLOW_ENV",
    "MAX_SOURCE",
    "Isolation",
    "RunResult",
    "Sandbox",
    "SandboxPolicy",
    "Verdict",
    "decode_value",
    "detect",
    "encode_value",
    "run_candidate_tests",
]

_F_SETPIPE_SZ = 1031

#: The modules the launcher runs, in order, in one namespace (standard library only).
_LAUNCHER_FILES = (
    os.path.abspath(_sandbox_payload.__file__),
    os.path.abspath(_sandbox_launcher.__file__),
)
_SELF = _LAUNCHER_FILES[-1]
#: Runs the launcher: its modules, compiled once by the parent and sent ahead of the config.
_BOOT = (
    "import marshal, sys\n"
    "r = sys.stdin.buffer.read\n"
    "g = {'__name__': '__main__', '__file__': sys.argv[1], '__builtins__': __builtins__}\n"
    "for code in marshal.loads(r(int.from_bytes(r(4), 'big'))):\n"
    "    exec(code, g)\n"
)


@functools.cache
def _launcher_code() -> bytes:
    codes = []
    for path in _LAUNCHER_FILES:
        with open(path, encoding="utf-8") as fh:
            codes.append(compile(fh.read(), path, "exec", dont_inherit=True))
    return marshal.dumps(tuple(codes))


def _pipe() -> tuple[int, int]:
    try:
        return os.pipe()
    except OSError as e:
        raise RuntimeError_(
            f"cannot start a sandbox: {e}; close files or raise the open-file limit (ulimit -n)"
        ) from None


def _python() -> str:
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def _allowed_by_env() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def _random_uid() -> int:
    return 0x60000000 + secrets.randbelow(1 << 24)


class _Proc:
    """One launched sandbox, seen from the parent."""

    def __init__(self, popen: Any, out_fd: int, stage: str | None, wipe: bool) -> None:
        self.popen = popen
        self.wipe = wipe
        self.out_fd = out_fd
        self.stage = stage
        self.output = bytearray()
        self.open = True

    def terminate(self) -> None:
        """Ask the launcher to end the sandbox (it kills the sandbox's PID namespace)."""
        if self.popen.poll() is None:
            with contextlib.suppress(OSError):
                self.popen.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """End the sandbox and every process in it; return once they are gone."""
        if self.popen.poll() is None:
            try:
                self.popen.send_signal(signal.SIGTERM)
                self.popen.wait(2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.popen.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
        if self.open:
            os.close(self.out_fd)
            self.open = False
        if self.stage:
            if self.wipe:  # the working directory of an unisolated run
                shutil.rmtree(self.stage, ignore_errors=True)
            else:  # only ever a mount point inside the (now gone) namespace
                with contextlib.suppress(OSError):
                    os.rmdir(self.stage)
            self.stage = None

    def drain(self, cap: int) -> None:
        """Read what is left in the output pipe without blocking (at most ``cap`` kept)."""
        while self.open:
            try:
                chunk = os.read(self.out_fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self.output += chunk[: max(cap - len(self.output), 0)]
            if len(self.output) >= cap:
                return


class Sandbox:
    r"""Launches sandboxes under one :class:`SandboxPolicy`.

    Args:
        policy: The limits (defaults: :class:`SandboxPolicy`).
        isolation: Force an isolation (mostly for tests); default: :func:`detect`.

    Raises:
        RuntimeError_: The machine allows no isolation and the caller did not opt in.

    Example:
        >>> r = Sandbox(SandboxPolicy(wall_s=5)).run("print(6 * 7)")  # doctest: +SKIP
        >>> r.returncode, r.output  # doctest: +SKIP
        (0, b'42\\n')
    """

    def __init__(
        self, policy: SandboxPolicy | None = None, *, isolation: Isolation | None = None
    ) -> None:
        self.policy = policy or SandboxPolicy()
        self.isolation = isolation or detect()
        if not self.isolation.isolated and not (self.policy.allow_unsandboxed or _allowed_by_env()):
            raise RuntimeError_(
                f"refusing to run untrusted code: this machine allows no sandbox "
                f"({self.isolation.reason}); run as root, or enable user namespaces "
                f"(sysctl user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1), "
                f"or set {ALLOW_ENV}=1 to run it without isolation at your own risk"
            )
        self.python = self.isolation.python
        self._binds = _binds(self.python)
        self._hide = _hidden(self._binds, self.policy.hide)

    def _start(self, role: str, cfg: Mapping[str, Any], fds: list[int]) -> _Proc:
        p = self.policy
        mode = self.isolation.mode
        try:
            stage = tempfile.mkdtemp(prefix="orchestrace-sandbox-")
        except OSError as e:
            raise RuntimeError_(
                f"cannot start a sandbox: no temporary directory ({e}); "
                "free space in the temporary directory or set TMPDIR"
            ) from None
        full = {
            **cfg,
            "role": role,
            "mode": mode,
            "fds": fds,
            "stage": stage,
            "workdir": "/tmp" if mode != "none" else stage,
            "binds": self._binds,
            "hide": self._hide,
            "uid": _random_uid(),
            "cpu_s": p.cpu_s,
            "memory_bytes": p.memory_bytes,
            "processes": p.processes,
            "file_bytes": p.file_bytes,
            "tmp_bytes": p.tmp_bytes,
            "open_files": p.open_files,
        }
        code = _launcher_code()
        payload = memoryview(len(code).to_bytes(4, "big") + code + marshal.dumps(full))
        in_r, in_w = _pipe()
        with contextlib.suppress(OSError):  # room for all of it: no wait for the child to read
            fcntl.fcntl(in_w, _F_SETPIPE_SZ, min(max(len(payload), 1 << 16), 1 << 20))
        os.set_blocking(in_w, False)
        with contextlib.suppress(BlockingIOError):
            payload = payload[os.write(in_w, payload) :]
        os.set_blocking(in_w, True)
        out_r, out_w = _pipe()
        try:
            popen = subprocess.Popen(
                [self.python, "-I", "-S", "-B", "-X", "utf8", "-c", _BOOT, _SELF],
                stdin=in_r,
                stdout=out_w,
                stderr=out_w,
                pass_fds=fds,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                start_new_session=True,
            )
        except OSError as e:
            os.close(out_r)
            os.close(in_w)
            os.rmdir(stage)
            raise RuntimeError_(
                f"cannot start the sandbox interpreter {self.python}: {e}"
            ) from None
        finally:
            os.close(out_w)
            os.close(in_r)
        proc = _Proc(popen, out_r, stage, wipe=mode == "none")
        try:
            while payload:
                payload = payload[os.write(in_w, payload) :]
        except OSError:
            pass  # it died early; its output says why
        finally:
            os.close(in_w)
        os.set_blocking(out_r, False)
        return proc

    def _pump(
        self,
        procs: list[_Proc],
        deadline: float,
        done: Callable[[], bool],
        wake: tuple[int, ...] = (),
    ) -> str:
        """Drain outputs (capped) until ``done()`` or the deadline; return why it stopped.

        ``done()`` is asked again whenever one of the ``wake`` fds becomes readable.
        """
        sel = selectors.DefaultSelector()
        for pr in procs:
            sel.register(pr.out_fd, selectors.EVENT_READ, pr)
        for fd in wake:
            sel.register(fd, selectors.EVENT_READ, None)
        try:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                if len(sel.get_map()) == len(wake):
                    if all(pr.popen.poll() is not None for pr in procs):
                        return "exited"
                    time.sleep(min(left, 0.005))
                    continue
                for key, _ in sel.select(min(left, 0.05)):
                    pr = key.data
                    if pr is None:
                        continue
                    try:
                        chunk = os.read(pr.out_fd, 65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(pr.out_fd)
                        continue
                    room = self.policy.output_bytes - len(pr.output)
                    pr.output += chunk[: max(room, 0)]
                    if len(chunk) > room:
                        return "output-limit"
            return "exited"
        finally:
            sel.close()

    def run(self, source: str) -> RunResult:
        """Run ``source`` as a script in a new sandbox.

        Args:
            source: Python source, run as ``__main__`` in ``/tmp`` of the sandbox.

        Returns:
            The exit status, the (capped) output and why it ended.
        """
        t0 = time.monotonic()
        proc = self._start("script", {"source": source}, [])
        try:
            why = self._pump([proc], t0 + self.policy.wall_s, lambda: proc.popen.poll() is not None)
            proc.drain(self.policy.output_bytes)
        finally:
            proc.stop()
        rc = proc.popen.returncode if why == "exited" else None
        return RunResult(rc, bytes(proc.output), why, time.monotonic() - t0, self.isolation.label)

    def check(
        self,
        source: str,
        entry: str,
        tests: str,
        *,
        helpers: str = "",
        call: str = "check(candidate)",
    ) -> Verdict:
        """Run ``tests`` against the function ``entry`` of ``source``; see :func:`run_candidate_tests`."""
        t0 = time.monotonic()
        if len(source) > MAX_SOURCE:
            return Verdict(
                False,
                f"the candidate program has {len(source)} characters, more than {MAX_SOURCE}",
                self.isolation.label,
                0.0,
            )
        req_r, req_w = _pipe()
        res_r, res_w = _pipe()
        ver_r, ver_w = _pipe()
        procs: list[_Proc] = []
        verdict = bytearray()
        try:
            procs.append(
                self._start("candidate", {"source": source, "entry": entry}, [req_r, res_w])
            )
            procs.append(
                self._start(
                    "tests",
                    {"helpers": helpers, "tests": tests, "entry": entry, "call": call},
                    [res_r, req_w, ver_w],
                )
            )
        except BaseException:
            for pr in procs:
                pr.stop()
            os.close(ver_r)
            raise
        finally:
            for fd in (req_r, req_w, res_r, res_w, ver_w):
                os.close(fd)
        os.set_blocking(ver_r, False)
        ended = [False]

        def got_verdict() -> bool:
            while not ended[0]:
                try:
                    chunk = os.read(ver_r, 65536)
                except BlockingIOError:
                    return False
                if not chunk or len(verdict) > 1 << 16:
                    ended[0] = True
                verdict.extend(chunk)
            return True

        try:
            why = self._pump(procs, t0 + self.policy.wall_s, got_verdict, wake=(ver_r,))
        finally:
            for pr in procs:
                pr.terminate()
            for pr in procs:
                pr.drain(self.policy.output_bytes)
                pr.stop()
            os.close(ver_r)
        seconds = time.monotonic() - t0
        label = self.isolation.label
        if why == "timeout":
            return Verdict(False, f"timeout after {self.policy.wall_s:g} s", label, seconds)
        if why == "output-limit":
            who = "candidate" if len(procs[0].output) >= self.policy.output_bytes else "tests"
            return Verdict(
                False,
                f"the {who} wrote more than {self.policy.output_bytes} bytes of output",
                label,
                seconds,
            )
        try:
            data = decode_value(bytes(verdict)[4:])
            return Verdict(
                data["passed"] is True, str(data["reason"]), label, seconds, int(data["calls"])
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            tail = bytes(procs[1].output[-300:]).decode("utf-8", "replace").strip()
            rc = procs[1].popen.returncode
            return Verdict(
                False,
                f"the test process ended without a verdict (exit {rc}): "
                f"{tail.splitlines()[-1] if tail else 'no output'}",
                label,
                seconds,
            )


@dataclass
class _Detected:
    value: Isolation | None = None
    tried: dict[str, str] = field(default_factory=dict)


_DETECTED = _Detected()


def detect(refresh: bool = False) -> Isolation:
    """Find the strongest isolation this machine allows (cached per process).

    Tries ``"root"`` (when running as root) and then ``"userns"`` by starting a sandbox that
    prints a word; the first that works is used.

    Args:
        refresh: Probe again instead of returning the cached answer.

    Returns:
        The isolation; ``mode == "none"`` with the reasons when nothing works.

    Example:
        >>> detect().mode in ("root", "userns", "none")  # doctest: +SKIP
        True
    """
    if _DETECTED.value is not None and not refresh:
        return _DETECTED.value
    python = _python()
    modes = ["root"] if os.geteuid() == 0 else ["userns"]
    reasons: list[str] = []
    if sys.platform != "linux":
        reasons.append(f"namespaces need Linux, this is {sys.platform}")
        modes = []
    for mode in modes:
        iso = Isolation(mode, python)
        try:
            r = Sandbox(SandboxPolicy(wall_s=20.0), isolation=iso).run("print('sandbox-ok')")
        except RuntimeError_ as e:
            reasons.append(f"{mode}: {e}")
            continue
        if r.returncode == 0 and r.output.strip() == b"sandbox-ok":
            _DETECTED.value = iso
            return iso
        text = r.output.decode("utf-8", "replace").strip().splitlines()
        reasons.append(f"{mode}: {text[-1] if text else r.reason}")
    _DETECTED.value = Isolation("none", python, "; ".join(reasons))
    return _DETECTED.value


def run_candidate_tests(
    source: str,
    entry: str,
    tests: str,
    *,
    helpers: str = "",
    call: str = "check(candidate)",
    policy: SandboxPolicy | None = None,
) -> Verdict:
    r"""Grade the function ``entry`` defined by ``source`` with ``tests``, each in a sandbox.

    The tests (``helpers`` then ``tests``, then the expression ``call``) run in one sandbox
    where ``candidate`` (and the name ``entry``) is a proxy; the candidate program runs in
    another. Arguments and results cross as exact builtin values. The check passes only when
    ``call`` returns normally, the candidate was called at least once and every call returned a
    transferable value.

    Args:
        source: The candidate program (defines ``entry``).
        entry: Name of the function under test.
        tests: Test code, e.g. defining ``check(candidate)``.
        helpers: Code the tests need (e.g. helper functions of the problem statement).
        call: Expression that runs the tests.
        policy: Limits (each sandbox gets them; ``wall_s`` bounds the whole check).

    Returns:
        The verdict, with the reason and the isolation used.

    Raises:
        RuntimeError_: No isolation is available and the caller did not opt in.

    Example:
        >>> run_candidate_tests("def f(x):\n    return x\n", "f",
        ...     "def check(c):\n    assert c([1]) == [1]\n").passed  # doctest: +SKIP
        True
    """
    return Sandbox(policy).check(source, entry, tests, helpers=helpers, call=call)
