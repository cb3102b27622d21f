"""The sandbox launcher: namespaces, a private root, no privileges, seccomp and rlimits.

The parent (:class:`orchestrace.sandbox.Sandbox`) compiles this module and
:mod:`orchestrace.sandbox._payload`, starts the base interpreter (``python -I -S``)
and sends both ahead of the sandbox's configuration; the launcher runs them in one namespace
with ``__name__ == "__main__"`` and calls :func:`_launch`, which sets the sandbox up and runs
the payload's role in it. It therefore uses the standard library only.

The module is one concern, the setup of an isolated process in the order the kernel demands
(namespaces, mounts and ``pivot_root``, then privileges, rlimits and the seccomp filter), and
stays in one file so that order can be read top to bottom; it is about 450 lines.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # the launcher imports as little as it can: it starts every sandbox
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

if __name__ != "__main__":  # in the launcher the payload is already in this namespace
    from orchestrace.sandbox._payload import _ROLES, _describe


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
    import ctypes  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
        import ctypes  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
    import ctypes  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
    import resource  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
    import fcntl  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
    import ctypes  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
    import ctypes  # noqa: PLC0415  the sandbox launcher imports only what this path needs

    nr = _SYS_KEYCTL.get(os.uname().machine)
    if nr is not None:  # where keyctl is unavailable there are no keys to take either
        ctypes.CDLL(None).syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None)


def _world_readable(path: str) -> bool:  # pragma: no cover - runs in the launcher
    """Whether every directory down to ``path`` lets any user in (so a dropped uid can import)."""
    import stat  # noqa: PLC0415  the sandbox launcher imports only what this path needs

    while True:
        mode = os.stat(path).st_mode
        if not (mode & stat.S_IXOTH and mode & stat.S_IROTH):
            return False
        if path in ("/", ""):
            return True
        path = os.path.dirname(path)


def _launch() -> None:  # pragma: no cover - the launcher's entry point
    """Read the config on stdin, set the sandbox up, run the role, exit with its status."""
    import marshal  # noqa: PLC0415  the sandbox launcher imports only what this path needs

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
