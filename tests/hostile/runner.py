"""Run hostile inputs through every file-reading command and judge each outcome.

A run passes when the command

* ends within the time limit (no hang),
* exits 0, 1 or 2 and never 3 ("unexpected ... this is a bug"), prints no traceback,
* exits 0 only for an input it should accept (see :class:`hostile.corpus.Case`),
* leaves every output either complete (it loads back) or absent, and nothing else behind,
* leaves the input and the files next to it untouched,
* never starts a process (reading a trace must not execute anything in it), and code planted
  in a trace never leaves its marker file,
* prints no raw terminal control characters and no unbounded text.

Runs happen in this process (``orchestrace.cli.main`` with captured output and a ``SIGALRM``
time limit) or in a child process under a time limit and a memory limit; special paths (FIFOs,
``/dev/zero``, pipes) always run in a child. A child is forked from a process that has imported
the command line (``hostile/zygote.py``), or, for runs without read or write permissions and
with ``ORCHESTRACE_HOSTILE_EXEC=1``, is the installed ``orchestrace`` command itself.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import io
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostile.corpus import MARKER, Case, OutputCase, Seeds

__all__ = [
    "COMMANDS",
    "Command",
    "Result",
    "run_case",
    "summarize",
]

#: Largest output (stdout + stderr) a command may print for these small inputs.
MAX_OUTPUT = 64 * 1024
#: Idle seconds after which the commands give up on a silent pipe or FIFO (in child runs).
PIPE_IDLE_S = 1
#: Seconds the commands wait for a writer to open a FIFO (in child runs; the default is 3 s,
#: which ``test_fifo_without_writer_is_refused_within_the_default_wait`` keeps in check).
FIFO_WRITER_S = 0.3
#: Memory limit of a child process (bytes of address space).
CHILD_MEMORY = 4 << 30
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
_WARNED = re.compile(r"warning|truncated|partial|incomplete|cut off", re.IGNORECASE)


@dataclass(frozen=True)
class Command:
    """One command line; ``{in}`` is the input, ``{out}`` the (empty) output directory.

    Attributes:
        name: Label used in reports.
        argv: Arguments after ``orchestrace``.
        output: Kind of file written (``json``, ``jsonl``, ``parquet``, ``upstream``,
            ``replay``, ``trl``), or ``None``.
        out_name: Its file name inside the output directory.
    """

    name: str
    argv: tuple[str, ...]
    output: str | None = None
    out_name: str | None = None

    @property
    def reader(self) -> str:
        """The command word (``validate``, ``convert`` ...)."""
        return self.argv[0]


COMMANDS: tuple[Command, ...] = (
    Command("validate", ("validate", "{in}")),
    Command("validate --partial", ("validate", "--partial", "{in}")),
    Command("validate --keep-going", ("validate", "--keep-going", "{in}")),
    Command("analyze", ("analyze", "{in}")),
    Command("analyze --json", ("analyze", "--json", "{in}")),
    Command("convert -o .json", ("convert", "{in}", "-o", "{out}/out.json"), "json", "out.json"),
    Command(
        "convert -o .jsonl", ("convert", "{in}", "-o", "{out}/out.jsonl"), "jsonl", "out.jsonl"
    ),
    Command(
        "convert -o .parquet",
        ("convert", "{in}", "-o", "{out}/out.parquet"),
        "parquet",
        "out.parquet",
    ),
    Command(
        "convert --to upstream",
        ("convert", "{in}", "--to", "upstream", "-o", "{out}/up.json"),
        "upstream",
        "up.json",
    ),
    Command("replay", ("replay", "{in}", "-o", "{out}/replay.json"), "replay", "replay.json"),
    Command("credit --method uniform", ("credit", "--method", "uniform", "{in}")),
    Command("reward", ("reward", "{in}")),
    Command("reward --json", ("reward", "--json", "{in}")),
    Command(
        "export --to trl",
        ("export", "--to", "trl", "{in}", "-o", "{out}/trl.jsonl"),
        "trl",
        "trl.jsonl",
    ),
)


@dataclass
class Result:
    """What one command did with one input, and what was wrong with it."""

    case: str
    command: str
    rc: int | None
    output: str
    seconds: float
    hung: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        """The first non-empty output line, shortened and escaped for a report."""
        for line in self.output.splitlines():
            if line.strip():
                text = line.encode("unicode_escape", "backslashreplace").decode("ascii")
                return text if len(text) <= 160 else text[:157] + "..."
        return ""

    @property
    def kinds(self) -> set[str]:
        """The problem kinds (the text before the first colon)."""
        return {p.split(":")[0] for p in self.problems}


# ------------------------------------------------------------------ in-process runs
class _Hang(BaseException):
    """Raised by the alarm: the command ran past its time limit."""


_SPAWNS: list[str] = []
_WATCHING = [False]
_HOOKED = [False]
_SPAWN_EVENTS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHING[0] and event in _SPAWN_EVENTS:
        detail = repr(args[1] if event == "subprocess.Popen" and len(args) > 1 else args)[:200]
        _SPAWNS.append(f"{event} {detail}")


def _install_hook() -> None:
    if not _HOOKED[0]:
        sys.addaudithook(_audit)
        _HOOKED[0] = True


@contextlib.contextmanager
def time_limit(seconds: float) -> Any:
    """Raise :class:`_Hang` (a ``BaseException``) in the main thread after ``seconds``."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Hang

    if threading.current_thread() is not threading.main_thread():  # alarms reach only main
        yield
        return
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _stream(errors: str) -> io.TextIOWrapper:
    # like the streams of a process whose output is a pipe: UTF-8, strict on stdout
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


