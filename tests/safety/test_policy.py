"""Capability policies: TOML and mappings in, one-line errors for every malformed one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrace.errors import ConfigError
from orchestrace.safety import CapabilityPolicy, Defenses, RolePolicy

GOOD = """
side_effect_tools = ["lookup"]

[roles.orchestrator]
may_spawn = true
may_delegate = true
may_stop = true
may_aggregate = true
tools = ["*"]

[roles.worker]
tools = ["lookup"]

[default]
tools = []
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(text)
    return p


def test_policy_from_toml(tmp_path: Path) -> None:
    p = CapabilityPolicy.from_toml(_write(tmp_path, GOOD))
    assert p.allows("orchestrator", "stop") and p.allows("orchestrator", "tool", "anything")
    assert p.allows("worker", "tool", "lookup") and not p.allows("worker", "tool", "search")
    assert not p.allows("worker", "spawn") and not p.allows("critic", "tool", "lookup")
    assert p.side_effect_tools == ("lookup",)
    assert CapabilityPolicy.from_dict(p.to_dict()) == p
    assert Defenses.from_dict(Defenses(capabilities=p).to_dict()).capabilities == p


def test_default_policy_allows_what_the_topologies_do() -> None:
    p = CapabilityPolicy.default_policy()
    assert p.role("orchestrator") == RolePolicy(True, True, True, True, may_endorse=True)
    for role, action in [("manager", "spawn"), ("aggregator", "aggregate"), ("judge", "aggregate")]:
        assert p.allows(role, action)
    for action in ("spawn", "delegate", "stop", "aggregate"):
        assert not p.allows("worker", action)
    with pytest.raises(ConfigError, match="unknown action 'fly'"):
        p.allows("worker", "fly")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("roles = 3", "'roles' must be a non-empty table of role tables"),
        ("[default]\ntools = []", "missing key 'roles'; add e.g. [roles.orchestrator]"),
        ("[roles]", "'roles' must be a non-empty table of role tables"),
        (
            "[roles.worker]\nmay_fly = true",
            "unknown key 'may_fly' in role 'worker'; use: may_spawn",
        ),
        ("[roles.worker]\nmay_spawn = 'yes'", "roles.worker.may_spawn must be true or false"),
        ("[roles.worker]\ntools = 'lookup'", "roles.worker.tools must be a list of tool names"),
        ("[roles.worker]\ntools = [1]", "roles.worker.tools must be a list of tool names"),
        ("roles = {worker = 1}", "role 'worker' must be a table of may_spawn"),
        ("[roles.worker]\n[extra]", "unknown key 'extra'; a policy has: roles, default"),
        ("side_effect_tools = 'x'\n[roles.worker]", "side_effect_tools must be a list"),
        ("[roles.worker\n", "not valid TOML"),
    ],
)
def test_malformed_policies(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        CapabilityPolicy.from_toml(path)
    line = str(err.value)
    assert message in line and "\n" not in line
    assert line.startswith(str(path))


def test_unreadable_policy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the policy"):
        CapabilityPolicy.from_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="cannot read the policy"):
        CapabilityPolicy.from_toml(bad)


@pytest.mark.parametrize("option", ["--policy", "--defenses"])
def test_policy_fifo_without_writer_fails_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """A FIFO nobody writes to (or a device, or a directory) is refused, never waited on."""
    import os
    import time

    from orchestrace.io import _common
    from orchestrace.runtime.security import defenses_from

    # the wait is read when orchestrace.io is imported: set it where the reader looks it up
    monkeypatch.setattr(_common, "FIFO_WRITER_WAIT_S", 0.5)
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="cannot read"):
        if option == "--policy":
            defenses_from(None, fifo)
        else:
            defenses_from(str(fifo))
    assert time.monotonic() - t0 < 10
    with pytest.raises(ConfigError, match="not a regular file"):
        defenses_from(None, "/dev/null")
    with pytest.raises(ConfigError, match="it is a directory"):
        defenses_from(str(tmp_path))


@pytest.mark.parametrize(
    ("roles", "tools", "message"),
    [
        (["worker"], ["lookup"], "unknown role 'wizard'; roles of this run: orchestrator, worker"),
        (["wizard"], [], "unknown tool 'lookup'; tools of this run: (none)"),
    ],
)
def test_names_checked(roles: list[str], tools: list[str], message: str) -> None:
    p = CapabilityPolicy.from_dict({"roles": {"wizard": {"tools": ["lookup"]}}})
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        p.check_names(roles, tools)


def test_defenses_from_dict_reports_the_policy_key() -> None:
    data: dict[str, Any] = {"capabilities": {"roles": {"w": {"oops": 1}}}}
    with pytest.raises(
        ConfigError, match=r"^defenses.capabilities: unknown key 'oops' in role 'w'"
    ):
        Defenses.from_dict(data)
    with pytest.raises(ConfigError, match=r"defenses.capabilities must be a CapabilityPolicy"):
        Defenses(capabilities={"roles": {}})  # type: ignore[arg-type]


def test_roles_the_run_cannot_have_are_refused() -> None:
    from orchestrace.runtime import run

    p = CapabilityPolicy.from_dict({"roles": {"critic": {"may_spawn": True}}})
    with pytest.raises(
        ConfigError,
        match=r"unknown role 'critic'; roles of this run: aggregator, orchestrator, "
        r"worker$",
    ):
        run("swarm", "arith", agents=2, defenses=Defenses(capabilities=p))
    # the built-in policy applies to every topology
    run("centralized", "arith", agents=2, defenses=Defenses.all())


def test_unlisted_orchestrator_keeps_the_default_rules() -> None:
    from orchestrace.runtime import run

    p = CapabilityPolicy.from_dict({"roles": {"worker": {"tools": []}}})
    assert p.allows("orchestrator", "spawn") and p.allows("orchestrator", "stop")
    assert not p.allows("worker", "spawn")
    res = run("centralized", "arith", agents=2, defenses=Defenses(capabilities=p))
    assert res.answer is not None
    assert not any(e.type == "safety_event" for e in res.trace.events)


def test_run_ended_by_a_denied_orchestrator_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrace.cli import main

    pol = _write(tmp_path, "[roles.orchestrator]\nmay_spawn = false\n")
    out = tmp_path / "t.json"
    rc = main(["run", "centralized", "--task", "arith", "--policy", str(pol), "-o", str(out)])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: the run's orchestrator was stopped by the capability policy (CapabilityDenied: "
        "agent 'orchestrator' (role 'orchestrator') may not spawn under the capability policy); "
        "give the orchestrator role may_spawn and may_stop in the policy (--policy/--defenses)"
    ]
