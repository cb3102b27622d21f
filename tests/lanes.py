"""Background lanes: with ``-n N``, a few files run in a fresh ``pytest`` of their own.

Most of the Ray files' time is waiting (Ray starting, a worker dying, a cluster refusing), and
the snapshot-fork file needs a fresh interpreter anyway (``test_snapshot_forks.py``). Run on an
xdist worker, they held it for over a minute while its core sat partly idle. Instead the
controller starts them as soon as the workers have collected: one ``pytest`` per lane, one
lane after the other, next to the workers. Each of their tests is still an item of the
session (same node id and markers), collected last; it waits for its lane and reports what
the test did there: passed, skipped (with the reason), an expected failure, or failed (with
the failure's text). A test that did not finish there (the lane was interrupted or crashed)
fails, as does every test of a lane that exited with an error no test accounts for. Without
xdist the files run in the test process as usual.

Of the command line, a lane gets its tests' node ids (so ``-k``, ``-m`` and ``--lf`` apply)
and ``-W``, ``-o``, ``-p`` (except xdist's) and ``--runxfail``; other options and
``PYTEST_ADDOPTS`` do not reach it.

The controller makes a directory for the lanes (``ORCHESTRACE_LANE_DIR``, inherited by the
workers) and removes it at the end. A lane's ``pytest`` appends one line per test phase to
``LANE.tests.jsonl`` as it goes (:func:`record`); when it has ended, the controller writes
``LANE.done.json`` (exit status, the tests' outcomes, the output's end), which the items wait
for.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

#: Each lane: its name, its files (under ``tests/``) and what its environment adds.
LANES: list[tuple[str, tuple[str, ...], dict[str, str]]] = []

DIR_ENV = "ORCHESTRACE_LANE_DIR"
REPORT_ENV = "ORCHESTRACE_LANE_REPORT"
#: The longest a lane may run.
LANE_TIMEOUT_S = 1800.0
#: The markers a lane has already applied; its items do not apply them again.
_APPLIED = frozenset({"skip", "skipif", "xfail"})
#: The process that runs a lane's session (not a copy of it made by ``os.fork``).
_SESSION_PID = os.getpid()


def configure(lanes: tuple[tuple[str, tuple[str, ...], dict[str, str]], ...]) -> None:
    """Set the lanes (from ``conftest.py``)."""
    LANES[:] = lanes


def lane_of(nodeid: str) -> str | None:
    """The lane that runs the test ``nodeid``, or ``None``."""
    path = nodeid.split("::", 1)[0]
    for name, files, _env in LANES:
        if any(path == f"tests/{f}" for f in files):
            return name
    return None


def active(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker whose controller runs the lanes."""
    return hasattr(config, "workerinput") and bool(os.environ.get(DIR_ENV))