@functools.cache
def _parser() -> Any:
    """The command line's parser, built once: building it is most of a short command's cost."""
    from orchestrace.cli import build_parser

    return build_parser()


def run_in_process(argv: Sequence[str], timeout: float, cwd: Path) -> tuple[int | None, str, bool]:
    """Run ``orchestrace.cli.main(argv)`` here; return ``(rc, output, hung)``.

    ``rc`` is ``None`` when the command ran past ``timeout`` seconds or raised out of ``main``
    (the output then holds the traceback a real process would have printed).
    """
    import orchestrace.cli
    from orchestrace.cli import main

    parser = _parser()
    _install_hook()
    out, err = _stream("strict"), _stream("backslashreplace")
    rc: int | None = None
    hung = False
    tail = ""
    here = os.getcwd()
    os.chdir(cwd)
    _SPAWNS.clear()
    _WATCHING[0] = True
    built = orchestrace.cli.build_parser
    orchestrace.cli.build_parser = lambda: parser
    try:
        with time_limit(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    except _Hang:
        hung = True
        # an interrupted event loop leaves tasks behind: let them report here, not in the next run
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            gc.collect()
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # escaped main(): a real process prints a traceback
        import traceback

        tail = "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(exc)[-3:]
        )
    finally:
        _WATCHING[0] = False
        os.chdir(here)
        orchestrace.cli.build_parser = built
    text = _read(out) + _read(err) + tail
    if _SPAWNS:
        text += "".join(f"\n[spawned] {s}" for s in _SPAWNS)
    return rc, text, hung


def _read(stream: io.TextIOWrapper) -> str:
    with contextlib.suppress(Exception):
        stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", "backslashreplace")


# ------------------------------------------------------------------ child-process runs
def cli_prefix() -> list[str]:
    """How to start the installed command (the console script next to this Python)."""
    script = Path(sys.executable).parent / "orchestrace"
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-I",
        "-c",
        "import sys; from orchestrace.cli import main; sys.exit(main())",
    ]


