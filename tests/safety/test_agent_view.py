"""What an agent can reach through its context cannot sign for another agent or change the
policy the runtime enforces."""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrace.runtime import run
from orchestrace.runtime._keys import Keyring, RunSecret
from orchestrace.runtime.context import Context
from orchestrace.runtime.security import RolePolicy
from orchestrace.safety import Defenses
from orchestrace.safety.attacks import Collusion, Escalation, run_attacked


def _reachable(obj: Any, seen: set[int], depth: int = 0) -> list[Any]:
    """Every object reachable from ``obj`` through public attributes, mappings and sequences."""
    if id(obj) in seen or depth > 8:
        return []
    seen.add(id(obj))
    out = [obj]
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = [v for k, v in vars(obj).items() if not k.startswith("_")]
    else:
        items = []
    for item in items:
        out += _reachable(item, seen, depth + 1)
    return out


def test_the_config_agents_read_holds_no_secret(monkeypatch) -> None:
    secret = RunSecret.new()
    defenses = dataclasses.replace(Defenses.all(), secret=secret)
    seen: list[Any] = []
    real = Context.send

    async def send(self: Context, *args: Any, **kw: Any) -> Any:
        seen.append(self.config)
        return await real(self, *args, **kw)

    monkeypatch.setattr(Context, "send", send)
    run("swarm", "arith-mapreduce-v0", agents=3, seed=0, defenses=defenses)
    assert seen, "no agent sent a message"
    for cfg in seen:
        found = _reachable(cfg, set())
        assert not [o for o in found if isinstance(o, (RunSecret, Keyring))]
        assert cfg.defenses.secret is None


def test_a_worker_rewriting_the_policy_it_can_read_gains_nothing(monkeypatch) -> None:
    for meth in ("spawn", "stop", "aggregate"):
        real = getattr(Context, meth)

        def wrap(real: Any) -> Any:
            async def f(self: Context, *a: Any, **k: Any) -> Any:
                pol = self.config.defenses.capabilities
                if pol is not None and self.role != "orchestrator":
                    pol.roles[self.role] = RolePolicy(  # type: ignore[index]
                        may_spawn=True,
                        may_stop=True,
                        may_aggregate=True,
                        may_delegate=True,
                        may_endorse=True,
                    )
                return await real(self, *a, **k)

            return f

        monkeypatch.setattr(Context, meth, wrap(real))
    for topo in ("centralized", "swarm", "pipeline"):
        attack = Escalation()
        res = run_attacked(
            topo,
            "arith-mapreduce-v0",
            attack,
            defenses=Defenses.all(),
            agents=3,
            seed=0,
            task_size=8,
        )
        denied = [
            e
            for e in res.trace.events
            if e.type == "safety_event" and (e.attrs or {}).get("kind") == "capability_denied"
        ]
        assert denied, topo
        assert not attack.succeeded(res.trace), topo


def test_collusion_larger_than_the_team_is_refused() -> None:
    reason = Collusion(agents=10).applies_to_team("swarm", 3)
    assert reason is not None and "use agents >= 10" in reason
    assert Collusion(agents=3).applies_to_team("swarm", 3) is None
