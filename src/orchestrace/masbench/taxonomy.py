"""Failure-taxonomy detectors over traces (after the MAST taxonomy of MAS failures).

Each detector reads one trace and returns :class:`Finding` objects naming the events that show
the failure. The three MAST categories and the modes detected:

| category | mode (MAST id) | what the detector looks for |
| --- | --- | --- |
| specification | ``step_repetition`` (FM-1.3) | an agent repeats the same output or tool call ``min_repeats`` times in a row |
| specification | ``unaware_of_termination`` (FM-1.5) | the run ended on a budget or a forced stop, the orchestrator never decided to stop, or agents kept working after it stopped |
| misalignment | ``information_withholding`` (FM-2.4) | an agent produced an answer but never passed anything on (no return, no message) |
| misalignment | ``ignored_input`` (FM-2.5) | a message or result reached an agent that acted afterwards without consuming it, or a rejection it received was overridden |
| verification | ``premature_termination`` (FM-3.1) | the orchestrator stopped while agents it spawned had not returned |
| verification | ``no_verification`` (FM-3.2) | the final answer was never checked: no critique, no judge, no vote over two or more agreeing results |
| verification | ``incorrect_verification`` (FM-3.3) | a check approved a wrong answer (a critic accepted it, a judge picked it over a correct one) |

Example:
    >>> from orchestrace.runtime import run
    >>> trace = run("critic_loop", "arith", agents=3, seed=1).trace
    >>> sorted({f.mode for f in detect(trace)})  # the critic accepted a wrong answer
    ['incorrect_verification']
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrace.credit.base import root_agents
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Event, Trace

__all__ = ["CATEGORIES", "DETECTORS", "Finding", "detect", "taxonomy_counts"]

#: MAST category of each mode.
CATEGORIES = {
    "step_repetition": "specification",
    "unaware_of_termination": "specification",
    "information_withholding": "misalignment",
    "ignored_input": "misalignment",
    "premature_termination": "verification",
    "no_verification": "verification",
    "incorrect_verification": "verification",
}
_MAST = {
    "step_repetition": "FM-1.3",
    "unaware_of_termination": "FM-1.5",
    "information_withholding": "FM-2.4",
    "ignored_input": "FM-2.5",
    "premature_termination": "FM-3.1",
    "no_verification": "FM-3.2",
    "incorrect_verification": "FM-3.3",
}


@dataclass(frozen=True)
class Finding:
    """One detected failure: its mode, MAST category and id, the events, and why."""

    mode: str
    events: tuple[str, ...]
    detail: str
    category: str = field(default="")
    mast: str = field(default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "category", CATEGORIES.get(self.mode, "other"))
        object.__setattr__(self, "mast", _MAST.get(self.mode, ""))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "mode": self.mode,
            "category": self.category,
            "mast": self.mast,
            "events": list(self.events),
            "detail": self.detail,
        }


def _roots(trace: Trace) -> set[str]:
    return set(root_agents(trace))


def _final_stop(trace: Trace, roots: set[str]) -> Event | None:
    stops = [
        e
        for e in trace.events
        if e.agent in roots and e.type == "orchestrator_decision" and e.decision == "stop"
    ]
    return stops[-1] if stops else None


def step_repetition(trace: Trace, min_repeats: int = 3) -> list[Finding]:
    """The same agent emits the same output (or tool call) ``min_repeats`` times in a row.

    Only runs with nothing new in between count (no message, result or tool output arrived).
    """
    fresh = {
        e.dst
        for e in trace.edges
        if e.type in ("message", "return", "aggregate", "tool_dependency")
    }
    out = []
    last: dict[str, tuple[str, list[str]]] = {}

    def close(agent: str, key: str, ids: list[str]) -> None:
        if len(ids) >= min_repeats:
            out.append(
                Finding(
                    "step_repetition",
                    tuple(ids),
                    f"{agent} repeated the same {key.split('|', maxsplit=1)[0]} {len(ids)} "
                    "times with no new input",
                )
            )

    for e in trace.events:
        if e.type not in ("llm_call", "tool_call") or e.content is None:
            continue
        key = f"{e.type}|{e.tool or ''}|{e.content}"
        prev = last.get(e.agent)
        if prev is not None and prev[0] == key and e.id not in fresh:
            prev[1].append(e.id)
            continue
        if prev is not None:
            close(e.agent, *prev)
        last[e.agent] = (key, [e.id])
    for agent, (key, ids) in last.items():
        close(agent, key, ids)
    return out


def unaware_of_termination(trace: Trace) -> list[Finding]:
    """The run ended on a budget or forced stop, never decided to stop, or ran on after it."""
    roots = _roots(trace)
    stop = _final_stop(trace, roots)
    if stop is None:
        return [Finding("unaware_of_termination", (), "the orchestrator never decided to stop")]
    text = str(stop.content or "")
    if (stop.attrs or {}).get("budget") or text.startswith(("budget", "forced stop", "deadlock")):
        return [
            Finding(
                "unaware_of_termination",
                (stop.id,),
                f"the run did not end by the orchestrator's decision: {text[:120]}",
            )
        ]
    end = stop.t + stop.dur
    late = [
        e.id
        for e in trace.events
        if e.agent not in roots
        and e.type in ("llm_call", "tool_call", "message")
        and e.t > end + 1e-9
    ]
    if late:
        return [
            Finding(
                "unaware_of_termination",
                tuple(late[:20]),
                f"{len(late)} actions after the orchestrator stopped",
            )
        ]
    return []


def information_withholding(trace: Trace) -> list[Finding]:
    """An agent produced an answer but passed nothing on."""
    roots = _roots(trace)
    produced: dict[str, list[str]] = defaultdict(list)
    shared: set[str] = set()
    for e in trace.events:
        if e.agent in roots:
            continue
        if e.type == "llm_call" and (e.attrs or {}).get("answer") is not None:
            produced[e.agent].append(e.id)
        elif e.type in ("return", "message"):
            shared.add(e.agent)
    return [
        Finding(
            "information_withholding",
            tuple(ids[-1:]),
            f"{agent} produced {len(ids)} answer(s) but never returned or sent one",
        )
        for agent, ids in produced.items()
        if agent not in shared
    ]


def ignored_input(trace: Trace) -> list[Finding]:
    """Delivered inputs the receiver never consumed, and overridden rejections.

    A message or result counts when its receiver acted afterwards without consuming it.
    """
    by_id = {e.id: e for e in trace.events}
    consumed: set[str] = set()
    for edge in trace.edges:
        if edge.type in ("message", "return", "aggregate"):
            consumed.add(edge.src)
    last_action: dict[str, float] = {}
    for e in trace.events:
        last_action[e.agent] = max(last_action.get(e.agent, 0.0), e.t)
    delivered = {by_id[s].agent for s in consumed if s in by_id and by_id[s].type == "message"}
    used_returns = {by_id[s].to for s in consumed if s in by_id and by_id[s].type == "return"}
    out = []
    for e in trace.events:
        if e.type not in ("message", "return") or not e.to or e.id in consumed:
            continue
        if e.type == "return" and (e.to not in used_returns or e.agent in delivered):
            continue  # results travel by message, and this agent's did arrive
        if last_action.get(e.to, -1.0) > e.t + e.dur:
            out.append(
                Finding(
                    "ignored_input",
                    (e.id,),
                    f"{e.type} from {e.agent} to {e.to} was never read, though "
                    f"{e.to} acted afterwards"
                    + (" and read its siblings' results" if e.type == "return" else ""),
                )
            )
    # a rejection reached the orchestrator, which used the rejected answer anyway
    rejections = [
        e
        for e in trace.events
        if e.type == "llm_call"
        and (e.attrs or {}).get("kind") == "critique"
        and (e.attrs or {}).get("answer") == "reject"
    ]
    if rejections:
        roots = _roots(trace)
        stop = _final_stop(trace, roots)
        final = (stop.attrs or {}).get("answer") if stop is not None else None
        last = rejections[-1]
        if final is not None and (last.attrs or {}).get("candidate") == final:
            out.append(
                Finding(
                    "ignored_input",
                    (last.id, *(([stop.id]) if stop else [])),
                    f"the final answer {str(final)[:40]} was rejected by "
                    f"{last.agent} and used anyway",
                )
            )
    return out


def premature_termination(trace: Trace) -> list[Finding]:
    """The orchestrator stopped while agents it spawned had not returned."""
    roots = _roots(trace)
    stop = _final_stop(trace, roots)
    if stop is None:
        return []
    children = [e.to for e in trace.events if e.type == "spawn" and e.agent in roots and e.to]
    returned = {e.agent for e in trace.events if e.type == "return" and e.t <= stop.t + 1e-9}
    missing = [c for c in children if c not in returned]
    if missing:
        return [
            Finding(
                "premature_termination",
                (stop.id,),
                f"stopped with {len(missing)} of {len(children)} spawned agents not "
                f"returned ({', '.join(missing[:5])})",
            )
        ]
    return []


def no_verification(trace: Trace) -> list[Finding]:
    """No critique, no judge, and no vote over two or more agreeing results."""
    for e in trace.events:
        kind = (e.attrs or {}).get("kind")
        if e.type == "llm_call" and kind in ("critique", "judge"):
            return []
        if e.type == "aggregate":
            method = str((e.attrs or {}).get("method", e.content or ""))
            support = (e.attrs or {}).get("support")
            if method in ("vote", "trust") and (support is None or support >= 2):
                return []
    roots = _roots(trace)
    stop = _final_stop(trace, roots)
    ok = trace.metrics.get("task_success")
    tail = "" if ok is None else (" (final answer correct)" if ok else " (final answer wrong)")
    return [
        Finding(
            "no_verification",
            (stop.id,) if stop else (),
            "the final answer was never checked by a critic, judge or vote" + tail,
        )
    ]


def incorrect_verification(trace: Trace) -> list[Finding]:
    """A critic accepted a wrong answer, or a judge picked a wrong candidate."""
    out = []
    for e in trace.events:
        a = e.attrs or {}
        if e.type != "llm_call" or "truth" not in a:
            continue
        if (
            a.get("kind") == "critique"
            and a.get("answer") == "accept"
            and a.get("candidate") != a.get("truth")
        ):
            out.append(
                Finding(
                    "incorrect_verification",
                    (e.id,),
                    f"{e.agent} accepted {str(a.get('candidate'))[:40]}, which is wrong",
                )
            )
        if a.get("kind") == "judge" and isinstance(a.get("answer"), int):
            cands = a.get("candidates") or []
            pick = a["answer"]
            if 0 <= pick < len(cands) and cands[pick] != a["truth"] and a["truth"] in cands:
                out.append(
                    Finding(
                        "incorrect_verification",
                        (e.id,),
                        f"{e.agent} picked a wrong candidate over a correct one",
                    )
                )
    return out


#: Every detector, by mode.
DETECTORS: dict[str, Callable[[Trace], list[Finding]]] = {
    "step_repetition": step_repetition,
    "unaware_of_termination": unaware_of_termination,
    "information_withholding": information_withholding,
    "ignored_input": ignored_input,
    "premature_termination": premature_termination,
    "no_verification": no_verification,
    "incorrect_verification": incorrect_verification,
}


def detect(trace: Trace, modes: list[str] | None = None) -> list[Finding]:
    """Run the detectors (all, or ``modes``) on one trace.

    Raises:
        ConfigError: ``trace`` is not a Trace, or ``modes`` names an unknown failure mode.
    """
    if not isinstance(trace, Trace):
        raise ConfigError(f"detect takes a Trace, not a {type(trace).__name__}")
    if modes is not None:
        given: Any = modes
        if isinstance(given, str) or not hasattr(given, "__iter__"):
            raise ConfigError(f"modes must be a list of failure modes, got {given!r:.80}")
        unknown = [m for m in modes if m not in DETECTORS]
        if unknown:
            raise ConfigError(
                f"unknown failure modes {unknown}; use any of: {', '.join(DETECTORS)}"
            )
    out: list[Finding] = []
    for mode, fn in DETECTORS.items():
        if modes is None or mode in modes:
            out.extend(fn(trace))
    return out


def taxonomy_counts(findings: list[Finding]) -> dict[str, int]:
    """Findings per mode (every mode present, zeros included)."""
    c = Counter(f.mode for f in findings)
    return {m: int(c.get(m, 0)) for m in DETECTORS}
