"""The study's report: tables, results.md, CSV files and plots."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace.io._output import report_dir, report_file, report_json
from orchestrace.stats import mean_ci


def missing_note(study: dict[str, Any]) -> str:
    """One line naming the study's failed jobs and what they leave out (``""`` when none).

    Example:
        >>> missing_note({"missing": [{"task": "arith-mapreduce-v0", "job": "replicate 1",
        ...     "error": "ValueError: x", "attempts": 1}], "tasks": {"arith-mapreduce-v0": {}}})
        '1 study job failed (arith-mapreduce-v0 replicate 1: ValueError: x); tasks left out: none; the results keep every finished job'
    """
    lost = study.get("missing") or []
    if not lost:
        return ""
    first = lost[0]
    tries = f" after {first['attempts']} attempts" if first.get("attempts", 1) > 1 else ""
    out = sorted({m["task"] for m in lost} - set(study.get("tasks", {})))
    return (
        f"{len(lost)} study job{'s' if len(lost) > 1 else ''} failed ({first['task']} "
        f"{first['job']}: {first['error']}{tries}); tasks left out: {', '.join(out) or 'none'}; "
        "the results keep every finished job"
    )


# ---------------------------------------------------------------------------- report
def _fmt_success(m: dict[str, Any]) -> str:
    lo, hi = m["success_wilson"]
    return f"{m['success']:.3f} [{lo:.3f}, {hi:.3f}]"


def _fmt_spread(m: dict[str, Any], key: str, digits: int) -> str:
    spread = m.get(f"{key}_spread")
    value = f"{m[key]:,.{digits}f}"
    if spread is None or not math.isfinite(spread):
        return value
    return f"{value} ± {spread:,.{digits}f}"


def summary_table(study: dict[str, Any]) -> str:
    """At the reference weight, per task: every method's reward, success and tokens."""
    w = str(study["config"]["reference_weight"])
    lines = [
        "| task | method | reward (± across replicates) | success [Wilson 95%] | "
        "tokens (± across replicates) | workers | rule picked (replicate 0) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            row = m["by_weight"][w]
            rule = row.get("rules", [""])[0]
            lines.append(
                f"| {name} | {method} | {_fmt_spread(row, 'reward', 3)} | {_fmt_success(row)} | "
                f"{_fmt_spread(row, 'tokens', 0)} | {row['workers']:.2f} | {rule} |"
            )
    return "\n".join(lines)


def comparison_table(study: dict[str, Any]) -> str:
    """Paired reward differences at the reference weight."""
    lines = [
        "| task | comparison | reward difference | ± across replicates | ± over instances | "
        "success difference | token difference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        for label, c in res["comparisons"].items():
            spread = "n/a" if not math.isfinite(c["spread"]) else f"{c['spread']:.4f}"
            lines.append(
                f"| {name} | {label} | {c['mean']:+.4f} | {spread} | {c['instances']:.4f} | "
                f"{c['success']:+.3f} | {c['tokens']:+,.0f} |"
            )
    return "\n".join(lines)


def weight_table(study: dict[str, Any]) -> str:
    """Reward differences at every weight, paired across replicates (per-replicate rewards)."""
    algo = f"learned ({study['config']['algo']})"
    post = "posterior (oracle reference)"
    lines = [
        f"| task | w | {algo} - size-aware | {algo} - any-rule | posterior - {algo} |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, res in study["tasks"].items():
        m = res["methods"]
        for w in study["config"]["weights"]:
            learned = [r["reward"] for r in m[algo]["by_weight"][str(w)]["replicates"]]
            cells = []
            for other in ("size-aware", "any-rule"):
                rules = [r["reward"] for r in m[other]["by_weight"][str(w)]["replicates"]]
                mean, ci = mean_ci([a - b for a, b in zip(learned, rules, strict=True)])
                cells.append(f"{mean:+.4f} ± {ci:.4f}")
            ref = m[post]["by_weight"][str(w)]["replicates"][0]["reward"]
            mean, ci = mean_ci([ref - a for a in learned])
            cells.append(f"{mean:+.4f} ± {ci:.4f}")
            lines.append(f"| {name} | {w:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pareto_table(study: dict[str, Any]) -> str:
    """Success and tokens of every method at every weight (the Pareto curves as numbers)."""
    weights = study["config"]["weights"]
    head = " | ".join(f"w = {w:g}" for w in weights)
    lines = [f"| task | method | {head} |", "| --- | --- |" + " --- |" * len(weights)]
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            cells = []
            for w in weights:
                row = m["by_weight"][str(w)]
                cells.append(f"{row['success']:.3f} / {row['tokens']:,.0f}")
            lines.append(f"| {name} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pareto_rows(study: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, res in study["tasks"].items():
        for method, m in res["methods"].items():
            for w, row in m["by_weight"].items():
                for i, rep in enumerate(row["replicates"]):
                    lo, hi = rep["success_wilson"]
                    rows.append(
                        {
                            "task": name,
                            "method": method,
                            "kind": m["kind"],
                            "weight": w,
                            "replicate": i,
                            "rule": (row.get("rules") or [""] * (i + 1))[i],
                            "episodes": rep["episodes"],
                            "success": rep["success"],
                            "success_lo": lo,
                            "success_hi": hi,
                            "tokens": rep["tokens"],
                            "tokens_ci": rep["tokens_ci"],
                            "reward": rep["reward"],
                            "reward_ci": rep["reward_ci"],
                            "workers": rep["workers"],
                        }
                    )
    return rows


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def write_report(
    study: dict[str, Any],
    out: Path,
    *,
    force: bool = False,
    logs: dict[str, list[dict[str, float]]] | None = None,
    policies: dict[str, Any] | None = None,
) -> None:
    """``results.json``, ``results.md``, ``pareto.csv``, ``sweep.csv`` and plots into ``out``.

    ``out`` is checked as ``orchestrace study -o`` checks it (an earlier study's directory is
    replaced only with ``force``); each file is written atomically.

    Raises:
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
    """
    with report_dir(out, force=force, report="study") as target:
        with report_file(target / "results.json", "w") as fh:
            fh.write(report_json(study))
        with report_file(target / "pareto.csv", "w") as fh:
            fh.write(_csv(_pareto_rows(study)))
        sweep = [
            {"task": name, **row}
            for name, res in study.get("tasks", {}).items()
            for row in res["sweep"]
        ]
        with report_file(target / "sweep.csv", "w") as fh:
            fh.write(_csv(sweep))
        if logs:
            rows = [{"run": run, **row} for run, log in logs.items() for row in log]
            with report_file(target / "train.csv", "w") as fh:
                fh.write(_csv(rows))
        with report_file(target / "results.md", "w") as fh:
            fh.write(_markdown(study))
        for task, (policy, tc) in (policies or {}).items():
            policy.save(
                target / f"policy-{task}.pt",
                extra={"algo": study["config"]["algo"], "config": asdict(tc)},
            )
        if study.get("tasks"):
            _plot(study, target / "pareto.png")
        if logs:
            _plot_curves(logs, target / "curves.png")


def _missing_md(study: dict[str, Any]) -> list[str]:
    lost = study.get("missing") or []
    if not lost:
        return []
    rows = [
        f"| {m['task']} | {m['job']} | {m['kind']} | {m['attempts']} | {m['error']} |" for m in lost
    ]
    return [
        "## Missing",
        "",
        missing_note(study) + ". A task whose evaluation bank or posterior rule failed, or all",
        "of whose replicates failed, is left out; a task with some failed replicates is reported",
        "over the replicates it has.",
        "",
        "| task | job | kind | attempts | error |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]


def _markdown(study: dict[str, Any]) -> str:
    if not study.get("tasks"):
        return "\n".join(
            ["# Learned stopping: results", "", "(no task has results)", "", *_missing_md(study)]
        )
    cfg = study["config"]
    live = ", ".join(
        f"{t}: {r['live_check']['mismatches']} of {r['live_check']['episodes']}"
        for t, r in study["tasks"].items()
    )
    parts = [
        "# Learned stopping: results",
        "",
        f"Reward = success - w x tokens / 1000; reference weight w = {cfg['reference_weight']}. "
        f"Evaluation: {cfg['eval_seeds']} seeds x {cfg['episodes']} held-out episodes, the same "
        f"for every method. Budget per replicate: {cfg['budget']} task instances "
        f"({cfg['train_seeds']} training seeds, {cfg['train_seeds']} tuning replicates; "
        f"{cfg['train_episodes']} training episodes replayed from them). Wall time "
        f"{study['wall_s']:.0f} s.",
        "",
        f"Live check (replayed outcome differs from the real environment): {live}.",
        "",
        *_missing_md(study),
        "## At the reference weight",
        "",
        summary_table(study),
        "",
        "## Paired differences at the reference weight",
        "",
        comparison_table(study),
        "",
        "## Reward differences at every weight (± across replicates)",
        "",
        weight_table(study),
        "",
        "## Pareto curves: success / tokens per weight",
        "",
        pareto_table(study),
        "",
    ]
    return "\n".join(parts)


_COLORS = {
    "fixed": "tab:gray",
    "agree": "tab:blue",
    "confidence": "tab:orange",
    "conf-or-agree": "tab:green",
    "any-rule": "tab:olive",
    "size-aware": "tab:purple",
}


def _plot(study: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return
    tasks = list(study["tasks"])
    weights = study["config"]["weights"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.4), squeeze=False)
    for ax, name in zip(axes[0], tasks, strict=True):
        res = study["tasks"][name]
        sw = [r for r in res["sweep"] if r["family"] == "conf-or-agree"]
        ax.scatter(
            [r["tokens"] for r in sw],
            [r["success"] for r in sw],
            s=5,
            color="lightgray",
            label="every conf-or-agree threshold (eval)",
        )
        for method, m in res["methods"].items():
            rows = [m["by_weight"][str(w)] for w in weights]
            x = [r["tokens"] for r in rows]
            y = [r["success"] for r in rows]
            err = np.asarray(
                [
                    [r["success"] - r["success_wilson"][0] for r in rows],
                    [r["success_wilson"][1] - r["success"] for r in rows],
                ]
            )
            if m["kind"] == "learned":
                style = {"color": "tab:red", "marker": "*", "ms": 11, "lw": 2}
            elif method.startswith("posterior"):
                dense = sorted(res["posterior_dominance"]["curve"])
                ax.plot([p[0] for p in dense], [p[1] for p in dense], color="black", ls="--", lw=1)
                style = {"color": "black", "marker": "s", "ms": 5, "ls": "none"}
            elif method.startswith("hindsight"):
                style = {"color": "black", "marker": "", "ls": ":"}
            else:
                style = {"color": _COLORS.get(method, "k"), "marker": "o", "ms": 4, "lw": 1}
            ax.errorbar(x, y, yerr=err, label=method, capsize=2, **style)
        ax.set_title(f"{name} (w = {', '.join(f'{w:g}' for w in weights)})", fontsize=9)
        ax.set_xlabel("tokens per episode")
        ax.set_ylabel("success (Wilson 95%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    _save(fig, plt, path)


def _plot_curves(logs: dict[str, list[dict[str, float]]], path: Path) -> None:
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return
    tasks = sorted({k.split("/")[0] for k in logs})
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for run, log in logs.items():
            if run.startswith(task + "/"):
                ax.plot(
                    [r["episodes"] for r in log],
                    [r["r_perf"] for r in log],
                    lw=1,
                    label=run.split("/")[1],
                )
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("training episodes (replayed)")
        ax.set_ylabel("batch reward")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> None:
    try:
        with report_file(path) as fh:
            fig.savefig(fh, format="png", dpi=110)
    finally:
        plt.close(fig)
