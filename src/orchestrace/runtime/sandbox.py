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

Example:
    >>> from orchestrace.runtime.sandbox import run_candidate_tests
    >>> v = run_candidate_tests(
    ...     "def add(a, b):\n    return a + b\n", "add",
    ...     "def check(candidate):\n    assert candidate(2, 3) == 5\n")  # doctest: +SKIP
    >>> v.passed, v.isolation  # doctest: +SKIP
    (True, 'namespaces/root')
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time

TYPE_CHECKING = False  # the launcher imports as little as it can: it starts every sandbox
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

if __name__ != "__main__":  # the launcher runs this file with the standard library only
    from orchestrace.errors import RuntimeError_

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

#: Environment variable that allows running untrusted code without isolation (``1``).
ALLOW_ENV = "ORCHESTRACE_ALLOW_UNSANDBOXED"
#: Longest candidate program :meth:`Sandbox.check` accepts (characters).
MAX_SOURCE = 1 << 22

# -- the value format shared by both sides ------------------------------------------------------

_MAX_DEPTH = 100
_MAX_FRAME = 16 << 20
_MAX_INT_BYTES = 1 << 16
_SEQ: dict[type, bytes] = {list: b"L", tuple: b"U", set: b"E", frozenset: b"Z"}
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")


class _Unsupported(TypeError):
    """A value outside the exact builtin types the sandbox protocol carries."""


def encode_value(value: Any) -> bytes:
    r"""Encode ``value`` (exact builtin types only) as bytes.

    Args:
        value: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, or a ``list``,
            ``tuple``, ``dict``, ``set`` or ``frozenset`` of such values, nested at most 100
            deep. Subclasses of these types are refused.

    Returns:
        The encoding that :func:`decode_value` turns back into an equal value.

    Raises:
        TypeError: A value of another type (or of a subclass of a builtin), or nested too deep.

    Example:
        >>> encode_value([1, None])
        b'L\x00\x00\x00\x02I\x00\x00\x00\x01\x01N'
        >>> decode_value(encode_value({"a": {1, 2}, "b": (float("inf"), b"x")}))
        {'a': {1, 2}, 'b': (inf, b'x')}
    """
    out = bytearray()
    _enc(value, out, 0)
    return bytes(out)