# --------------------------------------------------------------- in a lane's own pytest
def record(report: pytest.TestReport) -> None:
    """Append what a phase of a test did (in a lane's ``pytest``: ``REPORT_ENV`` is set)."""
    path = os.environ.get(REPORT_ENV)
    if not path or os.getpid() != _SESSION_PID:
        return
    line: dict[str, Any] = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
    if report.failed:
        line["text"] = report.longreprtext
    if hasattr(report, "wasxfail"):
        line["xfail"] = report.wasxfail
    elif report.skipped:
        longrepr = report.longrepr
        line["reason"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def outcomes(lines: Iterator[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each test's outcome from its phases' lines: ``failed``, ``xfailed``, ``skipped``,
    ``passed`` (its call passed and its teardown ran) or ``incomplete``."""
    phases: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        phases.setdefault(line["id"], []).append(line)
    out = {}
    for nodeid, seen in phases.items():
        when = {p["when"]: p for p in seen}
        failed = [p for p in seen if p["outcome"] == "failed"]
        xfail = [p for p in seen if "xfail" in p and p["outcome"] == "skipped"]
        skip = [p for p in seen if "xfail" not in p and p["outcome"] == "skipped"]
        if failed:
            text = "".join(f"--- {p['when']}\n{p.get('text', '')}\n" for p in failed)
            out[nodeid] = {"outcome": "failed", "text": text}
        elif "teardown" not in when:
            out[nodeid] = {"outcome": "incomplete"}
        elif xfail:
            out[nodeid] = {"outcome": "xfailed", "reason": xfail[0]["xfail"]}
        elif skip:  # in its setup (a marker, a fixture) or its call (pytest.skip)
            out[nodeid] = {"outcome": "skipped", "reason": skip[0].get("reason", "")}
        elif when.get("call", {}).get("outcome") == "passed":
            out[nodeid] = {"outcome": "passed"}
        else:
            out[nodeid] = {"outcome": "incomplete"}
    return out


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for raw in text.splitlines():
        with contextlib.suppress(ValueError):
            yield json.loads(raw)  # a line cut by a crash is left out


# --------------------------------------------------------------- in the controller
class Lanes:
    """Starts the lanes once the workers have collected; stops them at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.dir = Path(tempfile.mkdtemp(prefix="orchestrace-lanes-"))
        os.environ[DIR_ENV] = str(self.dir)  # the workers start after this: they inherit it
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self.summary: list[str] = []

    def start(self, ids: Sequence[str]) -> None:
        """Run each lane's tests among ``ids`` (once; later calls do nothing)."""
        if self._thread is not None:
            return
        jobs = []
        for name, _files, env in LANES:
            mine = [i for i in ids if lane_of(i) == name]
            if mine:
                jobs.append((name, mine, env))
        self._thread = threading.Thread(target=self._run, args=(jobs,), daemon=True)
        self._thread.start()

    def _options(self) -> list[str]:
        """The options of this session a lane's ``pytest`` gets too."""
        opt = self.config.option
        out = [f"-W{w}" for w in getattr(opt, "pythonwarnings", None) or ()]
        out += [f"--override-ini={o}" for o in getattr(opt, "override_ini", None) or ()]
        if getattr(opt, "runxfail", False):
            out.append("--runxfail")
        args = [str(a) for a in self.config.invocation_params.args]
        for i, arg in enumerate(args):
            value = args[i + 1] if arg == "-p" and i + 1 < len(args) else None
            if arg.startswith("-p") and len(arg) > 2:
                value = arg[2:]
            if value is not None and "xdist" not in value:
                out += ["-p", value]
        return out

    def _run(self, jobs: list[tuple[str, list[str], dict[str, str]]]) -> None:
        for name, ids, extra in jobs:
            t0 = time.monotonic()
            rc: int | None = None
            text = ""
            try:
                rc, text = self._lane(name, ids, extra)
            except Exception as err:  # reported through every test of the lane
                text = f"the lane could not run: {type(err).__name__}: {err}"
            finally:
                found = outcomes(_read_lines(self.dir / f"{name}.tests.jsonl"))
                bad = any(r["outcome"] in ("failed", "incomplete") for r in found.values())
                missing = [i for i in ids if i not in found]
                done = {
                    "rc": rc,
                    "records": found,
                    "tail": text[-6000:],
                    # an error no test accounts for: every test of the lane fails
                    "unexplained": rc != 0 and not bad and not missing,
                }
                tmp = self.dir / f"{name}.done.json.tmp"
                tmp.write_text(json.dumps(done))
                os.replace(tmp, self.dir / f"{name}.done.json")
            lines = [ln for ln in text.splitlines() if ln.strip()]
            last = lines[-1].strip("= ") if lines and rc in (0, 1) else f"exit status {rc}"
            self.summary.append(
                f"lane {name} ({len(ids)} tests, own pytest): {last}, "
                f"{time.monotonic() - t0:.1f} s wall"
            )

    def _lane(self, name: str, ids: list[str], extra: dict[str, str]) -> tuple[int | None, str]:
        out = self.dir / f"{name}.out"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env.pop(DIR_ENV, None)
        env.update(extra)
        env[REPORT_ENV] = str(self.dir / f"{name}.tests.jsonl")
        cmd = [sys.executable, "-m", "pytest", *ids, "-q", "-p", "no:cacheprovider"]
        cmd += ["-p", "no:xdist", "-p", "no:randomly", *self._options()]
        with open(out, "wb") as fh:
            with self._lock:
                if self._stopping:
                    return None, "the session stopped before this lane started"
                self._proc = subprocess.Popen(
                    cmd,
                    cwd=self.config.rootpath,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            try:
                rc = self._proc.wait(timeout=LANE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
                rc = self._proc.wait()
        return rc, out.read_text(errors="replace")

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop a lane still running (an interrupted session) and remove the directory."""
        with self._lock:
            self._stopping = True
            self._kill()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.environ.pop(DIR_ENV, None)


# --------------------------------------------------------------- in the workers
class LaneResult(pytest.Item):
    """A test that ran in a lane: waits for the lane and reports what the test did there."""

    def __init__(self, *, lane: str, original: pytest.Item, **kw: Any) -> None:
        super().__init__(**kw)
        self.lane = lane
        self.own_markers = [m for m in original.own_markers if m.name not in _APPLIED]
        self.keywords.update({k: v for k, v in original.keywords.items() if k not in _APPLIED})
        self._line = original.location[1]
        assert self.nodeid == original.nodeid, (self.nodeid, original.nodeid)

    def iter_markers_with_node(self, name: str | None = None) -> Iterator[tuple[Any, Any]]:
        """The markers, less those the lane applied (a module's ``skipif``, an ``xfail``)."""
        for node, mark in super().iter_markers_with_node(name):
            if mark.name not in _APPLIED:
                yield node, mark

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, self._line, f"{self.name} (in lane {self.lane})"

    def runtest(self) -> None:
        done = Path(os.environ[DIR_ENV]) / f"{self.lane}.done.json"
        # the lanes run one after the other: this one may start only after the others end
        end = time.monotonic() + LANE_TIMEOUT_S * len(LANES) + 120
        while not done.exists():
            if time.monotonic() > end:
                pytest.fail(f"lane {self.lane} did not finish", pytrace=False)
            time.sleep(0.05)
        result = json.loads(done.read_text())
        if result["unexplained"]:
            pytest.fail(
                f"lane {self.lane} exited with {result['rc']} though no test failed there:\n"
                f"{result['tail']}",
                pytrace=False,
            )
        rec = result["records"].get(self.nodeid, {"outcome": "missing"})
        if rec["outcome"] in ("missing", "incomplete"):
            pytest.fail(
                f"{self.nodeid} did not finish in lane {self.lane} (its pytest exited with "
                f"{result['rc']}):\n{result['tail']}",
                pytrace=False,
            )
        if rec["outcome"] == "skipped":  # reported at the test's own line
            raise pytest.skip.Exception(rec["reason"], _use_item_location=True)
        if rec["outcome"] == "xfailed":
            pytest.xfail(rec["reason"])
        if rec["outcome"] == "failed":
            pytest.fail(f"in lane {self.lane} (its own pytest):\n{rec['text']}", pytrace=False)


def replace_items(items: list[pytest.Item]) -> None:
    """Put a :class:`LaneResult` in place of each test a lane runs, and those last."""
    mine, rest = [], []
    for item in items:
        lane = lane_of(item.nodeid)
        if lane is None:
            rest.append(item)
            continue
        parent = item.parent
        assert parent is not None
        mine.append(LaneResult.from_parent(parent, name=item.name, lane=lane, original=item))
    items[:] = rest + mine
