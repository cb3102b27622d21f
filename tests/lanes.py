"""Background lanes: with ``-n N``, a few files run in a fresh ``pytest`` of their own.

Most of the Ray files' time is waiting (Ray starting, a worker dying, a cluster refusing), and
the snapshot-fork file needs a fresh interpreter anyway (``test_snapshot_forks.py``). Run on an
xdist worker, they held it for over a minute while its core sat partly idle. Instead the
controller starts them as soon as the workers have collected: one ``pytest`` per lane, one
lane after the other, next to the workers. Each of their tests is still an item of the
session (same node id and markers), collected last; it waits for its lane and reports what
the test did there: passed, skipped (with the reason) or failed (with the failure's text).
Without xdist the files run in the test process as usual.

The controller makes a directory for the lanes (``ORCHESTRACE_LANE_DIR``, inherited by the
workers) and removes it at the end. A lane's ``pytest`` writes one record per test to
``LANE.tests.json`` (:func:`record`, :func:`write_records`); when it has ended, the controller
writes ``LANE.done.json`` (exit status, records, the output's end), which the items wait for.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

#: Each lane: its name, its files (under ``tests/``) and what its environment adds.
LANES: list[tuple[str, tuple[str, ...], dict[str, str]]] = []

DIR_ENV = "ORCHESTRACE_LANE_DIR"
REPORT_ENV = "ORCHESTRACE_LANE_REPORT"
#: The longest a lane may run, and an item waits for it.
LANE_TIMEOUT_S = 1800.0

_RECORDS: dict[str, dict[str, Any]] = {}


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
    """Keep what a phase of a test did (in a lane's ``pytest``: ``REPORT_ENV`` is set)."""
    if not os.environ.get(REPORT_ENV):
        return
    rec = _RECORDS.setdefault(report.nodeid, {"outcome": "passed", "text": "", "reason": ""})
    if report.failed:
        rec["outcome"] = "failed"
        rec["text"] += f"--- {report.when}\n{report.longreprtext}\n"
    elif report.skipped and hasattr(report, "wasxfail") and rec["outcome"] == "passed":
        rec["outcome"] = "xfailed"
        rec["reason"] = report.wasxfail
    elif report.skipped and rec["outcome"] == "passed":
        rec["outcome"] = "skipped"
        longrepr = report.longrepr
        rec["reason"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def write_records() -> None:
    """Write the records (in a lane's ``pytest``), whole or not at all."""
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(_RECORDS, fh)
    os.replace(tmp, path)


# --------------------------------------------------------------- in the controller
class Lanes:
    """Starts the lanes once the workers have collected; stops them at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.dir = Path(tempfile.mkdtemp(prefix="orchestrace-lanes-"))
        os.environ[DIR_ENV] = str(self.dir)  # the workers start after this: they inherit it
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
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

    def _run(self, jobs: list[tuple[str, list[str], dict[str, str]]]) -> None:
        for name, ids, extra in jobs:
            report = self.dir / f"{name}.tests.json"
            out = self.dir / f"{name}.out"
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
            env.pop(DIR_ENV, None)
            env.update(extra)
            env[REPORT_ENV] = str(report)
            cmd = [sys.executable, "-m", "pytest", *ids, "-q", "-p", "no:cacheprovider"]
            cmd += ["-p", "no:xdist", "-p", "no:randomly"]
            t0 = time.monotonic()
            rc: int | None = None
            if not self._stopping:
                with open(out, "wb") as fh:
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
            text = out.read_text(errors="replace") if out.exists() else ""
            try:
                records = json.loads(report.read_text())
            except (OSError, ValueError):
                records = {}
            done = {"rc": rc, "records": records, "tail": text[-6000:]}
            tmp = self.dir / f"{name}.done.json.tmp"
            tmp.write_text(json.dumps(done))
            os.replace(tmp, self.dir / f"{name}.done.json")
            lines = [ln for ln in text.splitlines() if ln.strip()]
            last = lines[-1].strip("= ") if lines else "no output"
            self.summary.append(
                f"lane {name} ({len(ids)} tests, own pytest): {last}, "
                f"{time.monotonic() - t0:.1f} s wall"
            )

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop a lane still running (an interrupted session) and remove the directory."""
        self._stopping = True
        self._kill()
        if self._thread is not None:
            self._thread.join(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.environ.pop(DIR_ENV, None)


# --------------------------------------------------------------- in the workers
class LaneResult(pytest.Item):
    """A test that ran in a lane: waits for the lane and reports what the test did there."""

    def __init__(self, *, lane: str, original: pytest.Item, **kw: Any) -> None:
        super().__init__(**kw)
        self.lane = lane
        self.own_markers = list(original.own_markers)
        self.keywords.update(original.keywords)
        self._line = original.location[1]
        assert self.nodeid == original.nodeid, (self.nodeid, original.nodeid)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, self._line, f"{self.name} (in lane {self.lane})"

    def runtest(self) -> None:
        done = Path(os.environ[DIR_ENV]) / f"{self.lane}.done.json"
        end = time.monotonic() + LANE_TIMEOUT_S + 60
        while not done.exists():
            if time.monotonic() > end:
                pytest.fail(f"lane {self.lane} did not finish", pytrace=False)
            time.sleep(0.05)
        result = json.loads(done.read_text())
        rec = result["records"].get(self.nodeid)
        if rec is None:
            pytest.fail(
                f"{self.nodeid} did not run in lane {self.lane} (its pytest exited with "
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