def run_child(
    argv: Sequence[str],
    timeout: float,
    cwd: Path,
    *,
    feed: str | None = None,
    data: bytes = b"",
    unprivileged: bool = False,
    prefix: Sequence[str] | None = None,
    fsize: int | None = None,
) -> tuple[int | None, str, bool]:
    """Run the installed command in a child process; return ``(rc, output, hung)``.

    Args:
        argv: Arguments after ``orchestrace``.
        timeout: Seconds before the child's whole process group is killed.
        cwd: Working directory.
        feed: ``"stdin"``: ``data`` goes to the child's stdin; ``"fd"``: to a pipe passed as
            ``/dev/fd/N`` in place of ``/dev/stdin`` in ``argv`` (like ``<(cat FILE)``).
        data: Bytes for ``feed``.
        unprivileged: Without the power to read files regardless of their mode (root runs it
            in a new user namespace, see :func:`unprivileged_prefix`).
        prefix: Program to run instead of the installed command.
        fsize: Largest file the child may write (bytes; ``EFBIG`` beyond, like a full disk).
    """
    args = list(argv)
    pass_fds: tuple[int, ...] = ()
    rfd = wfd = -1
    if feed == "fd":
        rfd, wfd = os.pipe()
        args = [f"/dev/fd/{rfd}" if a == "/dev/stdin" else a for a in args]
        pass_fds = (rfd,)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRACE_DEBUG"}
    # a pipe or FIFO without a writer is given up after this many idle seconds (default 30)
    env.setdefault("ORCHESTRACE_PIPE_IDLE_S", str(PIPE_IDLE_S))
    # a named FIFO that no program opens for writing is refused after this many seconds
    env.setdefault("ORCHESTRACE_FIFO_WRITER_S", str(FIFO_WRITER_S))
    if prefix is None and not unprivileged and os.environ.get("ORCHESTRACE_HOSTILE_EXEC") != "1":
        # a process forked from one that has imported the command line (hostile/zygote.py)
        from hostile.zygote import zygote

        return zygote(env).run(
            argv, timeout, cwd, memory=CHILD_MEMORY, feed=feed, data=data, fsize=fsize
        )
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [
            *((unprivileged_prefix() or []) if unprivileged else []),
            *(prefix or cli_prefix()),
            *args,
        ],
        cwd=cwd,
        stdin=subprocess.PIPE if feed == "stdin" else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=pass_fds,
        preexec_fn=limits,  # noqa: PLW1509 (only sets resource limits)
        start_new_session=True,
        env=env,
    )
    writer = None
    if feed == "fd":
        os.close(rfd)
        writer = threading.Thread(target=_feed_fd, args=(wfd, data), daemon=True)
    if writer:
        writer.start()
    hung = False
    try:
        out, _ = proc.communicate(
            input=data if feed == "stdin" else None,
            timeout=max(0.1, timeout - (time.monotonic() - t0)),
        )
    except subprocess.TimeoutExpired:
        hung = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # nothing it started may outlive it
    return (None if hung else proc.returncode), out.decode("utf-8", "backslashreplace"), hung


def _feed_fd(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError), open(fd, "wb") as fh:
        fh.write(data)


# ------------------------------------------------------------------ fingerprints
def fingerprint(path: Path) -> Any:
    """Content and mode of a file, symlink or directory tree (special files: mode only)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return ("dir", st.st_mode, "unlistable")
        return ("dir", st.st_mode, tuple((n, fingerprint(path / n)) for n in names))
    if stat.S_ISREG(st.st_mode):
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = "unreadable"
        return ("file", st.st_mode, st.st_size, digest)
    return ("special", st.st_mode)


def _listing(d: Path) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(root, n), d))
    return out


# ------------------------------------------------------------------ output checks
def _load_back(kind: str, path: Path, *, partial: bool = False) -> str | None:
    """``None`` when the output at ``path`` is complete; else what is wrong with it.

    ``partial``: the input was a recording cut off by a crash, so the output may carry that
    mark (it must then read back as such a recording).
    """
    from orchestrace.io import iter_jsonl, parse, read_parquet
    from orchestrace.trace.check import check_trace

    try:
        with time_limit(30):
            if kind == "trl":
                for line in path.read_bytes().splitlines():
                    json.loads(line)
                return None
            if kind == "jsonl":
                problems = [p for item in iter_jsonl(path, partial=partial) for p in item.problems]
            elif kind == "parquet":
                problems = [
                    p for tr in read_parquet(path) for p in check_trace(tr, partial=partial)
                ]
            else:
                tr, problems = parse(
                    path.read_bytes(),
                    source=str(path),
                    partial=partial,
                    upstream=kind == "upstream" or None,
                )
                if tr is None:
                    return "unusable"
            errors = [p for p in problems if p.severity == "error"]
            if errors:
                return str(errors[0])[:200]
    except _Hang:
        return "reading it back took over 30 s"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def _mode_problem(path: Path) -> str | None:
    """Written files must follow the umask like any other program's (not 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    want = 0o666 & ~umask
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for f in files:
        mode = stat.S_IMODE(f.stat().st_mode)
        if mode != want:
            return f"{f.name} has mode {mode:o}, not {want:o} (umask {umask:03o})"
    return None


