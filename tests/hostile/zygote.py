"""Start ``orchestrace`` child processes by forking a process that has already imported it.

Starting the installed command costs a new interpreter and the import of ``orchestrace.cli``
(about 0.3 s of CPU) before it reads a byte. The zygote is one long-lived child that imports
the command line once; each run is a fresh process forked from it, with its own session, its
own standard input and output (passed over a Unix socket), the resource limits and working
directory of the run, and ``orchestrace.cli.main()`` reading ``sys.argv`` as the console script
does (so the large-input restart still happens). The run's exit status is the forked
process's own, reported by the zygote after it waits for it.

Run as a script, this module is the zygote: ``python zygote.py FD`` serves requests on the
socket ``FD``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: Modules the zygote imports before it forks: the commands that read traces, and the
#: readers they load (Parquet, the reward families).
PRELOAD = (
    "orchestrace.cli.validate",
    "orchestrace.cli.analyze",
    "orchestrace.cli.reward",
    "orchestrace.cli.convert",
    "orchestrace.cli.replay",
    "orchestrace.cli.credit",
    "orchestrace.cli.export",
    "orchestrace.cli.generate",
    "orchestrace.rewards",
    "orchestrace.credit",
    "pyarrow.parquet",
)
#: The descriptor number a run's extra pipe gets (``/dev/fd/N`` in its arguments).
PIPE_FD = 9
_MAX_FDS = 3


def _send(sock: socket.socket, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(msg).encode()
    head = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [head + data], list(fds))
    else:
        sock.sendall(head + data)


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    # a stream socket: read the 4-byte length, then exactly that many bytes, never into the
    # next message (the zygote may have sent two by now: a run's pid, then its status)
    head, fds, _flags, _addr = socket.recv_fds(sock, 4, _MAX_FDS)
    while head and len(head) < 4:
        more = sock.recv(4 - len(head))
        if not more:
            return None, fds
        head += more
    if not head:
        return None, fds
    (n,) = struct.unpack("!I", head)
    body = b""
    while len(body) < n:
        more = sock.recv(n - len(body))
        if not more:
            return None, fds
        body += more
    return json.loads(body), fds


# ------------------------------------------------------------------ the zygote (child side)
def _child(req: dict[str, Any], fds: list[int], sock: socket.socket) -> None:
    """In the forked process: become the run, then exit with the command's status."""
    try:
        sock.close()
        os.setsid()
        stdin, out = fds[0], fds[1]
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        if len(fds) > 2:
            os.dup2(fds[2], PIPE_FD)
            os.set_inheritable(PIPE_FD, True)
        for fd in fds:
            if fd not in (0, 1, 2, PIPE_FD):
                os.close(fd)
        mem = int(req["memory"])
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if req.get("fsize") is not None:
            size = int(req["fsize"])
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        os.chdir(req["cwd"])
        # standard streams of a new process on these descriptors
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(  # noqa: SIM115
            2, "w", encoding="utf-8", errors="backslashreplace", closefd=False
        )
        sys.argv = ["orchestrace", *req["argv"]]
    except BaseException:  # the run could not be set up: say so, exit 125
        with contextlib.suppress(Exception):
            import traceback

            os.write(2, traceback.format_exc().encode())
        os._exit(125)
    code = 0
    try:
        from orchestrace.cli import main

        code = main()
    except SystemExit as exc:  # as the interpreter maps it
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # as the interpreter reports it
        import traceback

        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)


def serve(fd: int) -> None:
    """Serve run requests on the socket ``fd`` until it closes."""
    import importlib

    import orchestrace.cli  # noqa: F401  imported once, here, for every run

    # what the file-reading commands import when they run (a fresh process would import the
    # same modules itself; only their import cost is saved)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    sock = socket.socket(fileno=fd)
    while True:
        req, fds = _recv(sock)
        if req is None:
            return
        pid = os.fork()
        if pid == 0:
            _child(req, fds, sock)
        for f in fds:
            os.close(f)
        _send(sock, {"pid": pid})
        _pid, status = os.waitpid(pid, 0)
        _send(sock, {"status": status})


