"""The six ready topologies, by name.

Example:
    >>> sorted(TOPOLOGIES)
    ['centralized', 'critic_loop', 'debate', 'hierarchical', 'pipeline', 'swarm']
    >>> TOPOLOGIES["pipeline"].trace_topology
    'planner_executor_critic'
    >>> check_options("debate", {"rounds": "3"})
    {'rounds': 3}
    >>> check_options("debate", {"round": 3})
    Traceback (most recent call last):
    ...
    orchestrace.errors.ConfigError: unknown option 'round' for topology 'debate'; did you mean 'rounds'? (its options: aggregate, debaters, patience, rounds)

Topology options (``-O KEY=VALUE`` on the command line, keyword arguments of ``run``) are
checked before a run starts (:func:`check_options`; unknown names get a "did you mean"):

* ``chunks`` (centralized, hierarchical, swarm, pipeline, critic_loop): integer >= 1, sequential
  turns per part;
* ``roles`` (centralized, hierarchical, swarm): non-empty list of worker role names;
  ``worker_role``: one role name;
* ``managers`` (hierarchical): integer >= 1; ``depth`` (levels of managers, 1 to 64),
  ``branching`` (sub-managers per manager) and ``stages`` (orchestrator stages): integers >= 1;
* ``gossip`` (swarm): probability in [0, 1];
* ``patience`` (swarm, debate, critic_loop, pipeline): seconds >= 0 to wait for a message;
* ``rounds``: debate exchange rounds (>= 1), critic_loop attempts (>= 1), pipeline re-dos after
  a rejected answer (>= 0);
* ``debaters`` (debate): integer >= 2.

Counts are at most 1,000,000; NaN and infinities are refused.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrace._safe import display
from orchestrace.errors import ConfigError
from orchestrace.runtime.core import AgentFn
from orchestrace.runtime.topologies import (
    centralized,
    critic_loop,
    debate,
    hierarchical,
    pipeline,
    swarm,
)

__all__ = [
    "OPTIONS",
    "TOPOLOGIES",
    "OptionSpec",
    "TopologySpec",
    "check_options",
    "get_topology",
    "team_note",
    "team_use",
]


@dataclass(frozen=True)
class TopologySpec:
    """A topology: its orchestrator and how traces name it."""

    name: str
    root: AgentFn
    trace_topology: str
    description: str


TOPOLOGIES: dict[str, TopologySpec] = {
    s.name: s
    for s in (
        TopologySpec(
            "centralized", centralized.orchestrate, "centralized", "orchestrator + workers, combine"
        ),
        TopologySpec(
            "pipeline",
            pipeline.orchestrate,
            "planner_executor_critic",
            "planner, executor by delegation, critic",
        ),
        TopologySpec("debate", debate.orchestrate, "debate", "debaters revise, judge picks"),
        TopologySpec(
            "swarm", swarm.orchestrate, "swarm", "parallel workers report to an aggregator"
        ),
        TopologySpec(
            "hierarchical",
            hierarchical.orchestrate,
            "hierarchical",
            "orchestrator -> managers -> workers",
        ),
        TopologySpec(
            "critic_loop",
            critic_loop.orchestrate,
            "critic_loop",
            "worker retries until the critic accepts",
        ),
    )
}
_ALIASES = {
    "planner_executor_critic": "pipeline",
    "critic-loop": "critic_loop",
    "committee": "debate",
    "orchestrator": "centralized",
}


def get_topology(name: str) -> TopologySpec:
    """Look a topology up by name.

    Raises:
        ConfigError: Unknown name (the message lists the known ones).
    """
    spec = TOPOLOGIES.get(_ALIASES.get(name, name))
    if spec is None:
        raise ConfigError(f"unknown topology {name!r}; use one of: {', '.join(sorted(TOPOLOGIES))}")
    return spec


# ---------------------------------------------------------------------------- options
#: Largest count option accepted (rounds, managers, chunks, debaters).
MAX_COUNT = 1_000_000
#: Longest patience accepted, in seconds.
MAX_PATIENCE_S = 1e9


@dataclass(frozen=True)
class OptionSpec:
    """One topology option: its type and range.

    Attributes:
        kind: ``int``, ``float``, ``str`` or ``roles`` (a non-empty list of names).
        low: Smallest value (numbers).
        high: Largest value (numbers).
        help: What it sets.
    """

    kind: Literal["int", "float", "str", "roles"]
    low: float = 0
    high: float = MAX_COUNT
    help: str = ""


_CHUNKS = OptionSpec("int", 1, MAX_COUNT, "number of sequential turns per part")
_ROLES = OptionSpec("roles", help="worker role names, cycled over the workers")
_WORKER_ROLE = OptionSpec("str", help="role of every worker")
_PATIENCE = OptionSpec("float", 0, MAX_PATIENCE_S, "seconds to wait for a message")
_VOTE = OptionSpec(
    "str", help="final answer: the default, or a vote (vote, trust_weighted, trimmed, quorum)"
)
_WORKERS = {"chunks": _CHUNKS, "roles": _ROLES, "worker_role": _WORKER_ROLE}

#: The options each topology reads.
OPTIONS: dict[str, dict[str, OptionSpec]] = {
    "centralized": {**_WORKERS, "aggregate": _VOTE},
    "hierarchical": {
        **_WORKERS,
        "managers": OptionSpec("int", 1, MAX_COUNT, "number of managers"),
        "depth": OptionSpec("int", 1, 64, "levels of managers above the workers"),
        "branching": OptionSpec("int", 1, MAX_COUNT, "sub-managers per manager"),
        "stages": OptionSpec("int", 1, MAX_COUNT, "number of orchestrator stages"),
    },
    "swarm": {
        **_WORKERS,
        "aggregate": _VOTE,
        "gossip": OptionSpec("float", 0, 1, "chance a worker also tells a peer"),
        "patience": _PATIENCE,
    },
    "critic_loop": {
        "chunks": _CHUNKS,
        "patience": _PATIENCE,
        "rounds": OptionSpec("int", 1, MAX_COUNT, "number of attempts"),
    },
    "debate": {
        "aggregate": _VOTE,
        "debaters": OptionSpec("int", 2, MAX_COUNT, "number of debaters"),
        "patience": _PATIENCE,
        "rounds": OptionSpec("int", 1, MAX_COUNT, "number of exchange rounds"),
    },
    "pipeline": {
        "chunks": _CHUNKS,
        "patience": _PATIENCE,
        "rounds": OptionSpec("int", 0, MAX_COUNT, "number of re-dos after a rejected answer"),
    },
}

_INT_TEXT = re.compile(r"[+-]?\d{1,30}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _bad(topology: str, name: str, spec: OptionSpec, value: Any) -> ConfigError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if spec.kind == "int":
        want = f"an integer from {_num(spec.low)} to {_num(spec.high)}"
    elif spec.kind == "float":
        want = f"a number from {_num(spec.low)} to {_num(spec.high)}"
    elif spec.kind == "str":
        want = "a non-empty name"
    else:
        want = 'a non-empty list of role names, e.g. -O \'roles=["expert","novice"]\''
    return ConfigError(
        f"option {name!r} for topology {topology!r} must be {want} (got {shown}); "
        f"it sets the {spec.help}"
    )


def _coerce(topology: str, name: str, spec: OptionSpec, value: Any) -> Any:
    bad = _bad(topology, name, spec, value)
    if spec.kind == "str":
        if not isinstance(value, str) or not value.strip() or len(value) > 200:
            raise bad
        return value
    if spec.kind == "roles":
        if (
            not isinstance(value, list | tuple)
            or not value
            or len(value) > MAX_COUNT
            or not all(isinstance(r, str) and r.strip() and len(r) <= 200 for r in value)
        ):
            raise bad
        return list(value)
    if isinstance(value, bool):
        raise bad
    number: float | int
    if isinstance(value, str):
        text = value.strip()
        if spec.kind == "int":
            if not _INT_TEXT.fullmatch(text):
                raise bad
            number = int(text)
        else:
            try:
                number = float(text)
            except ValueError:
                raise bad from None
    elif isinstance(value, int | float):
        number = value
    else:
        raise bad
    if isinstance(number, float) and not math.isfinite(number):
        raise bad
    if spec.kind == "int":
        if isinstance(number, float):
            if not number.is_integer():
                raise bad
            number = int(number)
    else:
        number = float(number)
    if not spec.low <= number <= spec.high:
        raise bad
    return number


def check_options(topology: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check a topology's options before a run: known names, right types, in range.

    Args:
        topology: Topology name (or alias).
        options: Option name -> value (numbers may be given as text, e.g. from ``-O``).

    Returns:
        The options with numbers converted (``"3"`` -> ``3``).

    Raises:
        ConfigError: Unknown topology, unknown option name (with a "did you mean" hint), or a
            value of the wrong type or out of range (the message names the option and range).
    """
    name = get_topology(topology).name
    known = OPTIONS.get(name, {})
    out: dict[str, Any] = {}
    for key, value in options.items():
        spec = known.get(key)
        if spec is None:
            listed = ", ".join(sorted(known)) or "none"
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            shown = repr(key) if len(repr(key)) <= 60 else repr(key)[:57] + "..."
            raise ConfigError(
                f"unknown option {shown} for topology {name!r}{hint} (its options: {listed})"
            )
        out[key] = _coerce(name, key, spec, value)
        if key == "aggregate":
            default = "judge" if name == "debate" else "combine"
            votes = ("vote", "trust", "trust_weighted", "trimmed", "quorum")
            if out[key] not in (default, *votes):
                raise ConfigError(
                    f"option 'aggregate' for topology {name!r} must be {default!r} or a vote "
                    f"({', '.join(votes)}); got {out[key]!r}; e.g. -O aggregate=vote"
                )
    return out


