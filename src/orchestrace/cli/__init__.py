"""The ``orchestrace`` command line: one sub-command per module in this package.

Every command exits 0 on success, 1 when the input is bad (the message names the place and
the fix), 2 on a usage error, and never prints a traceback unless ``ORCHESTRACE_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from orchestrace import __version__, _startup
from orchestrace._numbers import check_seed
from orchestrace._safe import StreamWriteError, bounded, guarded_output, redact
from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.io._output import FORCE_HINT
from orchestrace.trace.model import MAX_INT

__all__ = ["COMMANDS", "main"]

#: Sub-command name -> (module, one-line help). Each module has ``add_parser(subparsers)``
#: and ``run(args) -> int``; it is imported only when its command is chosen (the help here is
#: what ``orchestrace --help`` lists, and equals the one the module's parser declares).
_TABLE: dict[str, tuple[str, str]] = {
    "demo": ("demo", "run the main job on embedded defaults and print the analysis"),
    "schema": ("schema", "print the native trace JSON Schema (Draft 2020-12)"),
    "validate": (
        "validate",
        "check trace files; one line per problem, exit 1 when any is invalid",
    ),
    "audit": (
        "audit",
        "security audit of traces: spoofing, escalation, taint, forged aggregates; "
        "exit 1 on findings",
    ),
    "analyze": ("analyze", "print a trace's counts, critical path, speedup and Critical Steps"),
    "generate": ("generate", "write a synthetic hierarchical trace"),
    "convert": ("convert", "convert traces between formats (native, upstream, jsonl, parquet)"),
    "run": ("run", "run a topology on a task and record its trace"),
    "replay": ("replay", "re-execute a recorded run (exactly, or as a counterfactual fork)"),
    "reward": ("reward", "score traces with reward functions (R1-R8, PARL)"),
    "credit": ("credit", "assign a trace's reward to units (team ... token)"),
    "train": ("train", "train an orchestration policy (needs the [learn] extra)"),
    "evaluate": ("evaluate", "compare policies on held-out task instances"),
    "study": (
        "study",
        "reproduce a study (stopping: learned O5 vs tuned rules, on equal data)",
    ),
    "export": (
        "export",
        "export orchestrator turns (prompt, completion, advantage) for TRL or verl",
    ),
    "bench": ("bench", "run a benchmark suite (E1-E4, scale envelope, failure taxonomy)"),
    "papers": ("papers", "the survey's paper pool: check, taxonomy, stats, plot, coverage"),
    "view": (
        "view",
        "show a trace in the browser: timeline, graph, critical path, credit, fork diff",
    ),
}

#: Sub-command name -> module (each has ``add_parser(subparsers)`` and ``run(args) -> int``).
COMMANDS: dict[str, str] = {name: f"orchestrace.cli.{mod}" for name, (mod, _) in _TABLE.items()}

#: With ``ORCHESTRACE_HUGE_PAGES=1``, inputs larger than this make the CLI restart itself with
#: transparent huge pages enabled for malloc (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``). It is
#: off by default: whether it helps depends on the machine. On a freshly started 2-core VM it
#: cut decoding time by about a third; on the same VM type after hours of use (memory
#: fragmented, so the kernel compacts memory when a huge page is first touched) it made
#: ``validate`` of a 205 MB JSON trace 20% slower (3.5 s against 2.9 s wall, the difference all
#: system time) and ``convert`` of a 1,000,000-event trace 25% slower (7.6-8.2 s against
#: 6.2-6.5 s), measured alternately.
_HUGE_INPUT = 64 << 20
_HUGE_PAGES_ENV = "ORCHESTRACE_HUGE_PAGES"


def _huge_pages_asked() -> bool:
    """Whether ``ORCHESTRACE_HUGE_PAGES`` asks for the restart (a value not understood: a warning)."""
    value = os.environ.get(_HUGE_PAGES_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value not in ("", "0", "false", "no", "off"):
        print(
            f"warning: {_HUGE_PAGES_ENV}={bounded(value, 40)!r} is not understood and is ignored; "
            "set it to 1 to restart large inputs with huge pages, or 0",
            file=sys.stderr,
        )
    return False


def _maybe_tune_malloc(argv: Sequence[str]) -> None:
    if (
        sys.platform != "linux"
        or os.environ.get("ORCHESTRACE_NO_REEXEC")
        or not _huge_pages_asked()
        or "GLIBC_TUNABLES" in os.environ
    ):
        return
    try:
        big = any(os.path.isfile(a) and os.path.getsize(a) > _HUGE_INPUT for a in argv)
    except OSError:
        big = False
    if not big:
        return
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.hugetlb=1", ORCHESTRACE_NO_REEXEC="1")
    # -P: the restarted interpreter must import this installation, never a package that
    # happens to sit in the current directory (``-m`` would otherwise put it first on sys.path)
    try:
        os.execve(sys.executable, [sys.executable, "-P", "-m", "orchestrace", *argv], env)
    except OSError:
        return


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-commands whose parsers are built when chosen: each starts as a stand-in with its help.

    Parsing a command imports its module and replaces the stand-in by the module's parser, in
    its place in the help listing; the other commands' modules are never imported.
    """

    loaded: set[str]

    def load(self, name: str) -> None:
        """Build command ``name``'s real parser (once)."""
        if name not in COMMANDS or name in self.loaded:
            return
        self.loaded.add(name)
        at = next(k for k, a in enumerate(self._choices_actions) if a.dest == name)
        del self._choices_actions[at], self._name_parser_map[name]
        importlib.import_module(COMMANDS[name]).add_parser(self)
        self._choices_actions.insert(at, self._choices_actions.pop())

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values:
            self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


