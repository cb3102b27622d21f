"""Links from the pool's tag values to the toolkit, and what the toolkit can run today.

| pool column | toolkit | runnable when |
| --- | --- | --- |
| ``reward_type`` | reward families R1-R8 (:mod:`orchestrace.rewards`) | the family is registered |
| ``credit_granularity`` | the eight credit units (:mod:`orchestrace.credit`) | the unit is one of ``UNITS`` |
| ``orchestration_form`` | topologies (:mod:`orchestrace.runtime.topologies`) | a ready topology records it |
| ``subdecisions`` (optional) | O1-O5 (:class:`~orchestrace.Decision`, the learning env) | the env learns it |

Runnability is read from the toolkit's registries each time :func:`coverage` runs, so it
changes with the code: a tag value counts as runnable only when a registered implementation
exists. The ``harness`` form, for instance, is a trace label only: no ready topology runs it.

Example:
    >>> LINKS["orchestration_form"]["planner_executor_critic"].target
    'pipeline'
    >>> runnable("orchestration_form", "harness")
    False
    >>> runnable("reward_type", "debate"), runnable("credit_granularity", "NA")
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrace.credit import UNITS, UniformCredit
from orchestrace.errors import OrchestraceError
from orchestrace.learn.env import EnvConfig, make_env
from orchestrace.papers.check import Pool
from orchestrace.papers.taxonomy import NA, OPTIONAL_COLUMNS, PAPER_COLUMNS
from orchestrace.rewards import REGISTRY, make
from orchestrace.runtime import run
from orchestrace.runtime.topologies import TOPOLOGIES

__all__ = [
    "AXES",
    "LINKS",
    "Link",
    "coverage",
    "coverage_markdown",
    "runnable",
]

#: The pool columns linked to the toolkit, in report order.
AXES = ("reward_type", "credit_granularity", "orchestration_form", "subdecisions")


@dataclass(frozen=True)
class Link:
    """Where a tag value lives in the toolkit.

    Attributes:
        column: The pool column.
        value: The tag value.
        target: The toolkit's name for it (``R8``, ``action``, ``pipeline``, ``O5``...), or
            ``None`` when the toolkit has no counterpart.
        how: How to run it with the toolkit (or why it cannot be run).
    """

    column: str
    value: str
    target: str | None
    how: str


def _links() -> dict[str, dict[str, Link]]:
    rewards = {
        "shared": "R1",
        "individual": "R2",
        "role": "R3",
        "process": "R4",
        "tool": "R5",
        "debate": "R6",
        "verifier": "R6",
        "orchestration": "R7",
        "hybrid": "R8",
    }
    credit = {
        "token": "token",
        "turn": "turn",
        "message": "message",
        "tool": "action",
        "agent": "agent",
        "role": "role",
        "orchestrator": "orchestrator",
        "team": "team",
    }
    forms: dict[str, str | None] = {
        "centralized": "centralized",
        "planner_executor_critic": "pipeline",
        "debate": "debate",
        "swarm": "swarm",
        "hierarchical": "hierarchical",
        "harness": None,
    }
    out: dict[str, dict[str, Link]] = {
        "reward_type": {
            v: Link("reward_type", v, t, f"orchestrace reward TRACE (family {t} in a spec)")
            for v, t in rewards.items()
        },
        "credit_granularity": {
            v: Link(
                "credit_granularity",
                v,
                t,
                f"orchestrace credit TRACE --unit {t} --method uniform|discounted",
            )
            for v, t in credit.items()
        },
        "orchestration_form": {
            v: Link(
                "orchestration_form",
                v,
                t,
                f"orchestrace run {t} --task NAME"
                if t
                else "traces may be labelled 'harness' (import, validate), but no ready "
                "topology runs a harness",
            )
            for v, t in forms.items()
        },
        "subdecisions": {
            code: Link(
                "subdecisions",
                code,
                code,
                f"learned in the orchestrate-v0 environment (EnvConfig(learn=('{code}',)))",
            )
            for code in ("O1", "O2", "O3", "O4", "O5")
        },
    }
    return out


#: Column -> tag value -> :class:`Link`; ``NA`` is never linked (it is not a setting).
LINKS: dict[str, dict[str, Link]] = _links()


def _registries() -> dict[str, set[str]]:
    return {
        "reward_type": set(REGISTRY),
        "credit_granularity": set(UNITS),
        "orchestration_form": set(TOPOLOGIES),
        "subdecisions": set(EnvConfig().learn),
    }


def runnable(column: str, value: str, registries: dict[str, set[str]] | None = None) -> bool:
    """Whether the toolkit has a registered implementation of ``value`` of ``column`` today."""
    link = LINKS.get(column, {}).get(value)
    if link is None or link.target is None:
        return False
    reg = registries if registries is not None else _registries()
    return link.target in reg.get(column, set())


#: Built-in tasks the coverage runs try, in order (all run on the simulated backend).
TASKS = ("arith-mapreduce-v0", "wide-search-v0", "multihop-v0", "math-v0")


class _Runner:
    """Runs settings for real on the simulated backend (seeded, virtual time), with a cache."""

    def __init__(self) -> None:
        self._traces: dict[tuple[str, str], Any] = {}
        self._learnable: dict[str, bool] = {}

    def _trace(self, topology: str, task: str) -> Any:
        key = (topology, task)
        if key not in self._traces:
            try:
                self._traces[key] = run(topology, task, agents=4, seed=0).trace
            except OrchestraceError:
                self._traces[key] = None
        return self._traces[key]

    def learnable(self, code: str) -> bool:
        """Whether the orchestration environment takes a step learning decision ``code``."""
        if code not in self._learnable:
            ok = False
            try:
                env = make_env("orchestrate-v0", learn=(code,))
                try:
                    env.reset(seed=0)
                    env.step(env.action_space.sample(seed=0))
                    ok = True
                finally:
                    env.close()
            except OrchestraceError:
                ok = False
            self._learnable[code] = ok
        return self._learnable[code]

    def together(self, settings: dict[str, str]) -> str | None:
        """Run the linked settings together; return where they ran, or ``None``.

        ``settings``: column -> toolkit target, for reward family, credit unit and topology.
        The topology (every ready one when not given) runs each built-in task in turn; the
        settings ran when the reward family gives a value on that trace and credit at the
        unit, for that reward, reaches at least one unit.
        """
        topo = settings.get("orchestration_form")
        family = settings.get("reward_type")
        unit = settings.get("credit_granularity")
        for name in [topo] if topo else list(TOPOLOGIES):
            for task in TASKS:
                tr = self._trace(name, task)
                if tr is None:
                    continue
                try:
                    reward = make(family)([tr])[0] if family else None
                    if family and reward is None:
                        continue
                    if unit and not UniformCredit().assign(tr, unit, reward=reward).rows:
                        continue
                except (OrchestraceError, ValueError):
                    continue
                return f"{name} on {task}"
        return None


def _settings(row: dict[str, str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for col in AXES:
        raw = row.get(col, "")
        if not raw or raw == NA:
            continue
        values = raw.split(";") if col == "subdecisions" else [raw]
        out += [(col, v) for v in values]
    return out


def _verify(runner: _Runner, col: str, target: str) -> str | None:
    if col == "subdecisions":
        return "orchestrate-v0" if runner.learnable(target) else None
    return runner.together({col: target})


def coverage(pool: Pool) -> dict[str, Any]:
    """Per entry, which of its tagged settings the toolkit can run today, and which not.

    A setting counts as runnable only when the toolkit registers an implementation of it and
    running it works: each entry's reward family, credit unit and topology are run together
    for real on the simulated backend (see :data:`TASKS`); when they do not run together,
    each is run alone. Sub-decisions O1-O5 count when the orchestration environment takes a
    step learning them.

    Returns:
        ``entries``: one ``{"key", "line", "settings": [{"column", "value", "target",
        "runnable", "how"}], "together", "runnable", "not_runnable"}`` per entry with at least
        one tagged setting (``together``: where all its runnable reward, credit and
        orchestration settings ran in one run, or ``None``); ``untagged``: keys of entries
        with none; ``values``: per column and value (every value of the taxonomy, used or
        not) the number of entries, the toolkit target and whether it runs, so values no
        entry uses (white spaces) show up with 0 entries.
    """
    reg = _registries()
    runner = _Runner()
    alone: dict[tuple[str, str], bool] = {}

    def runs_alone(col: str, value: str) -> bool:
        if (col, value) not in alone:
            link = LINKS[col].get(value)
            target = link.target if link is not None else None
            alone[(col, value)] = (
                target is not None
                and runnable(col, value, reg)
                and _verify(runner, col, target) is not None
            )
        return alone[(col, value)]

    entries: list[dict[str, Any]] = []
    untagged: list[str] = []
    used: dict[tuple[str, str], int] = {}
    for row, line in zip(pool.papers.rows, pool.papers.lines, strict=True):
        tagged = _settings(row)
        if not tagged:
            untagged.append(row["key"])
            continue
        joint = {
            col: str(LINKS[col][v].target)
            for col, v in tagged
            if col != "subdecisions" and runnable(col, v, reg)
        }
        where = runner.together(joint) if joint else None
        settings = []
        for col, value in tagged:
            used[(col, value)] = used.get((col, value), 0) + 1
            link = LINKS[col].get(value)
            if col != "subdecisions" and col in joint and where is not None:
                ok = True
            else:
                ok = runs_alone(col, value)
            settings.append(
                {
                    "column": col,
                    "value": value,
                    "target": link.target if link else None,
                    "runnable": ok,
                    "how": link.how if link else "no counterpart in the toolkit",
                }
            )
        n_ok = sum(1 for s in settings if s["runnable"])
        entries.append(
            {
                "key": row["key"],
                "line": line,
                "settings": settings,
                "together": where,
                "runnable": n_ok,
                "not_runnable": len(settings) - n_ok,
            }
        )
    values: dict[str, list[dict[str, Any]]] = {}
    for col in AXES:
        spec = PAPER_COLUMNS.get(col) or OPTIONAL_COLUMNS[col]
        names = [v for v in spec.values if v != NA] if spec.values else list(LINKS[col])
        values[col] = [
            {
                "value": v,
                "entries": used.get((col, v), 0),
                "target": LINKS[col][v].target,
                "runnable": runs_alone(col, v),
                "how": LINKS[col][v].how,
            }
            for v in names
        ]
    return {"entries": entries, "untagged": untagged, "values": values}


def coverage_markdown(cov: dict[str, Any]) -> str:
    """The coverage as Markdown: one row per entry, then one table per linked column.

    Example:
        >>> md = coverage_markdown({"entries": [{"key": "a", "line": 2, "settings": [
        ...     {"column": "orchestration_form", "value": "harness", "target": None,
        ...      "runnable": False, "how": "-"}], "runnable": 0, "not_runnable": 1}],
        ...     "untagged": [], "values": {}})
        >>> print(md.splitlines()[6])
        | `a` |  |  | harness (no) |  | 0 of 1 | no |
    """
    ents = cov["entries"]
    full = sum(1 for e in ents if not e["not_runnable"] and e.get("together"))
    none = sum(1 for e in ents if not e["runnable"])
    out = [
        "# What the toolkit can run",
        "",
        f"{len(ents)} entries tag a setting: {full} run whole (every setting, together), "
        f"{len(ents) - full - none} in part, {none} not at all; {len(cov['untagged'])} tag none.",
        "",
        "| entry | reward | credit | orchestration | sub-decisions | runnable | ran together on |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in cov["entries"]:
        cells: dict[str, list[str]] = {c: [] for c in AXES}
        for s in e["settings"]:
            arrow = f"{s['value']} -> {s['target']}" if s["target"] else s["value"]
            cells[s["column"]].append(f"{arrow} ({'yes' if s['runnable'] else 'no'})")
        total = e["runnable"] + e["not_runnable"]
        out.append(
            f"| `{e['key']}` | "
            + " | ".join(", ".join(cells[c]) for c in AXES)
            + f" | {e['runnable']} of {total} | {e.get('together') or 'no'} |"
        )
    if cov["untagged"]:
        out += ["", f"No setting tagged ({len(cov['untagged'])}): " + ", ".join(cov["untagged"])]
    for col, rows in cov["values"].items():
        out += [
            "",
            f"## {col}",
            "",
            "| value | entries | toolkit | runs today |",
            "|---|---:|---|---|",
        ]
        for r in rows:
            mark = "yes" if r["runnable"] else "no: " + r["how"]
            out.append(f"| `{r['value']}` | {r['entries']} | {r['target'] or '-'} | {mark} |")
    return "\n".join(out) + "\n"
