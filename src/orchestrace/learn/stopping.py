"""The learned-stopping study (O5): a trained policy against every stopping heuristic.

For each task, train a policy on ``stop-v0`` with the default :class:`TrainConfig` (PPO), then
evaluate it and each heuristic of :func:`~orchestrace.learn.policies.heuristics` on the same
held-out task instances (``seeds`` x ``episodes``; seeds no training run draws). Write:

* ``results.json``: every row (mean, 95% CI, per-seed values), the configs, and per task the
  paired comparison with the best heuristic and the matched-success token comparison;
* ``results.md``: the tables;
* ``tradeoff.png``: success against tokens per task (heuristics as points, the learned policy
  as a star); ``curve-<task>.png``, ``train-<task>.csv``, ``policy-<task>.pt`` and
  ``config-<task>.json``: learning curves, checkpoints and training configs.

Run it with ``orchestrace study stopping -o docs/learned-stopping`` (about 15 minutes on two
cores with the defaults).

Example:
    >>> res = run_study(["multihop"], seeds=2, episodes=5, train_episodes=256, jobs=1)
    >>> r = res["tasks"]["multihop-v0"]
    >>> r["learned"]["n_seeds"], r["best_heuristic"]["name"] != r["learned"]["name"]
    (2, True)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace.learn.evaluate import EvalResult, compare, format_table, mean_ci
from orchestrace.learn.policies.heuristic import heuristics
from orchestrace.runtime.tasks import make_task

__all__ = ["run_study", "study_task"]

DEFAULT_TASKS = ("arith", "search", "multihop")


def _paired(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Mean and 95% half-width of the per-seed difference ``a - b``."""
    mean, half = mean_ci(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return {"mean": mean, "ci": half}


def study_task(
    task: str,
    *,
    algo: str = "ppo",
    seeds: int = 10,
    episodes: int = 200,
    train_episodes: int | None = None,
    train_seed: int = 0,
    out: str | Path | None = None,
) -> dict[str, Any]:
    """Train on one task and compare against every stopping heuristic.

    Args:
        task: Task id or alias.
        algo: Trainer (``ppo``, ``grpo``, ``reinforce``).
        seeds: Held-out evaluation seeds.
        episodes: Episodes per evaluation seed.
        train_episodes: Override the default training budget (tests use a small one).
        train_seed: Seed of the training run.
        out: Directory for the training CSV and curve.

    Returns:
        A JSON-ready dict (see the module docstring).
    """
    from orchestrace.learn.algorithms import TrainConfig, make_trainer

    name = make_task(task).name
    cfg = TrainConfig(env="stop-v0", task=name, seed=train_seed)
    if train_episodes is not None:
        cfg.episodes = train_episodes
    trainer = make_trainer(algo, cfg)
    result = trainer.train()
    if out is not None:
        trainer.write(out, suffix=f"-{name}")
    policies: dict[str, Any] = {f"learned ({algo})": result.policy}
    policies.update({str(h): h for h in heuristics("stopping")})
    rows_eval = compare(policies, "stop-v0", task=name, seeds=seeds, episodes=episodes)
    learned = next(r for r in rows_eval if r.name.startswith("learned"))
    heur = [r for r in rows_eval if not r.name.startswith("learned")]
    best = max(heur, key=lambda r: r.reward)
    reaching = [r for r in heur if r.success >= learned.success]
    cheapest = min(reaching, key=lambda r: r.tokens) if reaching else None
    return {
        "task": name,
        "algo": algo,
        "train_config": asdict(cfg),
        "episodes_per_min": result.episodes_per_min,
        "rows": [{**r.row(), "per_seed": r.per_seed} for r in rows_eval],
        "learned": learned.row(),
        "best_heuristic": best.row(),
        "reward_gain": _paired(learned.per_seed["reward"], best.per_seed["reward"]),
        "success_gain": _paired(learned.per_seed["success"], best.per_seed["success"]),
        "token_saving": _paired(best.per_seed["tokens"], learned.per_seed["tokens"]),
        "matched_success": None
        if cheapest is None
        else {
            "heuristic": cheapest.name,
            "success": cheapest.success,
            "tokens": cheapest.tokens,
            "learned_tokens": learned.tokens,
            "token_saving": _paired(cheapest.per_seed["tokens"], learned.per_seed["tokens"]),
        },
    }


def _job(kw: dict[str, Any]) -> dict[str, Any]:
    return study_task(**kw)


def run_study(
    tasks: Sequence[str] = DEFAULT_TASKS,
    *,
    algo: str = "ppo",
    seeds: int = 10,
    episodes: int = 200,
    train_episodes: int | None = None,
    train_seed: int = 0,
    out: str | Path | None = None,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Run :func:`study_task` for each task (``jobs`` in parallel) and write the report.

    ``out`` is checked before any work, as ``orchestrace study -o`` checks it: new, empty,
    or written by an earlier study (then only with ``force``).

    Raises:
        ConfigError: No tasks, or fewer than one seed, episode or job.
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    from orchestrace.errors import ConfigError

    if not tasks:
        raise ConfigError("give at least one task, e.g. arith,search,multihop")
    for name, value in (("seeds", seeds), ("episodes", episodes), ("jobs", jobs)):
        if value < 1:
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if out is not None:
        from orchestrace.io._output import report_dir

        with report_dir(out, force=force, report="study"):
            return _run_study(
                tasks, algo, seeds, episodes, train_episodes, train_seed, out, jobs, progress
            )
    return _run_study(tasks, algo, seeds, episodes, train_episodes, train_seed, out, jobs, progress)


def _run_study(
    tasks: Sequence[str],
    algo: str,
    seeds: int,
    episodes: int,
    train_episodes: int | None,
    train_seed: int,
    out: str | Path | None,
    jobs: int,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    kws = [
        dict(
            task=t,
            algo=algo,
            seeds=seeds,
            episodes=episodes,
            train_episodes=train_episodes,
            train_seed=train_seed,
            out=out,
        )
        for t in tasks
    ]
    results: dict[str, Any] = {}
    if jobs > 1 and len(kws) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(kws))) as pool:
            try:
                for res in pool.map(_job, kws):
                    results[res["task"]] = res
                    if progress:
                        progress(res["task"])
            except BaseException:  # Ctrl-C or a failed task: do not start the others
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    else:
        for kw in kws:
            res = _job(kw)
            results[res["task"]] = res
            if progress:
                progress(res["task"])
    study = {
        "study": "learned-stopping",
        "env": "stop-v0",
        "seeds": seeds,
        "episodes": episodes,
        "tasks": results,
    }
    if out is not None:
        write_report(study, Path(out), force=True)  # checked by run_study
    return study


def _rows(res: dict[str, Any]) -> list[EvalResult]:
    return [EvalResult(**{k: v for k, v in r.items() if k != "per_seed"}) for r in res["rows"]]


def summary_table(study: dict[str, Any]) -> str:
    """One line per task: learned vs best heuristic (paired differences with 95% CIs)."""
    lines = [
        "| task | learned reward | best heuristic | its reward | reward gain (paired) | "
        "success: learned / heuristic | tokens: learned / heuristic | "
        "cheapest heuristic with the learned success (tokens) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        le, be, g = res["learned"], res["best_heuristic"], res["reward_gain"]
        m = res["matched_success"]
        match = "none reaches it" if m is None else f"{m['heuristic']} ({m['tokens']:,.0f})"
        lines.append(
            f"| {name} | {le['reward']:.3f} ± {le['reward_ci']:.3f} | {be['name']} | "
            f"{be['reward']:.3f} ± {be['reward_ci']:.3f} | {g['mean']:+.4f} ± {g['ci']:.4f} | "
            f"{le['success']:.3f} / {be['success']:.3f} | {le['tokens']:,.0f} / "
            f"{be['tokens']:,.0f} | {match} |"
        )
    return "\n".join(lines)


def write_report(study: dict[str, Any], out: Path, *, force: bool = False) -> None:
    """``results.json``, ``results.md`` and ``tradeoff.png`` into ``out``.

    ``out`` is checked as ``orchestrace study -o`` checks it (an earlier study's directory is
    replaced only with ``force``); each file is written atomically.

    Raises:
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    from orchestrace.io._output import report_dir, report_file

    with report_dir(out, force=force, report="study") as target:
        with report_file(target / "results.json", "w") as fh:
            fh.write(json.dumps(study, indent=1, default=str))
        parts = [
            "# Learned stopping: results",
            "",
            f"Held-out evaluation: {study['seeds']} seeds x {study['episodes']} episodes per "
            "policy; mean over seeds with 95% t-intervals. Reward = success - 0.1 x "
            "tokens/1000.",
            "",
            summary_table(study),
            "",
        ]
        for name, res in study["tasks"].items():
            parts += [format_table(_rows(res), f"{name}"), ""]
        with report_file(target / "results.md", "w") as fh:
            fh.write("\n".join(parts))
        _plot(study, target / "tradeoff.png")


def _plot(study: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tasks = list(study["tasks"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.8), squeeze=False)
    for ax, name in zip(axes[0], tasks, strict=True):
        res = study["tasks"][name]
        fams = {"fixed": "tab:gray", "agree": "tab:blue", "conf": "tab:orange"}
        for r in res["rows"]:
            if r["name"].startswith("learned"):
                ax.scatter(
                    r["tokens"],
                    r["success"],
                    marker="*",
                    s=220,
                    color="tab:red",
                    zorder=3,
                    label=r["name"],
                )
                continue
            fam = "conf" if r["name"].startswith("conf") else r["name"].split("-")[0]
            ax.scatter(r["tokens"], r["success"], s=22, color=fams.get(fam, "k"), alpha=0.8)
        for fam, color in fams.items():
            ax.scatter([], [], s=22, color=color, label=f"{fam} heuristics")
        ax.set_title(name)
        ax.set_xlabel("tokens per episode")
        ax.set_ylabel("success")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    from orchestrace.io._output import report_file

    try:
        with report_file(path) as fh:
            fig.savefig(fh, format="png", dpi=110)
    finally:
        plt.close(fig)