def team_use(
    topology: str, task_name: str, size: int, agents: int, options: Mapping[str, Any]
) -> dict[str, Any] | None:
    """What a topology does with ``agents`` when it cannot use exactly that many.

    Every topology reads ``--agents`` differently: centralized, swarm and hierarchical start
    one worker per part (at most one per item of the task); debate starts ``debaters`` (7 by
    default); critic_loop always has one worker and one critic; pipeline has one planner,
    executor and critic, and ``--agents`` sets how many parts the executor solves in turn.

    Args:
        topology: Topology name.
        task_name: The task's name.
        size: The task's number of items.
        agents: The requested team size (``--agents``).
        options: Checked topology options.

    Returns:
        ``None`` when the run uses ``agents`` workers; otherwise ``requested``, ``used`` (the
        number it will use), ``unit`` (``workers``, ``debaters``, ``parts``...) and ``note``
        (one line saying so, recorded in the trace's ``meta.team``).

    Example:
        >>> team_use("debate", "math-v0", 64, 300, {})["used"]
        7
        >>> team_use("swarm", "wide-search-v1", 400, 300, {}) is None
        True
    """
    name = get_topology(topology).name
    shown = display(task_name, 60)

    def out(used: int, unit: str, note: str) -> dict[str, Any]:
        return {"requested": agents, "used": used, "unit": unit, "note": note}

    if name in ("centralized", "swarm", "hierarchical") and 0 < size < agents:
        return out(
            size,
            "workers",
            f"note: {shown} has {size} items; using {size} workers "
            f"(pass --task-size {agents} for more)",
        )
    if name == "hierarchical":
        stages = int(options.get("stages", 1))
        if stages > agents:
            return out(
                stages,
                "workers",
                f"note: using {stages} workers, one per stage (--agents {agents} is fewer than "
                f"-O stages={stages})",
            )
        if "managers" in options and int(options["managers"]) > agents:
            return out(
                agents,
                "managers",
                f"note: using {agents} managers (at most one per worker; --agents is {agents})",
            )
    if name == "pipeline":
        if 0 < size < agents:
            return out(
                size,
                "parts",
                f"note: {shown} has {size} items; using {size} parts "
                f"(pass --task-size {agents} for more)",
            )
        if agents > 1:
            return out(
                1,
                "executors",
                f"note: pipeline runs one planner, one executor and one critic; --agents {agents} "
                "sets the number of parts the executor solves in turn",
            )
    if name == "debate":
        n = max(2, min(agents, int(options.get("debaters", 7))))
        if n != agents:
            return out(
                n,
                "debaters",
                f"note: debate uses {n} debaters and a judge (--agents {agents}); "
                "pass -O debaters=N and --agents N for another number",
            )
    if name == "critic_loop" and agents != 1:
        return out(
            1,
            "workers",
            f"note: critic_loop uses one worker and one critic (--agents {agents} is not used)",
        )
    return None


def team_note(
    topology: str, task_name: str, size: int, agents: int, options: Mapping[str, Any]
) -> str | None:
    """A one-line note when the team a topology uses differs from the requested ``agents``.

    Args:
        topology: Topology name.
        task_name: The task's name.
        size: The task's number of items.
        agents: The requested team size (``--agents``).
        options: Checked topology options.

    Returns:
        The note (``None`` when the requested size is what the run uses); see
        :func:`team_use`.

    Example:
        >>> team_note("swarm", "arith-mapreduce-v0", 64, 300, {})
        'note: arith-mapreduce-v0 has 64 items; using 64 workers (pass --task-size 300 for more)'
    """
    use = team_use(topology, task_name, size, agents, options)
    return None if use is None else str(use["note"])