def build_parser(load: bool = False) -> argparse.ArgumentParser:
    """The top-level parser with every sub-command.

    Args:
        load: Build every command's parser now (each is otherwise built when it is parsed,
            so a run imports the module of its own command only).

    Example:
        >>> args = build_parser().parse_args(["schema"])
        >>> args.command, callable(args.func)
        ('schema', True)
    """
    parser = argparse.ArgumentParser(
        prog="orchestrace",
        description="Orchestration traces for reinforcement learning of LLM multi-agent systems.",
    )
    parser.add_argument("--version", action="version", version=f"orchestrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    assert isinstance(sub, _Commands)
    sub.loaded = set()
    for name, (_, help_) in _TABLE.items():
        sub.add_parser(name, help=help_)
    if load:
        for name in _TABLE:
            sub.load(name)
    return parser


class Terminated(SystemExit):
    """SIGTERM arrived: unwinds like Ctrl-C, so outputs being written are cleaned up.

    A ``SystemExit`` (status 143), so that asyncio passes it straight out of a running loop
    as it does ``KeyboardInterrupt``, instead of keeping it as the failure of the task that
    was running when the signal came.
    """

    def __init__(self) -> None:
        super().__init__(143)


_SIGNALS = {signal.SIGINT, signal.SIGTERM}
#: Non-empty while :func:`main` runs a command in the main thread (forks hold the signals).
_RUNNING: list[bool] = []


class _Mask:
    """The calling thread's signal mask, set through libc with no Python code around the call.

    Python runs a signal's handler at the first chance after the signal is let through; in
    a fork hook that is inside ``os.fork``, which drops the handler's exception
    ("Exception ignored") and so loses the interrupt. The hooks before a fork and after it
    in the parent are therefore ``functools.partial`` objects of the libc function: C alone,
    with no chance for a handler to run inside them.
    """

    def __init__(self) -> None:
        import ctypes  # noqa: PLC0415  needed only when a command runs (numpy loads it anyway)

        self._libc = libc = ctypes.CDLL(None, use_errno=True)
        self._sigmask = libc.pthread_sigmask
        self.saved = ctypes.create_string_buffer(1024)  # a sigset_t (128 bytes on Linux)
        #: What the hook before a fork adds to the mask: SIGINT and SIGTERM while a command
        #: runs (:meth:`arm`), nothing otherwise.
        self.block = ctypes.create_string_buffer(1024)
        libc.sigemptyset(self.block)
        #: Saves the mask and adds :attr:`block` (the hook before a fork).
        self.hold = functools.partial(self._sigmask, signal.SIG_BLOCK, self.block, self.saved)
        #: Puts back the mask :attr:`hold` saved (the hooks after a fork).
        self.restore = functools.partial(self._sigmask, signal.SIG_SETMASK, self.saved, None)

    def arm(self, on: bool) -> None:
        """Whether the hook before a fork holds SIGINT and SIGTERM."""
        self._libc.sigemptyset(self.block)
        if on:
            for sig in sorted(_SIGNALS):
                self._libc.sigaddset(self.block, int(sig))


def _after_fork_in_child(mask: _Mask) -> None:
    if _RUNNING:
        _RUNNING.clear()
        _startup.child_signals()
    mask.restore()  # one that came ends the copy


_MASK: list[_Mask] = []


def _hold_signals_across_forks() -> _Mask | None:
    """While the command runs, a forked process never runs this process's handlers.

    Without this, a signal sent to the group in the instant after a fork (before the copy
    calls :func:`orchestrace._startup.child_signals`) raises inside Python's own after-fork
    code in the copy and prints a traceback.
    """
    if not _MASK and hasattr(os, "register_at_fork"):
        try:
            mask = _Mask()
        except (ImportError, OSError, AttributeError):  # pragma: no cover - no libc mask
            return None
        os.register_at_fork(
            before=mask.hold,
            after_in_parent=mask.restore,
            after_in_child=functools.partial(_after_fork_in_child, mask),
        )
        _MASK.append(mask)
    return _MASK[0] if _MASK else None


#: Interrupts that came while a fork was under way in the main thread (re-raised after it).
_DEFERRED: list[int] = []
#: Copies whose fork an interrupt ended before their process id reached the code that
#: forked: nothing else knows of them, so the command ends them as it stops.
_IN_FLIGHT: list[int] = []


def _end_forks_in_flight() -> None:
    while _IN_FLIGHT:
        pid = _IN_FLIGHT.pop()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _defer(signum: int, frame: object) -> None:
    _DEFERRED.append(signum)


def _forking(fork: Callable[[], int]) -> Callable[[], int]:
    """``os.fork`` for the time a command runs, holding SIGINT and SIGTERM across the fork.

    Python drops an exception raised inside a fork hook ("Exception ignored"), and a handler
    runs wherever the main thread is when a signal comes (a signal can be delivered to any
    thread): an interrupt during a fork would be lost inside some library's hook. So the
    signals are blocked in the forking thread from before the fork until it has returned, and
    in the main thread their Python handlers only note a signal meanwhile; it is raised here
    once the fork has returned, in the code that forked. The copy starts with the signals
    held; once it has let go of this process's handlers
    (:func:`orchestrace._startup.child_signals`, in its after-fork hook) one that came ends
    it.
    """

    @functools.wraps(fork)
    def held_fork() -> int:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        handlers: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for held in sorted(_SIGNALS):
                handler = signal.getsignal(held)
                if callable(handler):  # a Python handler (ignored and default ones stay)
                    handlers[held] = signal.signal(held, _defer)
        pid = -1
        try:
            pid = fork()
            if pid > 0:  # until it is returned, the caller does not know of this copy
                _IN_FLIGHT.append(pid)
        finally:
            if pid == 0:  # the copy: its handlers are its own now, the parent's notes not
                _DEFERRED.clear()
                _IN_FLIGHT.clear()
            raised: BaseException | None = None
            for num, handler in handlers.items() if pid != 0 else ():
                try:
                    signal.signal(num, handler)
                except BaseException as err:  # a signal that came meanwhile, from its handler
                    raised = raised or err
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)  # one still pending: raised
            except BaseException as err:
                raised = raised or err
            if raised is not None:
                raise raised
        if handlers and _DEFERRED:  # (only the main thread notes signals)
            came = _DEFERRED[0]
            _DEFERRED.clear()
            handlers[came](came, None)  # raises it (KeyboardInterrupt, Terminated)
        if pid > 0:
            _IN_FLIGHT.remove(pid)
        return pid

    held_fork._orchestrace_fork = fork  # type: ignore[attr-defined]
    return held_fork


