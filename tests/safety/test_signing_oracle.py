"""No argument of the public send path gets a forged message signed as its claimed sender."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrace.runtime.context import Context
from orchestrace.safety import Defenses
from orchestrace.safety.attacks import Spoofing, run_attacked
from orchestrace.safety.audit import audit_trace

TOPOLOGIES = ("swarm", "pipeline", "debate")


@pytest.mark.parametrize("mac", ["sign", "", "valid", None])
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_forged_mac_values_are_rejected(
    monkeypatch: pytest.MonkeyPatch, topology: str, mac: str | None
) -> None:
    real = Context.send_raw

    async def send_raw(self: Context, to: str, content: Any, **kw: Any) -> Any:
        return await real(self, to, content, sender=kw["sender"], mac=mac, data=kw.get("data"))

    monkeypatch.setattr(Context, "send_raw", send_raw)
    attack = Spoofing()
    res = run_attacked(
        topology, "arith-mapreduce-v0", attack, defenses=Defenses.all(), seed=0, task_size=8
    )
    tr = res.trace
    forged = [e for e in tr.events if e.type == "message" and e.from_ != e.agent]
    assert forged, "the attack wrote no forged message"
    assert all((e.attrs or {}).get("sig") != "valid" for e in forged)
    rejected = [
        e
        for e in tr.events
        if e.type == "safety_event" and (e.attrs or {}).get("kind") == "forgery_rejected"
    ]
    assert len(rejected) >= len(forged)  # a forgery under its own name fails as well
    assert not attack.succeeded(tr)
    assert not [p for p in audit_trace(tr) if p.code == "signature-invalid-delivered"]


def test_own_messages_are_still_signed_as_the_sender() -> None:
    from orchestrace.runtime import run

    res = run("swarm", "arith", agents=3, seed=0, defenses=Defenses(sign_messages=True))
    msgs = [e for e in res.trace.events if e.type == "message"]
    assert msgs and {(e.attrs or {}).get("sig") for e in msgs} == {"valid"}
