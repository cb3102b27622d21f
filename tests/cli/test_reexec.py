"""The large-input restart of the CLI (opt-in) never imports code from the current directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrace import cli
from orchestrace.cli import _HUGE_INPUT


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the restart happens on Linux only")
def test_large_input_restart_ignores_a_package_in_the_working_directory(tmp_path: Path) -> None:
    fake = tmp_path / "orchestrace"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text('print("HIJACKED")\n')
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: large enough to trigger the restart, no disk used
        fh.truncate(_HUGE_INPUT + 1)
    exe = Path(sys.executable).with_name("orchestrace")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-P", "-m", "orchestrace"]
    env = {
        k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "ORCHESTRACE_NO_REEXEC")
    }
    env["ORCHESTRACE_HUGE_PAGES"] = "1"
    r = subprocess.run(
        [*cmd, "validate", "big.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert "HIJACKED" not in r.stdout + r.stderr
    assert r.returncode == 1
    assert "big.json: line 1, column 1 (byte 0): malformed JSON" in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("setting", "restarts"),
    [(None, False), ("0", False), ("off", False), ("1", True), ("TRUE", True), (" On ", True)],
)
def test_the_huge_page_restart_happens_only_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, restarts: bool
) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(_HUGE_INPUT + 1)
    for key in ("GLIBC_TUNABLES", "ORCHESTRACE_NO_REEXEC", "ORCHESTRACE_HUGE_PAGES"):
        monkeypatch.delenv(key, raising=False)
    if setting is not None:
        monkeypatch.setenv("ORCHESTRACE_HUGE_PAGES", setting)
    calls: list[dict[str, str]] = []
    monkeypatch.setattr(cli.os, "execve", lambda exe, args, env: calls.append(env))
    monkeypatch.setattr(cli.sys, "platform", "linux")
    cli._maybe_tune_malloc(["validate", str(big)])
    assert bool(calls) is restarts
    if restarts:
        assert calls[0]["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"


def test_a_huge_page_setting_not_understood_is_one_warning_and_no_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(_HUGE_INPUT + 1)
    for key in ("GLIBC_TUNABLES", "ORCHESTRACE_NO_REEXEC"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ORCHESTRACE_HUGE_PAGES", "enable")
    calls: list[object] = []
    monkeypatch.setattr(cli.os, "execve", lambda *a: calls.append(a))
    monkeypatch.setattr(cli.sys, "platform", "linux")
    cli._maybe_tune_malloc(["validate", str(big)])
    err = capsys.readouterr().err
    assert not calls
    assert err.count("\n") == 1 and "ORCHESTRACE_HUGE_PAGES='enable' is not understood" in err