def judge(
    case: Case,
    cmd: Command,
    rc: int | None,
    text: str,
    hung: bool,
    outdir: Path,
    timeout: float,
) -> list[str]:
    """Every rule the run broke, as ``kind: detail`` strings (empty when it passed)."""
    bad: list[str] = []
    if hung:
        bad.append(f"hang: no exit within {timeout:g} s")
    if "Traceback (most recent call last)" in text:
        bad.append("traceback: printed a Python traceback")
    if rc == 3 or "this is a bug" in text:
        bad.append("exit-3: reported an unexpected error")
    elif rc is not None and rc not in (0, 1, 2):
        bad.append(f"exit-code: exit {rc}")
    if "[spawned]" in text:
        bad.append("spawned: started a process while reading a trace")
    if rc == 0:
        if case.expect == "invalid":
            # --partial may tolerate what a cut-off recording explains, when it says so
            if not (cmd.name == "validate --partial" and _WARNED.search(text)):
                bad.append("accepted: exit 0 for an invalid input")
        elif case.expect == "truncated":
            if cmd.name == "validate" or cmd.name == "validate --keep-going":
                bad.append("accepted: exit 0 for a truncated recording")
            elif cmd.reader != "validate" and not _WARNED.search(text):
                bad.append("silent-partial: used a truncated recording without a warning")
    one = cmd.output in ("json", "upstream", "replay", "trl") or cmd.reader in ("credit", "analyze")
    if (
        case.expect == "valid"
        and rc != 0
        and cmd.reader in ("validate", "analyze", "convert")
        and not (case.multi and one)
    ):
        bad.append(f"rejected: exit {rc} for a valid input")
    human = "--json" not in cmd.argv  # JSON output escapes control characters, keeps ids whole
    ch = _CONTROL.search(text.replace("\n", "").replace("\t", ""))
    if human and ch:
        bad.append(f"control-char: printed raw {ch.group()!r}")
    if human and len(text) > MAX_OUTPUT:
        bad.append(f"output-size: printed {len(text):,} characters")
    # outputs: complete or absent, nothing else left behind
    try:
        left = sorted(os.listdir(outdir))
    except OSError:
        left = []
    if cmd.output and cmd.out_name:
        target = outdir / cmd.out_name
        exists = target.exists() or target.is_symlink()
        if exists:
            why = _load_back(cmd.output, target, partial=case.expect == "truncated")
            if why:
                bad.append(f"output-incomplete: {cmd.out_name} does not load back ({why})")
            elif rc == 0 and (mode := _mode_problem(target)):
                bad.append(f"output-mode: {mode}")
            elif rc not in (0, 1) or (rc == 1 and cmd.output != "replay"):
                bad.append(f"output-on-failure: exit {rc} but {cmd.out_name} was written")
        elif rc == 0:
            bad.append(f"output-missing: exit 0 but no {cmd.out_name}")
        left = [n for n in left if n != cmd.out_name]
    if left:
        bad.append(f"leftover: files left in the output directory: {left[:5]}")
    return bad


# ------------------------------------------------------------------ one case
_UNPRIVILEGED: list[list[str] | None] = []


