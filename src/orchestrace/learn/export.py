"""Export orchestrator turns with advantages for LLM trainers (TRL, verl).

One row per orchestrator turn (a root agent's step: what it read, what it decided):

* ``prompt``: the ``prompt`` an environment recorded on the turn's ``orchestrator_decision``
  event; otherwise a rendering of the task and of the results the orchestrator had received;
* ``completion``: the recorded ``completion`` (the decision as JSON); otherwise the turn's LLM
  output or its actions (spawns, delegations, messages, aggregation, stop) as JSON;
* ``advantage``: ``group`` mode (default): the run's reward, group-relative within runs of the
  same task (GRPO; all runs form one group when no task repeats), shared by the run's turns.
  ``credit`` mode: the turn's credit (``unit="turn"``, any assigner), normalised per turn id
  across runs (Dr. MAS style).

Formats:

* ``trl``: JSONL with ``prompt``, ``completion``, ``label`` (advantage > 0) and ``advantage``:
  TRL's unpaired-preference format, trainable with ``KTOTrainer`` (:func:`train_trl`);
* ``verl``: Parquet with verl's RL dataset columns (``data_source``, ``prompt`` as chat
  messages, ``ability``, ``reward_model``, ``extra_info`` holding completion and advantage).

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
    (2, ['advantage', 'completion', 'label'])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from orchestrace.credit.base import root_agents
from orchestrace.errors import ConfigError
from orchestrace.trace.model import Event, Trace

__all__ = ["FORMATS", "export", "export_rows", "orchestrator_turns", "train_trl"]

FORMATS = ("trl", "verl")
_ACTIONS = {"spawn", "message", "tool_call", "aggregate", "orchestrator_decision", "llm_call"}


def _question(trace: Trace) -> str:
    spec = trace.meta.get("task") if isinstance(trace.meta, dict) else None
    if isinstance(spec, dict) and spec.get("name"):
        try:
            from orchestrace.runtime.tasks import make_task

            kw = {k: spec[k] for k in ("seed", "size") if spec.get(k) is not None}
            return str(make_task(str(spec["name"]), **kw).question)
        except Exception:
            pass
    return f"task {trace.task_id}"


def _action(e: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"type": str(e.type)}
    for key in ("decision", "role", "tool", "content"):
        v = getattr(e, key, None)
        if v is not None:
            out[key] = str(v)[:500]
    return out


def orchestrator_turns(trace: Trace) -> list[dict[str, Any]]:
    """The orchestrator's turns: ``{turn, agent, prompt, completion}`` in order."""
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
    for (agent, step), events in turns.items():
        if not any(str(e.type) in _ACTIONS for e in events):
            continue
        recorded = next(
            (e for e in events if e.attrs and "prompt" in e.attrs and "completion" in e.attrs),
            None,
        )
        for e in events:  # what arrived since the last turn
            for src in into.get(e.id, []):
                s = by_id.get(src)
                if s is not None and s.content:
                    heard.append(f"{s.agent}: {str(s.content)[:200]}")
        if recorded is not None:
            attrs = recorded.attrs or {}
            prompt, completion = str(attrs["prompt"]), str(attrs["completion"])
        else:
            if question is None:
                question = _question(trace)
            prompt = f"Task: {question}\nReceived so far:\n" + (
                "\n".join(heard[-20:]) if heard else "nothing yet"
            )
            llm = [e for e in events if e.type == "llm_call" and e.content]
            completion = (
                str(llm[-1].content)
                if llm
                else json.dumps([_action(e) for e in events if str(e.type) in _ACTIONS])
            )
        out.append(
            {"turn": f"{agent}@{step}", "agent": agent, "prompt": prompt, "completion": completion}
        )
    return out


def _rewards(traces: Sequence[Trace], reward: str, rerun_checks: bool) -> list[float | None]:
    """Each run's reward (``None``: the run's outcome is unknown; 0 when not applicable)."""
    from orchestrace.rewards import make
    from orchestrace.rewards.base import outcome_known

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
    from orchestrace.credit.normalize import agentwise, by_task, group_relative

    if mode not in ("group", "credit"):
        raise ConfigError(f"unknown advantage mode {mode!r}; use 'group' or 'credit'")
    import warnings

    from orchestrace.rewards.base import VerdictWarning

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
    if mode == "group":
        repeated = len({t.task_id for t in traces}) < len(traces)
        run_adv = by_task(traces, rewards) if repeated else group_relative(rewards)
        turn_adv: list[dict[str, float] | float] = list(run_adv)
    else:
        from orchestrace.credit import make_assigner

        assigner = make_assigner(method, rerun_checks=rerun_checks)
        tables = [
            assigner.assign(t, "turn", reward=r) for t, r in zip(traces, rewards, strict=True)
        ]
        turn_adv = [tb.by_unit("turn") for tb in agentwise(tables, unit="turn")]
    rows = []
    for trace, r, adv in zip(traces, rewards, turn_adv, strict=True):
        for turn in orchestrator_turns(trace):
            a = adv if isinstance(adv, float) else float(adv.get(turn["turn"], 0.0))
            rows.append(
                {
                    "prompt": turn["prompt"],
                    "completion": turn["completion"],
                    "label": a > 0,
                    "advantage": a,
                    "reward": r,
                    "trace_id": trace.trace_id,
                    "task_id": trace.task_id,
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

    The file is written atomically; an existing one is replaced only with ``overwrite=True``.

    Raises:
        ConfigError: Unknown format.
        OutputError: ``out`` exists (without ``overwrite``), cannot hold a file, or writing
            failed (the previous file is kept).
    """
    from orchestrace.io._output import atomic_write, check_output

    if to not in FORMATS:
        raise ConfigError(f"unknown export format {to!r}; use one of: {', '.join(FORMATS)}")
    check_output(out, force=overwrite, kind="file")
    rows = export_rows(traces, **kw)
    out = Path(out)
    if to == "trl":
        with atomic_write(out, "w", force=overwrite) as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return len(rows)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(
        [
            {
                "data_source": "orchestrace/" + r["task_id"].split(":")[0],
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "ability": "orchestration",
                "reward_model": {"style": "offline", "ground_truth": r["completion"]},
                "extra_info": {
                    "index": i,
                    "completion": r["completion"],
                    "advantage": r["advantage"],
                    "reward": r["reward"],
                    "trace_id": r["trace_id"],
                    "turn": r["turn"],
                },
            }
            for i, r in enumerate(rows)
        ]
    )
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

    Turns with a positive advantage are desirable, the others undesirable (KTO needs no
    pairs). Needs the ``[trl]`` extra. Returns the training log (losses per step) and the
    path of the saved model.
    """
    try:
        import datasets
        import transformers
        from trl import KTOConfig, KTOTrainer
    except ImportError:
        raise ImportError("training with TRL needs: pip install 'orchestrace[trl]'") from None
    rows = [json.loads(line) for line in Path(dataset).read_text().splitlines() if line.strip()]
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