def _enc(value: Any, out: bytearray, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _Unsupported("value nested too deep")
    t = type(value)
    if value is None:
        out += b"N"
    elif t is bool:
        out += b"T" if value else b"F"
    elif t is int:
        raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
        if len(raw) > _MAX_INT_BYTES:
            raise _Unsupported("integer too large")
        out += b"I" + _U32.pack(len(raw)) + raw
    elif t is float:
        out += b"D" + _F64.pack(value)
    elif t is str or t is bytes:
        raw = value.encode("utf-8", "surrogatepass") if t is str else value
        out += (b"S" if t is str else b"Y") + _U32.pack(len(raw)) + raw
    elif t in _SEQ:
        out += _SEQ[t] + _U32.pack(len(value))
        for v in value:
            _enc(v, out, depth + 1)
    elif t is dict:
        out += b"M" + _U32.pack(len(value))
        for k, v in value.items():
            _enc(k, out, depth + 1)
            _enc(v, out, depth + 1)
    else:
        raise _Unsupported(f"type {t.__module__}.{t.__qualname__} cannot be transferred")


def decode_value(data: bytes) -> Any:
    r"""Decode what :func:`encode_value` produced into genuine builtin objects.

    Args:
        data: The encoding, exactly (no trailing bytes).

    Returns:
        The value, built only from exact builtin types.

    Raises:
        ValueError: ``data`` is not a well-formed encoding.

    Example:
        >>> decode_value(b"U\x00\x00\x00\x02I\x00\x00\x00\x02\xff\x01N")
        (-255, None)
    """
    try:
        value, end = _dec(memoryview(data), 0, 0)
    except (IndexError, struct.error, UnicodeDecodeError, TypeError, RecursionError) as e:
        raise ValueError(f"malformed value: {e}") from None
    if end != len(data):
        raise ValueError("malformed value: trailing bytes")
    return value


def _dec(buf: memoryview, i: int, depth: int) -> tuple[Any, int]:
    if depth > _MAX_DEPTH:
        raise ValueError("malformed value: nested too deep")
    tag = bytes(buf[i : i + 1])
    i += 1
    if tag == b"N":
        return None, i
    if tag in (b"T", b"F"):
        return tag == b"T", i
    if tag == b"D":
        return _F64.unpack_from(buf, i)[0], i + 8
    (n,) = _U32.unpack_from(buf, i)
    i += 4
    if tag in (b"I", b"S", b"Y"):
        if i + n > len(buf) or (tag == b"I" and not 0 < n <= _MAX_INT_BYTES):
            raise ValueError("malformed value: bad length")
        raw = bytes(buf[i : i + n])
        if tag == b"I":
            return int.from_bytes(raw, "big", signed=True), i + n
        return (raw.decode("utf-8", "surrogatepass") if tag == b"S" else raw), i + n
    if n > len(buf) - i:  # every item takes at least one byte
        raise ValueError("malformed value: bad length")
    if tag == b"M":
        out: dict[Any, Any] = {}
        for _ in range(n):
            k, i = _dec(buf, i, depth + 1)
            v, i = _dec(buf, i, depth + 1)
            out[k] = v
        return out, i
    items = []
    for _ in range(n):
        v, i = _dec(buf, i, depth + 1)
        items.append(v)
    if tag == b"L":
        return items, i
    if tag == b"U":
        return tuple(items), i
    if tag == b"E":
        return set(items), i
    if tag == b"Z":
        return frozenset(items), i
    raise ValueError(f"malformed value: unknown tag {tag!r}")


def _write_frame(fd: int, payload: bytes) -> None:
    data = struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > _MAX_FRAME:
        raise ValueError(f"message of {n} bytes exceeds {_MAX_FRAME}")
    return _read_exact(fd, n)


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # a hostile __str__
        text = "exception"
    return text[:300]


# -- the payloads (run inside a sandbox) --------------------------------------------------------


def _serve_candidate(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    """Load the candidate program and answer calls on fds 3 (requests) and 4 (results)."""
    import builtins

    entry = str(cfg["entry"])
    g: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    fn: Any = None
    load_error = ""
    try:
        exec(compile(str(cfg["source"]), "candidate.py", "exec"), g)
        fn = g.get(entry)
        if not callable(fn):
            load_error = f"the program defines no function {entry!r}"
    except BaseException as e:
        load_error = f"loading failed: {_describe(e)}"
    while True:
        msg = _read_frame(3)
        if msg is None:
            return 0
        try:
            if load_error:
                raise RuntimeError(load_error)
            args, kwargs = decode_value(msg)
            result = fn(*args, **kwargs)
            data = b"o" + encode_value(result)
        except _Unsupported as e:
            data = b"b" + f"result not transferable: {e}".encode()
        except BaseException as e:
            data = b"e" + _describe(e).encode("utf-8", "replace")
        if len(data) > _MAX_FRAME:
            data = b"b" + f"result of {len(data)} bytes exceeds {_MAX_FRAME}".encode()
        _write_frame(4, data)


class CandidateError(Exception):
    """Raised in the tests where a forwarded call of the candidate failed."""


def _run_tests(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    """Run the tests; ``candidate`` forwards to fds 4 (requests) and 3 (results); verdict on 5."""
    import builtins

    state: dict[str, Any] = {"calls": 0, "broken": ""}

    def candidate(*args: Any, **kwargs: Any) -> Any:
        state["calls"] += 1
        if state["broken"]:
            raise CandidateError(state["broken"])
        try:
            req = encode_value((args, kwargs))
        except _Unsupported as e:
            state["broken"] = f"the tests pass a value the sandbox cannot transfer ({e})"
            raise CandidateError(state["broken"]) from None
        try:
            _write_frame(4, req)
            resp = _read_frame(3)
        except (OSError, ValueError) as e:
            resp, state["broken"] = None, f"candidate channel failed: {_describe(e)}"
        if resp is None:
            state["broken"] = state["broken"] or "the candidate process ended"
            raise CandidateError(state["broken"])
        kind, body = resp[:1], resp[1:]
        if kind == b"o":
            try:
                return decode_value(body)
            except ValueError as e:
                state["broken"] = f"malformed answer from the candidate ({_describe(e)[:100]})"
                raise CandidateError(state["broken"]) from None
        text = body[:300].decode("utf-8", "replace")
        if kind == b"e":
            raise CandidateError(f"the candidate raised {text}")
        state["broken"] = text if kind == b"b" else "malformed answer from the candidate"
        raise CandidateError(state["broken"])

    entry = str(cfg["entry"])
    candidate.__name__ = candidate.__qualname__ = entry
    g: dict[str, Any] = {"__name__": "__tests__", "__builtins__": builtins}
    passed, reason = False, ""
    try:
        exec(compile(str(cfg["helpers"]), "helpers.py", "exec"), g)
        g[entry] = candidate
        g["candidate"] = candidate
        exec(compile(str(cfg["tests"]), "tests.py", "exec"), g)
        eval(compile(str(cfg["call"]), "call", "eval"), g)
        if state["broken"]:
            reason = str(state["broken"])
        elif not state["calls"]:
            reason = "the tests never called the candidate"
        else:
            passed, reason = True, "all tests passed"
    except BaseException as e:
        reason = state["broken"] or _where(e)
    verdict = {"passed": passed, "reason": reason[:500], "calls": state["calls"]}
    _write_frame(5, encode_value(verdict))
    return 0


def _where(exc: BaseException) -> str:  # pragma: no cover - runs in the sandbox
    tb = exc.__traceback__
    line = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "tests.py":
            line = f" at tests.py line {tb.tb_lineno}"
        tb = tb.tb_next
    if isinstance(exc, CandidateError):
        return f"{exc}{line}"[:500]
    if isinstance(exc, AssertionError):
        return f"assertion failed{line}"
    return f"tests raised {_describe(exc)}{line}"


def _run_script(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    import builtins

    g: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(str(cfg["source"]), "script.py", "exec"), g)
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0


_ROLES: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "script": _run_script,
    "candidate": _serve_candidate,
    "tests": _run_tests,
}

# -- the launcher (this module compiled by the parent, run by ``python -I -S -c _BOOT``) -------

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 271, "s390x": 280}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_INNER_ID = 65534  # the sandbox's uid/gid inside its user namespace
_DEVICES = ("null", "zero", "full", "random", "urandom")
#: Exit status of the launcher when it could not set the sandbox up.
_SETUP_FAILED = 125


class _SetupError(Exception):
    pass


def _libc() -> Any:  # pragma: no cover - runs in the launcher
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    return libc


def _ok(rc: int, what: str) -> None:  # pragma: no cover - runs in the launcher
    if rc != 0:
        import ctypes

        err = ctypes.get_errno()
        raise _SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(
    libc: Any, src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None
) -> None:  # pragma: no cover - runs in the launcher
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _ok(libc.mount(enc(src), dst.encode(), enc(fstype), flags, enc(data)), f"mount {dst}")


def _locked_flags(path: str) -> int:  # pragma: no cover - runs in the launcher
    """Mount flags of ``path`` that a remount inside a user namespace must keep."""
    f = os.statvfs(path).f_flag
    out = 0
    for st, ms in (
        (2, _MS_NOSUID),
        (4, _MS_NODEV),
        (8, _MS_NOEXEC),
        (1024, _MS_NOATIME),
        (2048, _MS_NODIRATIME),
        (4096, _MS_RELATIME),
    ):
        if f & st:
            out |= ms
    return out


def _build_root(libc: Any, cfg: Mapping[str, Any]) -> None:  # pragma: no cover
    """Mount the private root on ``cfg['stage']`` and pivot into it."""
    new = str(cfg["stage"])
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount(libc, "tmpfs", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    for src in cfg["binds"]:
        dst = new + src
        if os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(os.readlink(src), dst)
            continue
        os.makedirs(dst, exist_ok=True)
        try:
            _mount(libc, src, dst, None, _MS_BIND)
        except _SetupError:  # a tree with locked submounts binds only recursively
            _mount(libc, src, dst, None, _MS_BIND | _MS_REC)
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _locked_flags(dst)
        _mount(libc, None, dst, None, flags)
    for hidden in cfg["hide"]:
        dst = new + hidden
        if os.path.isdir(dst):
            _mount(
                libc,
                "tmpfs",
                dst,
                "tmpfs",
                _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                "size=4k,mode=555",
            )
    os.mkdir(new + "/dev")
    for name in _DEVICES:
        dst = f"{new}/dev/{name}"
        with open(dst, "wb"):
            pass
        _mount(libc, f"/dev/{name}", dst, None, _MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{new}/dev/{name}")
    os.mkdir(new + "/proc")
    try:  # noqa: SIM105 - without it, no /proc at all inside: stricter still
        _mount(libc, "proc", new + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    except _SetupError:
        pass
    os.mkdir(new + "/tmp")
    uid = int(cfg["uid"])
    _mount(
        libc,
        "tmpfs",
        new + "/tmp",
        "tmpfs",
        _MS_NOSUID | _MS_NODEV,
        f"size={int(cfg['tmp_bytes'])},nr_inodes=4096,mode=700,uid={uid},gid={uid}",
    )
    _mount(libc, None, new, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    machine = os.uname().machine
    nr = _SYS_PIVOT_ROOT.get(machine)
    if nr is None:
        raise _SetupError(f"pivot_root: unknown syscall number on {machine}")
    os.chdir(new)
    _ok(libc.syscall(nr, b".", b"."), "pivot_root")
    _ok(libc.umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/")


def _drop_privileges(libc: Any, cfg: Mapping[str, Any]) -> None:  # pragma: no cover
    import ctypes

    if os.geteuid() == 0 or cfg["mode"] == "root":
        uid = int(cfg["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # a user namespace of its own, only to forbid nested namespaces below
        libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        if libc.unshare(_CLONE_NEWUSER) == 0:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{uid} {uid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
    for kind in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"):
        try:  # no namespaces inside the sandbox (less kernel surface; no way around the root)
            with open(f"/proc/sys/user/max_{kind}_namespaces", "w") as fh:
                fh.write("0")
        except OSError:
            pass
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    head, data = Header(0x20080522, 0), (Data * 2)()
    _ok(libc.capset(ctypes.byref(head), data), "capset")
    _ok(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _ok(libc.capget(ctypes.byref(head), data), "capget")
    if any(d.effective or d.permitted or d.inheritable for d in data) or os.geteuid() == 0:
        raise _SetupError("capabilities could not be dropped")


def _limits(cfg: Mapping[str, Any]) -> None:  # pragma: no cover - runs in the launcher
    import resource

    cpu = max(1, int(float(cfg["cpu_s"]) + 0.999))
    for res, soft, hard in (
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, int(cfg["memory_bytes"]), int(cfg["memory_bytes"])),
        (resource.RLIMIT_NPROC, int(cfg["processes"]), int(cfg["processes"])),
        (resource.RLIMIT_FSIZE, int(cfg["file_bytes"]), int(cfg["file_bytes"])),
        (resource.RLIMIT_NOFILE, int(cfg["open_files"]), int(cfg["open_files"])),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(res, (soft, hard))


def _place_fds(fds: list[int]) -> None:  # pragma: no cover - runs in the launcher
    """Put the role's pipes on fds 3, 4, ... and close every other fd above 2."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 200) for fd in fds]
    for i, fd in enumerate(high):
        os.dup2(fd, 3 + i)
    os.closerange(3 + len(high), 1 << 16)


def _payload(cfg: Mapping[str, Any], libc: Any) -> int:  # pragma: no cover - runs in the sandbox
    try:  # noqa: SIM105 - already a session leader when not namespaced
        os.setsid()
    except OSError:
        pass
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    _place_fds([int(x) for x in cfg["fds"]])
    _limits(cfg)
    if libc is not None:
        _drop_privileges(libc, cfg)
    _seccomp()
    os.environ.clear()
    home = str(cfg["workdir"])
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home})
    os.chdir(str(cfg["workdir"]))
    return _ROLES[str(cfg["role"])](cfg)


#: System calls refused inside the sandbox (EPERM): debugging other processes, keys, kernel
#: modules, eBPF, perf, io_uring, userfaultfd, mounts and namespaces, swap, reboot, file handles.
_DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf",
    "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "swapon", "swapoff", "reboot",
    "acct", "name_to_handle_at", "open_by_handle_at",
)  # fmt: skip
#: Their numbers, and the audit architecture, per machine.
_SECCOMP = {
    "x86_64": (0xC000003E, (
        101, 310, 311, 250, 248, 249, 175, 313, 176, 246, 320, 321, 298, 323, 425, 426, 427,
        165, 166, 155, 161, 272, 308, 428, 429, 430, 431, 432, 433, 442, 167, 168, 169, 163,
        303, 304,
    )),
    "aarch64": (0xC00000B7, (
        117, 270, 271, 219, 217, 218, 105, 273, 106, 104, 294, 280, 241, 282, 425, 426, 427,
        40, 39, 41, 51, 97, 268, 428, 429, 430, 431, 432, 433, 442, 224, 225, 142, 89,
        264, 265,
    )),
}  # fmt: skip


def _seccomp() -> bool:  # pragma: no cover - runs in the sandbox
    """Install a filter refusing :data:`_DENIED` (where the numbers are known); True if done."""
    import ctypes

    known = _SECCOMP.get(os.uname().machine)
    if known is None:
        return False
    arch, numbers = known
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    kill, allow, eperm = 0x80000000, 0x7FFF0000, 0x00050000 | 1
    prog: list[tuple[int, int, int, int]] = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, arch),
        (ret, 0, 0, kill),  # another ABI: refuse outright
        (ld, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == 0xC000003E:  # the x32 ABI shares the architecture: refuse its numbers
        prog.append((jge, len(numbers) + 1, 0, 0x40000000))
    first = len(prog)
    deny_at = first + len(numbers) + 1
    for i, nr in enumerate(numbers):
        prog.append((jeq, deny_at - (first + i) - 1, 0, nr))
    prog += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]

    class Filter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(prog))(*[Filter(*x) for x in prog])
    program = Program(len(prog), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if libc.prctl(22, 2, ctypes.byref(program), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise _SetupError(f"seccomp: {os.strerror(ctypes.get_errno())}")
    return True


def _new_session_keyring() -> None:  # pragma: no cover - runs in the launcher
    """Leave the parent's session keyring (its keys would be readable) for an empty one."""
    import ctypes

    nr = _SYS_KEYCTL.get(os.uname().machine)
    if nr is not None:  # where keyctl is unavailable there are no keys to take either
        ctypes.CDLL(None).syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None)


def _world_readable(path: str) -> bool:  # pragma: no cover - runs in the launcher
    """Whether every directory down to ``path`` lets any user in (so a dropped uid can import)."""
    import stat

    while True:
        mode = os.stat(path).st_mode
        if not (mode & stat.S_IXOTH and mode & stat.S_IROTH):
            return False
        if path in ("/", ""):
            return True
        path = os.path.dirname(path)


def _launch() -> None:  # pragma: no cover - the launcher's entry point
    """Read the config on stdin, set the sandbox up, run the role, exit with its status."""
    import marshal

    cfg = marshal.loads(sys.stdin.buffer.read())  # from the parent, after this code: plain data
    os.umask(0o022)
    _new_session_keyring()
    mode = str(cfg["mode"])
    if mode == "none":
        try:
            if os.geteuid() == 0 and _world_readable(os.path.dirname(os.__file__)):
                uid = int(cfg["uid"])
                os.chown(str(cfg["workdir"]), uid, uid)
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            code = _payload(cfg, None)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    try:
        libc = _libc()
        flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
        if mode == "userns":
            if os.geteuid() == 0:  # never map the sandbox onto the real root
                raise _SetupError("user-namespace mode is for unprivileged users; use root mode")
            euid, egid = os.geteuid(), os.getegid()
            _ok(libc.unshare(flags | _CLONE_NEWUSER), "unshare")
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{_INNER_ID} {euid} 1"),
                ("gid_map", f"{_INNER_ID} {egid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
            cfg = {**cfg, "uid": _INNER_ID}
        else:
            _ok(libc.unshare(flags), "unshare")
    except (_SetupError, OSError) as e:
        print(f"sandbox setup failed: {e}", file=sys.stderr, flush=True)
        os._exit(_SETUP_FAILED)
    life_r, life_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(life_r)

        def stop(signum: int, frame: Any) -> None:
            os.kill(pid, signal.SIGKILL)

        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, stop)
        for fd in cfg["fds"]:
            os.close(int(fd))
        _, status = os.waitpid(pid, 0)  # returns once every process of the namespace is gone
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    # pid 1 of the new PID namespace: set up the root, run the role in a child, reap
    os.close(life_w)
    try:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.set_blocking(life_r, False)
        try:
            if os.read(life_r, 1) == b"":
                os._exit(_SETUP_FAILED)  # the launcher is already gone
        except BlockingIOError:
            pass
        os.close(life_r)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        libc.sethostname(b"sandbox", 7)
        _build_root(libc, cfg)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (_SetupError, OSError) as e:
        print(f"sandbox setup failed: {e}", file=sys.stderr, flush=True)
        os._exit(_SETUP_FAILED)
    child = os.fork()
    if child:
        for fd in cfg["fds"]:
            os.close(int(fd))
    else:
        try:
            code = _payload(cfg, libc)
        except _SetupError as e:
            print(f"sandbox setup failed: {e}", file=sys.stderr, flush=True)
            code = _SETUP_FAILED
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:
            print(f"sandbox payload failed: {_describe(e)}", file=sys.stderr, flush=True)
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    code = 1
    while True:
        try:
            p, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if p == child:
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
            break
    os._exit(code)  # pid 1 exits: the kernel kills whatever is left in the namespace


if __name__ == "__main__":  # pragma: no cover - the launcher stops here (it never returns)
    _launch()

import contextlib  # noqa: E402 - the parent side only
import fcntl  # noqa: E402
import functools  # noqa: E402

_F_SETPIPE_SZ = 1031
from dataclasses import asdict, dataclass, field  # noqa: E402

# -- the parent side ----------------------------------------------------------------------------


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


_SELF = os.path.abspath(__file__)
#: Runs the launcher: this module, compiled once by the parent and sent ahead of the config.
_BOOT = (
    "import marshal, sys\n"
    "n = int.from_bytes(sys.stdin.buffer.read(4), 'big')\n"
    "code = marshal.loads(sys.stdin.buffer.read(n))\n"
    "exec(code, {'__name__': '__main__', '__file__': sys.argv[1], '__builtins__': __builtins__})\n"
)


@functools.cache
def _launcher_code() -> bytes:
    import marshal

    with open(_SELF, encoding="utf-8") as fh:
        return marshal.dumps(compile(fh.read(), _SELF, "exec", dont_inherit=True))


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


def _binds(python: str) -> list[str]:
    """Directories the interpreter needs, bound read-only (outermost only)."""
    import sysconfig

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
    import site
    import sysconfig

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


def _allowed_by_env() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def _random_uid() -> int:
    import secrets

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
        import subprocess

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
                import shutil

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
        import marshal
        import subprocess
        import tempfile

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
        import selectors

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