def unprivileged_prefix() -> list[str] | None:
    """Command prefix that drops the power to read any file; ``None`` when impossible.

    Not root: nothing to drop. Root: ``unshare -U`` (a user namespace of its own keeps the
    owner's access to its files but loses ``CAP_DAC_OVERRIDE``, so mode 000 means unreadable).
    """
    if not _UNPRIVILEGED:
        found: list[str] | None = []
        if os.geteuid() == 0:
            try:
                ok = subprocess.run(
                    ["unshare", "-U", "true"], check=False, capture_output=True, timeout=10
                )
                found = ["unshare", "-U"] if ok.returncode == 0 else None
            except (OSError, subprocess.TimeoutExpired):
                found = None
        _UNPRIVILEGED.append(found)
    return _UNPRIVILEGED[0]


def run_case(
    case: Case,
    seeds: Seeds,
    workdir: Path,
    *,
    child: bool | None = None,
    timeout: float = 20.0,
    commands: Iterable[Command] = COMMANDS,
) -> list[Result]:
    """Build ``case`` under ``workdir`` and run every command on it; one :class:`Result` each.

    Args:
        case: The input.
        seeds: Seed inputs (from :func:`hostile.corpus.make_seeds`).
        workdir: Scratch directory (the case and the outputs go below it).
        child: Run in child processes (default: only for special cases).
        timeout: Seconds per command.
        commands: The command lines to run.

    Returns:
        One result per command; empty when the case cannot be run here (an unreadable-file
        case as root without user namespaces).
    """
    child = case.special if child is None else child or case.special
    if case.commands:
        commands = [c for c in commands if c.name in case.commands]
    if case.unprivileged and unprivileged_prefix() is None:
        return []
    cases_dir = workdir / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    path = case.materialize(seeds, cases_dir)
    case_dir = cases_dir / case.name.replace("/", "__")
    inside = path.is_absolute() and case_dir in path.parents
    before = fingerprint(path) if inside and not case.special else None
    listing = _listing(case_dir)
    data = case.pipe_data(seeds) if case.pipe_data else b""
    results = []
    # one output directory for every command, emptied between them: removing a directory costs
    # a file-system commit on some machines (ext4 with discard), far more than the command
    outdir = workdir / "out" / case.name.replace("/", "__")
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    for cmd in commands:
        argv = [a.replace("{in}", str(path)).replace("{out}", str(outdir)) for a in cmd.argv]
        t0 = time.monotonic()
        if child:
            rc, text, hung = run_child(
                argv, timeout, case_dir, feed=case.feed, data=data, unprivileged=case.unprivileged
            )
        else:
            rc, text, hung = run_in_process(argv, timeout, case_dir)
        res = Result(case.name, cmd.name, rc, text, time.monotonic() - t0, hung)
        res.problems = judge(case, cmd, rc, text, hung, outdir, timeout)
        if before is not None and fingerprint(path) != before:
            res.problems.append("input-changed: the input was modified")
        now = _listing(case_dir)
        if (case_dir / MARKER).exists() or (case_dir / f"{MARKER}.dir").exists():
            res.problems.append("code-ran: code planted in the trace was executed")
            with contextlib.suppress(OSError):
                (case_dir / MARKER).unlink()
            shutil.rmtree(case_dir / f"{MARKER}.dir", ignore_errors=True)
            now = _listing(case_dir)
        elif now != listing:
            res.problems.append(
                f"input-dir-changed: next to the input: +{sorted(now - listing)[:3]} "
                f"-{sorted(listing - now)[:3]}"
            )
        listing = now
        results.append(res)
        _empty(outdir)
    return results