# ------------------------------------------------------------------ the parent side
class Zygote:
    """A running zygote (see the module docstring); one run at a time."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env=self.env,
        )
        theirs.close()
        self.lock = threading.Lock()

    def alive(self) -> bool:
        """Whether the zygote still serves."""
        return self.proc.poll() is None

    def close(self) -> None:
        """Stop the zygote."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def run(
        self,
        argv: Sequence[str],
        timeout: float,
        cwd: os.PathLike[str] | str,
        *,
        memory: int,
        feed: str | None = None,
        data: bytes = b"",
        fsize: int | None = None,
    ) -> tuple[int | None, str, bool]:
        """Run ``orchestrace ARGV`` in a forked process; return ``(rc, output, hung)``.

        ``feed``: ``"stdin"`` sends ``data`` to its standard input; ``"fd"`` to a pipe it reads
        as ``/dev/fd/9`` (put in place of ``/dev/stdin`` in ``argv``).
        """
        with self.lock:
            return self._run(argv, timeout, cwd, memory, feed, data, fsize)

    def _run(
        self,
        argv: Sequence[str],
        timeout: float,
        cwd: os.PathLike[str] | str,
        memory: int,
        feed: str | None,
        data: bytes,
        fsize: int | None,
    ) -> tuple[int | None, str, bool]:
        t0 = time.monotonic()
        args = list(argv)
        out_r, out_w = os.pipe()
        mine: list[int] = [out_w]
        writer_fd = -1
        if feed == "stdin":
            in_r, writer_fd = os.pipe()
            mine.append(in_r)
        else:
            in_r = os.open(os.devnull, os.O_RDONLY)
            mine.append(in_r)
        fds = [in_r, out_w]
        if feed == "fd":
            pipe_r, writer_fd = os.pipe()
            mine.append(pipe_r)
            fds.append(pipe_r)
            args = [f"/dev/fd/{PIPE_FD}" if a == "/dev/stdin" else a for a in args]
        req = {"argv": args, "cwd": str(cwd), "memory": memory, "fsize": fsize}
        try:
            _send(self.sock, req, fds)
        finally:
            for f in mine:
                os.close(f)
        writer = None
        if writer_fd >= 0:
            writer = threading.Thread(target=_feed, args=(writer_fd, data), daemon=True)
            writer.start()
        reply, _ = _recv(self.sock)
        if reply is None:
            os.close(out_r)
            raise RuntimeError("the zygote stopped")
        pid = int(reply["pid"])
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(out_r, chunks), daemon=True)
        reader.start()
        hung = False
        reader.join(max(0.1, timeout - (time.monotonic() - t0)))
        if reader.is_alive():
            hung = True
        status_reply: dict[str, Any] | None = None
        self.sock.settimeout(max(0.1, timeout - (time.monotonic() - t0)))
        try:
            if not hung:
                status_reply, _ = _recv(self.sock)
        except TimeoutError:
            hung = True
        finally:
            self.sock.settimeout(None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # nothing it started may outlive it
        if hung:
            status_reply, _ = _recv(self.sock)
        reader.join(10)
        if writer is not None:
            writer.join(1)
        status = int((status_reply or {}).get("status", 0))
        rc = os.waitstatus_to_exitcode(status)
        return (None if hung else rc), b"".join(chunks).decode("utf-8", "backslashreplace"), hung


def _drain(fd: int, chunks: list[bytes]) -> None:
    with open(fd, "rb") as fh:
        while block := fh.read(1 << 16):
            chunks.append(block)


def _feed(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError), open(fd, "wb") as fh:
        fh.write(data)


_ZYGOTES: dict[tuple[tuple[str, str], ...], Zygote] = {}


def zygote(env: Mapping[str, str]) -> Zygote:
    """This thread's zygote for ``env`` (started on first use, stopped at exit).

    ``PYTEST_CURRENT_TEST`` (pytest changes it for every test) is left out.
    """
    env = {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}
    key = (("", str(threading.get_ident())), *sorted(env.items()))
    z = _ZYGOTES.get(key)
    if z is None or not z.alive():
        z = _ZYGOTES[key] = Zygote(env)
        atexit.register(z.close)
    return z


if __name__ == "__main__":
    serve(int(sys.argv[1]))