def _quiet_abandoned_tasks() -> None:
    """After an interrupt: asyncio tasks left holding it are collected without a report.

    In the ``orchestrace`` process itself, which ends next, asyncio stays quiet until the
    end (a task still referenced now is collected at exit).
    """
    log = logging.getLogger("asyncio")
    was = log.disabled
    log.disabled = True
    try:
        gc.collect()
    finally:
        if not _startup._starting_cli():
            log.disabled = was


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def _check_seeds(args: argparse.Namespace) -> None:
    """Every seed option of every command: an integer from 0 to 2**63-1."""
    for name in ("seed", "task_seed", "train_seed"):
        value = getattr(args, name, None)
        if value is not None:
            check_seed(value, "--" + name.replace("_", "-"))
    # every other integer option is a count, size, budget, index or year: none is negative,
    # and none goes beyond what a 64-bit field holds
    for name, value in vars(args).items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        flag = "--" + name.replace("_", "-")
        if abs(value) > MAX_INT:
            raise ConfigError(
                f"{flag} is out of range (got a {len(str(abs(value)))}-digit number); "
                "use a value below 2**63"
            )
        if value < 0:
            raise ConfigError(f"{flag} must not be negative (got {value}); e.g. {flag} {-value}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    SIGINT exits 130 and SIGTERM 143, with one line and no traceback; outputs being written
    are removed (a file they were to replace is kept), and ``run`` records the stop first.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None:
        _maybe_tune_malloc(args_list)

    token = FORCE_HINT.set("--force")
    previous: Any = None
    running = threading.current_thread() is threading.main_thread()
    if running:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # ignored: still ignored
            previous = signal.signal(signal.SIGTERM, _on_sigterm)
        mask = _hold_signals_across_forks()
        if mask is not None:
            mask.arm(True)
        _RUNNING.append(True)
        if hasattr(os, "fork") and not hasattr(os.fork, "_orchestrace_fork"):
            os.fork = _forking(os.fork)

        if signal.getsignal(signal.SIGINT) is _startup._quiet_exit:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 1
    try:
        with guarded_output():
            code = _main(args_list)
            return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
        return code
    except Terminated:
        print("terminated", file=sys.stderr)
        code = 143
        return code
    finally:
        if code in (130, 143):  # the interrupt is handled: what it left behind goes quietly
            _end_forks_in_flight()
            _quiet_abandoned_tasks()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if running and _RUNNING:
            _RUNNING.pop()
            if not _RUNNING:
                if _MASK:
                    _MASK[0].arm(False)
                real = getattr(getattr(os, "fork", None), "_orchestrace_fork", None)
                if real is not None:
                    os.fork = real
        FORCE_HINT.reset(token)


def _say_stream_error(err: StreamWriteError) -> None:
    """One line for an output that cannot be written; nothing when stderr is the one gone."""
    with contextlib.suppress(Exception):
        print(
            f"error: {err.strerror}; check where the output goes (a closed or full file or device)",
            file=sys.stderr,
        )


def _say_out_of_memory() -> None:
    with contextlib.suppress(Exception):
        print(
            "error: out of memory; for very large traces use a Parquet dataset "
            "(`orchestrace convert IN -o OUT.parquet`)",
            file=sys.stderr,
        )


def _near_memory_limit(share: float = 0.9) -> bool:
    """Whether this process came within ``share`` of its address-space limit (``ulimit -v``).

    Example:
        >>> _near_memory_limit(share=2.0)  # (the peak never reaches twice the limit)
        False
    """
    try:
        import resource  # noqa: PLC0415  POSIX only

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft in (resource.RLIM_INFINITY, -1) or soft <= 0:
            return False
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024 >= share * soft
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return False


def _main(args_list: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(args_list)
    if not args.command:
        parser.print_help()
        return 2
    debug = bool(os.environ.get("ORCHESTRACE_DEBUG"))
    try:
        _check_seeds(args)
        code: int = args.func(args)
        sys.stdout.flush()  # output still buffered fails here, where it can be reported
        return code
    except StreamWriteError as err:
        _say_stream_error(err)
        return 1
    except OrchestraceError as err:
        print(f"error: {bounded(redact(str(err)))}", file=sys.stderr)
        return 1
    except ImportError as err:  # an optional extra is missing: the message says what to install
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError as err:
        err.__traceback__ = None  # its frames hold what filled the memory: let them go
        _say_out_of_memory()
        return 1
    except Exception as err:
        if debug:
            raise
        err.__traceback__ = None  # (frames that may hold most of the memory)
        if isinstance(err, SystemError) and _near_memory_limit():
            _say_out_of_memory()  # C code that ran out of memory may fail this way
            return 1
        try:
            text = redact(str(err)[:1000])[:300]
        except MemoryError:  # the failure was the memory running out
            _say_out_of_memory()
            return 1
        print(
            f"error: unexpected {type(err).__name__}: {text}\n"
            "this is a bug in orchestrace; rerun with ORCHESTRACE_DEBUG=1 for details and "
            "report it",
            file=sys.stderr,
        )
        return 3