def _empty(d: Path) -> None:
    """Remove everything inside ``d`` (a command's outputs), keeping ``d``."""
    for entry in os.scandir(d):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def run_output_case(
    case: OutputCase,
    seeds: Seeds,
    workdir: Path,
    *,
    timeout: float = 20.0,
    child: bool | None = None,
) -> Result:
    """Run one hostile-output command and judge it (see :class:`OutputCase`).

    ``child``: run it in a child process (default: only the cases that need one).
    """
    if case.unprivileged and unprivileged_prefix() is None:
        return Result(case.name, "skipped", None, "no way to drop write access here", 0.0)
    d = workdir / "outputs" / case.name.replace("/", "__")
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "trace.json").write_bytes(_trace_json(seeds))
    (d / "run.jsonl").write_bytes(b"\n".join(seeds.run_lines) + b"\n")
    case.setup(d)
    keep = {p: fingerprint(d / p) for p in case.protect}
    inputs = {p: fingerprint(d / p) for p in ("trace.json", "run.jsonl")}
    listing = _listing(d)
    subs = {"{trace}": str(d / "trace.json"), "{run}": str(d / "run.jsonl"), "{d}": str(d)}
    argv = []
    for a in case.argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    t0 = time.monotonic()
    if case.child if child is None else child or case.child:
        rc, text, hung = run_child(
            argv, timeout, d, unprivileged=case.unprivileged, fsize=case.fsize
        )
    else:
        rc, text, hung = run_in_process(argv, timeout, d)
    res = Result(case.name, " ".join(case.argv[:1]), rc, text, time.monotonic() - t0, hung)
    bad = res.problems
    if "[spawned]" in text:
        bad.append("spawned: started a process")
    if hung:
        bad.append(f"hang: no exit within {timeout:g} s")
    if "Traceback (most recent call last)" in text:
        bad.append("traceback: printed a Python traceback")
    if rc == 3 or "this is a bug" in text:
        bad.append("exit-3: reported an unexpected error")
    elif rc is not None and rc not in (0, 1, 2):
        bad.append(f"exit-code: exit {rc}")
    if case.must_fail and rc == 0:
        bad.append("accepted: exit 0 for an output path or option value it must refuse")
    for p, before in keep.items():
        if fingerprint(d / p) != before:
            bad.append(f"data-lost: {p} was changed or removed")
    written = {case.output[0]} if case.output else set()
    for p, before in inputs.items():
        if p not in written and fingerprint(d / p) != before:
            bad.append(f"input-changed: {p}")
    if case.output and rc == 0:
        target = d / case.output[0]
        if not target.exists():
            bad.append(f"output-missing: exit 0 but no {case.output[0]}")
        elif why := _load_back(case.output[1], target):
            bad.append(f"output-incomplete: {case.output[0]} does not load back ({why})")
        elif mode := _mode_problem(target):
            bad.append(f"output-mode: {mode}")
    new = sorted(
        n for n in _listing(d) - listing if n not in written and not n.startswith(tuple(written))
    )
    if rc != 0 and new:
        bad.append(f"leftover: failed but left {new[:4]}")
    return res


def _trace_json(seeds: Seeds) -> bytes:
    return json.dumps(seeds.trace, separators=(",", ":")).encode()


# ------------------------------------------------------------------ report
COLUMNS = (
    ("tracebacks", "traceback"),
    ("exit 3", "exit-3"),
    ("hangs", "hang"),
    ("outputs incomplete", "output-incomplete"),
    ("code ran", "code-ran"),
)


def summarize(results: Sequence[Result], label: str, inputs: int) -> dict[str, Any]:
    """Counts for one row of the table: runs, and runs showing each kind of problem."""
    row: dict[str, Any] = {"probe": label, "inputs": inputs, "runs": len(results)}
    for col, kind in COLUMNS:
        row[col] = sum(1 for r in results if kind in r.kinds)
    known = {k for _, k in COLUMNS}
    row["other problems"] = sum(1 for r in results if r.kinds - known)
    row["failed runs"] = sum(1 for r in results if r.problems)
    return row


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`summarize` rows."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "| " + " | ".join("---" for _ in keys) + " |"]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(f"{r[k]:,}" if isinstance(r[k], int) else str(r[k]) for k in keys)
            + " |"
        )
    return "\n".join(lines)


def failure_lines(results: Iterable[Result]) -> list[str]:
    """One line per failed run: case, command, exit code, problems, first output line."""
    return [
        f"{r.case} | {r.command} | rc={r.rc} | {'; '.join(r.problems)} | {r.first_line}"
        for r in results
        if r.problems
    ]


Runner = Callable[..., list[Result]]
