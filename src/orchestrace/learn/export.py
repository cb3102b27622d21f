"""Export orchestrator turns with advantages for LLM trainers (TRL, verl).

One row per orchestrator turn (a root agent's step: what it read, what it decided):

* ``prompt``: the ``prompt`` an environment recorded on the turn's ``orchestrator_decision``
  event; otherwise a rendering of the task and of the results the orchestrator had received;
* ``completion``: the recorded ``completion`` (the decision as JSON); otherwise the turn's LLM
  output or its actions (spawns, delegations, messages, aggregation, stop) as JSON;
  A row's completion is the decision taken right after exactly that prompt: a recorded
  decision event gives one row of its own (its prompt and completion as recorded together); a
  turn without one is read up to its first LLM call, the prompt holding only what arrived
  before it;
* ``advantage``: ``group`` mode (default): the run's reward, group-relative within the runs of
  the same task instance (same task name, seed and size; GRPO), shared by the run's turns. A run
  alone in its group, or a group whose runs all scored the same, gets advantage 0.
  ``credit`` mode: the turn's credit (``unit="turn"``, any assigner), normalised per turn id
  across the runs of the same task instance (Dr. MAS style);
* ``label``: ``True`` when the advantage is positive, ``False`` when negative and ``None`` when
  it is 0 (no preference: a group where every run succeeded is never labelled undesirable).

Formats:

* ``trl``: JSONL with ``prompt``, ``completion``, ``label`` and ``advantage``: TRL's
  unpaired-preference format, trainable with ``KTOTrainer`` (:func:`train_trl`). Rows with
  advantage 0 carry no preference and are left out of the file;
* ``verl``: Parquet with verl's RL dataset columns: ``data_source`` (``orchestrace/<task>``),
  ``prompt`` as chat messages, ``ability``, ``reward_model`` with the task's ground truth (from
  the task re-created from ``meta.task``, never the recorded answer), and ``extra_info`` with
  the task spec, completion and advantage. Score rollouts with
  :func:`orchestrace.learn.verl_reward.compute_score`.

Example:
    >>> from orchestrace.learn.env import make_env
    >>> env = make_env("stop-v0", task="multihop")
    >>> traces = []
    >>> for seed in (1, 2):
    ...     _ = env.reset(seed=seed)
    ...     *_, info = env.step(1)
    ...     traces.append(info["trace"])
    >>> rows = export_rows(traces)
    >>> len(rows), sorted(rows[0])[:3]
    (2, ['advantage', 'completion', 'instance'])
    >>> [r["advantage"] for r in rows], [r["label"] for r in rows]  # two task instances
    ([0.0, 0.0], [None, None])
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from orchestrace.credit import make_assigner
from orchestrace.credit.base import root_agents
from orchestrace.credit.normalize import agentwise, group_relative
from orchestrace.errors import ConfigError, OrchestraceError, TraceError
from orchestrace.io._output import atomic_write, check_output
from orchestrace.learn.verl_reward import DATA_SOURCE_PREFIX
from orchestrace.rewards import make
from orchestrace.rewards.base import VerdictWarning, outcome_known
from orchestrace.runtime.prompts import render
from orchestrace.tasks import TASKS, make_task
from orchestrace.trace.model import Event, Trace

__all__ = [
    "FORMATS",
    "export",
    "export_rows",
    "ground_truth",
    "instance_key",
    "orchestrator_turns",
    "train_trl",
]

FORMATS = ("trl", "verl")
_TIE = 1e-9  # advantages closer to 0 than this count as 0 (no preference)
_ACTIONS = {"spawn", "message", "tool_call", "aggregate", "orchestrator_decision", "llm_call"}


def _question(trace: Trace) -> str:
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    if isinstance(spec, dict) and spec.get("name"):
        try:
            kw = {k: spec[k] for k in ("seed", "size") if spec.get(k) is not None}
            return str(make_task(str(spec["name"]), **kw).question)
        except (OrchestraceError, TypeError, ValueError):  # not re-creatable: name the task id
            pass
    return f"task {trace.task_id}"


def _action(e: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"type": str(e.type)}
    for key in ("decision", "role", "tool", "content"):
        v = getattr(e, key, None)
        if v is not None:
            out[key] = str(v)[:500]
    return out


def _call_prompt(e: Event, trace: Trace) -> str | None:
    """The prompt an LLM call read: recorded on the event, or re-created for a ``plan`` call.

    A root's ``plan`` request renders the task's question alone, so it is re-created exactly
    from the task; any other call without a recorded prompt gives ``None`` (no row).
    """
    attrs = e.attrs or {}
    if attrs.get("prompt"):
        return str(attrs["prompt"])
    messages = attrs.get("messages")
    if isinstance(messages, list) and messages:
        return "\n".join(
            str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in messages
        )
    if attrs.get("kind") == "plan":
        question = _question(trace)
        if question != f"task {trace.task_id}":
            return str(
                render("plan", {"prompt": question}, str(e.role or "orchestrator"))[-1]["content"]
            )
    return None


def _answer(events: Sequence[Event]) -> str | None:
    """The answer a turn gives (its decision's ``answer`` or its aggregate's value)."""
    for e in events:
        if str(e.type) == "orchestrator_decision" and e.attrs and e.attrs.get("answer") is not None:
            return str(e.attrs["answer"])
    for e in events:
        if str(e.type) == "aggregate":
            value = (e.attrs or {}).get("value", e.content)
            if value not in (None, ""):
                return str(value)
    return None


def orchestrator_turns(trace: Trace) -> list[dict[str, Any]]:
    """The orchestrator's decisions: ``{turn, agent, prompt, completion}`` in order.

    Each recorded decision (an event carrying ``prompt`` and ``completion``) is a row of its
    own, even when several share a step. In a turn without one, each LLM call whose prompt is
    recorded or re-creatable (a ``plan`` call) is a row pairing that prompt with the call's
    output; the turn's own decision is a row whose prompt is the task and what arrived, and
    whose completion is its answer (``ANSWER: <value>``) or, when it gives none and made no
    such call, its actions as JSON.

    Example:
        >>> from orchestrace.learn.env import make_env
        >>> env = make_env("stop-v0", task="multihop")
        >>> _ = env.reset(seed=1)
        >>> *_, info = env.step(1)
        >>> [t["turn"] for t in orchestrator_turns(info["trace"])]
        ['orchestrator@0']
    """
    roots = set(root_agents(trace))
    by_id = {e.id: e for e in trace.events}
    into: dict[str, list[str]] = {}
    for edge in trace.edges:
        if edge.type in ("return", "message", "aggregate"):
            into.setdefault(edge.dst, []).append(edge.src)
    question = None
    turns: dict[tuple[str, int], list[Event]] = {}
    for e in trace.events:
        if e.agent in roots:
            turns.setdefault((e.agent, e.step or 0), []).append(e)
    out = []
    heard: list[str] = []

    seen: set[str] = set()

    def hear(events: Sequence[Event]) -> None:
        for e in events:
            if e.id in seen:
                continue
            seen.add(e.id)
            for src in into.get(e.id, []):
                s = by_id.get(src)
                if s is not None and s.content:
                    heard.append(f"{s.agent}: {str(s.content)[:200]}")

    for (agent, step), events in turns.items():
        if not any(str(e.type) in _ACTIONS for e in events):
            continue
        turn = f"{agent}@{step}"
        recorded = [
            e for e in events if e.attrs and "prompt" in e.attrs and "completion" in e.attrs
        ]
        if recorded:
            for e in recorded:
                attrs = e.attrs or {}
                out.append(
                    {
                        "turn": turn,
                        "agent": agent,
                        "prompt": str(attrs["prompt"]),
                        "completion": str(attrs["completion"]),
                    }
                )
            hear(events)
            continue
        if question is None:
            question = _question(trace)
        n_rows = len(out)
        for e in events:  # each LLM call: its own prompt, its own completion
            if e.type == "llm_call" and e.content:
                hear(events[: events.index(e)])
                prompt = _call_prompt(e, trace)
                if prompt is not None:
                    row = {"turn": turn, "agent": agent, "prompt": prompt}
                    out.append({**row, "completion": str(e.content)})
        hear(events)
        answer = _answer(events)
        if answer is not None or len(out) == n_rows:  # the turn's own decision
            prompt = f"Task: {question}\nReceived so far:\n" + (
                "\n".join(heard[-20:]) if heard else "nothing yet"
            )
            completion = (
                f"ANSWER: {answer}"
                if answer is not None
                else json.dumps([_action(e) for e in events if str(e.type) in _ACTIONS])
            )
            out.append({"turn": turn, "agent": agent, "prompt": prompt, "completion": completion})
    return out


def instance_key(trace: Trace) -> str:
    """The task instance a run solved: ``name:s<seed>:n<size>`` from ``meta.task``.

    Runs with the same key form one advantage group. Without ``meta.task`` the trace's
    ``task_id`` is the key.

    Example:
        >>> from orchestrace.runtime import run
        >>> instance_key(run("centralized", task="arith", agents=2, seed=3).trace)
        'arith-mapreduce-v0:s3:n64'
    """
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    if isinstance(spec, dict) and spec.get("name"):
        return f"{spec['name']}:s{spec.get('seed')}:n{spec.get('size')}"
    return str(trace.task_id)


def ground_truth(trace: Trace) -> tuple[str, dict[str, Any], Any]:
    """The task name, spec and ground truth of a run, from the task re-created from its meta.

    The truth comes from the task definition (``meta.task``: name, seed, size); where that task
    cannot be re-created, from the truth recorded with the run's verdict
    (``meta.result.truth``). The run's own answer is never used.

    Raises:
        TraceError: The trace has no ``meta.task`` naming a known task, or no truth to fall
            back on.

    Example:
        >>> from orchestrace.runtime import run
        >>> trace = run("centralized", task="arith", agents=2, seed=3).trace
        >>> name, spec, truth = ground_truth(trace)
        >>> name, truth == trace.meta["result"]["truth"]
        ('arith-mapreduce-v0', True)
    """
    meta = trace.meta if isinstance(trace.meta, dict) else {}
    spec = meta.get("task")
    where = f"trace {trace.trace_id[:80]!r}"
    if not isinstance(spec, dict) or not spec.get("name"):
        raise TraceError(
            f"{where}: meta.task (name, seed, size) is missing; the verl export takes the "
            "ground truth from the task, so export runs recorded by orchestrace.runtime or an "
            "environment, or add meta.task to the trace"
        )
    name = str(spec["name"])
    if name not in TASKS:
        raise TraceError(
            f"{where}: meta.task names {name!r}, not a known task ({', '.join(sorted(TASKS))}); "
            "the verl reward can only score known tasks"
        )
    kw = {k: spec[k] for k in ("seed", "size") if spec.get(k) is not None}
    bad = [k for k, v in kw.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise TraceError(
            f"{where}: meta.task.{bad[0]} is {kw[bad[0]]!r}, not an integer; fix meta.task"
        )
    try:
        truth = make_task(name, **kw).answer
    except OrchestraceError as exc:  # a seed or size out of range
        result = meta.get("result")
        if isinstance(result, dict) and "truth" in result:
            truth = result["truth"]
        else:
            raise TraceError(
                f"{where}: meta.task {spec!r} cannot be re-created ({exc}) and the trace "
                "records no meta.result.truth; fix meta.task"
            ) from None
    clean = {"name": name, **{k: int(v) for k, v in kw.items()}}
    return name, clean, truth


def _rewards(traces: Sequence[Trace], reward: str, rerun_checks: bool) -> list[float | None]:
    """Each run's reward (``None``: the run's outcome is unknown; 0 when not applicable)."""
    values = make(reward)(list(traces), rerun_checks=rerun_checks)
    return [
        None
        if v is None and not outcome_known(t, rerun_checks=rerun_checks)
        else (0.0 if v is None else float(v))
        for t, v in zip(traces, values, strict=True)
    ]


def export_rows(
    traces: Sequence[Trace],
    *,
    reward: str = "team",
    mode: Literal["group", "credit"] = "group",
    method: str = "uniform",
    rerun_checks: bool = False,
) -> list[dict[str, Any]]:
    """One row per orchestrator turn with its advantage (see the module docstring).

    Advantages are relative within each task instance (:func:`instance_key`); an advantage of
    0 (a run alone in its group, or runs that all scored the same) gives ``label=None``.
    Rewards come from the verdicts recorded with the runs. A run whose outcome is unknown
    (its task checks answers by running them as code and it records no verdict) is left out,
    with a :class:`~orchestrace.rewards.base.VerdictWarning`.

    Args:
        traces: The runs (a group: several runs per task gives GRPO baselines).
        reward: Reward name (``team``, ``parl``... see :func:`orchestrace.rewards.make`).
        mode: ``group`` (run-level group-relative advantage) or ``credit`` (turn credit).
        method: Credit assigner for ``credit`` mode.
        rerun_checks: Check recorded answers again even where that runs them as code (in the
            task's sandbox) instead of using the recorded verdicts.

    Raises:
        ConfigError: Unknown mode, reward or method.
    """
    if mode not in ("group", "credit"):
        raise ConfigError(f"unknown advantage mode {mode!r}; use 'group' or 'credit'")

    scored = _rewards(list(traces), reward, rerun_checks)
    for t, r in zip(traces, scored, strict=True):
        if r is None:
            warnings.warn(
                VerdictWarning(
                    f"trace {t.trace_id[:80]!r} left out of the export: its outcome is unknown; "
                    "pass --rerun-checks (rerun_checks=True) to check its answer in the sandbox"
                ),
                stacklevel=2,
            )
    traces = [t for t, r in zip(traces, scored, strict=True) if r is not None]
    rewards = [r for r in scored if r is not None]
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(traces):
        groups.setdefault(instance_key(t), []).append(i)
    turn_adv: list[dict[str, float] | float] = [0.0] * len(traces)
    if mode == "group":
        run_adv = [0.0] * len(traces)
        for idx in groups.values():
            for i, a in zip(idx, group_relative([rewards[i] for i in idx]), strict=True):
                run_adv[i] = a
        turn_adv = list(run_adv)
    else:
        assigner = make_assigner(method, rerun_checks=rerun_checks)
        tables = [
            assigner.assign(t, "turn", reward=r) for t, r in zip(traces, rewards, strict=True)
        ]
        for idx in groups.values():  # each turn id normalised within its task instance
            normed = agentwise([tables[i] for i in idx], unit="turn")
            for i, tb in zip(idx, normed, strict=True):
                turn_adv[i] = tb.by_unit("turn")
    rows = []
    for trace, r, adv in zip(traces, rewards, turn_adv, strict=True):
        for turn in orchestrator_turns(trace):
            a = adv if isinstance(adv, float) else float(adv.get(turn["turn"], 0.0))
            a = 0.0 if abs(a) < _TIE else a
            rows.append(
                {
                    "prompt": turn["prompt"],
                    "completion": turn["completion"],
                    "label": True if a > 0 else False if a < 0 else None,
                    "advantage": a,
                    "reward": r,
                    "trace_id": trace.trace_id,
                    "task_id": trace.task_id,
                    "instance": instance_key(trace),
                    "turn": turn["turn"],
                }
            )
    return rows


def export(
    traces: Sequence[Trace],
    out: str | Path,
    to: str = "trl",
    *,
    overwrite: bool = False,
    **kw: Any,
) -> int:
    """Write the rows of :func:`export_rows` for ``to`` (``trl`` or ``verl``); returns the count.

    ``trl`` leaves out rows with advantage 0 (no preference). ``verl`` needs each trace's
    ``meta.task`` for the ground truth (:func:`ground_truth`).

    The file is written atomically; an existing one is replaced only with ``overwrite=True``.

    Raises:
        ConfigError: Unknown format.
        TraceError: ``verl`` and a trace without the ``meta.task`` its ground truth needs.
        OutputError: ``out`` exists (without ``overwrite``), cannot hold a file, or writing
            failed (the previous file is kept).
    """
    if to not in FORMATS:
        raise ConfigError(f"unknown export format {to!r}; use one of: {', '.join(FORMATS)}")
    check_output(out, force=overwrite, kind="file")
    truths = {}
    if to == "verl":  # refuse before any work when a trace lacks its task
        truths = {t.trace_id: ground_truth(t) for t in traces}
    rows = export_rows(traces, **kw)
    out = Path(out)
    if to == "trl":
        kept = [r for r in rows if r["label"] is not None]
        with atomic_write(out, "w", force=overwrite) as fh:
            for r in kept:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return len(kept)
    import pyarrow as pa  # noqa: PLC0415  pyarrow is heavy: loaded on first use
    import pyarrow.parquet as pq  # noqa: PLC0415  pyarrow is heavy: loaded on first use

    records = []
    for i, r in enumerate(rows):
        name, spec, truth = truths[r["trace_id"]]
        records.append(
            {
                "data_source": DATA_SOURCE_PREFIX + name,
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "ability": "orchestration",
                "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
                "extra_info": {
                    "index": i,
                    "task": json.dumps(spec),
                    "completion": r["completion"],
                    "advantage": r["advantage"],
                    "reward": r["reward"],
                    "trace_id": r["trace_id"],
                    "turn": r["turn"],
                },
            }
        )
    table = pa.Table.from_pylist(records)
    with atomic_write(out, "wb", force=overwrite) as fh:
        pq.write_table(table, fh)
    return len(rows)


def train_trl(
    dataset: str | Path,
    model: str | Path,
    out: str | Path,
    *,
    steps: int = 10,
    batch: int = 4,
    lr: float = 1e-4,
    max_length: int = 256,
) -> dict[str, Any]:
    """Fine-tune a causal LM on an exported ``trl`` dataset with TRL's ``KTOTrainer``.

    Turns with a positive advantage are desirable, those with a negative one undesirable
    (KTO needs no pairs); rows labelled ``None`` (advantage 0) are skipped. Needs the ``[trl]`` extra. Returns the training log (losses per step) and the
    path of the saved model.
    """
    try:
        import datasets  # noqa: PLC0415  optional extra [trl]
        import transformers  # noqa: PLC0415  optional extra [hf]
        from trl import KTOConfig, KTOTrainer  # noqa: PLC0415  optional extra [trl]
    except ImportError:
        raise ImportError("training with TRL needs: pip install 'orchestrace[trl]'") from None
    rows = [json.loads(line) for line in Path(dataset).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("label") is not None]  # advantage 0: no preference
    if not rows:
        raise ConfigError(f"{dataset}: no rows; export traces first (orchestrace export)")
    if len({bool(r["label"]) for r in rows}) < 2:
        raise ConfigError(
            f"{dataset}: every turn has the same label; KTO needs runs that did "
            "better and worse than their group (export more runs per task)"
        )
    ds = datasets.Dataset.from_list(
        [
            {"prompt": r["prompt"], "completion": " " + r["completion"], "label": bool(r["label"])}
            for r in rows
        ]
    )
    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    lm = transformers.AutoModelForCausalLM.from_pretrained(str(model))
    args = KTOConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=lr,
        max_length=max_length,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    trainer = KTOTrainer(model=lm, args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    trainer.save_model(str(out))
    return {"log": trainer.state.log_history, "model": str(out)}
