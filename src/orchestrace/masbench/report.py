"""Write a benchmark report: ``report.json``, ``report.md`` and PNG plots.

The Markdown embeds the suite and run configuration, so a report alone says how to reproduce
it; the JSON holds every run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.io._output import report_dir, report_file, report_json
from orchestrace.masbench.envelope import envelope_markdown, scale_gap_figure

__all__ = ["markdown", "write_report"]


def _f(x: Any, nd: int = 2) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)


def _e1(cell: dict[str, Any]) -> str:
    """E1 with its interval: ``0.85 [0.77, 0.91]``."""
    if "E1_success_low" not in cell:  # a report written before intervals were Wilson
        return f"{cell['E1_success']:.2f} ± {_f(cell.get('E1_success_ci'))}"
    return f"{cell['E1_success']:.2f} [{cell['E1_success_low']:.2f}, {cell['E1_success_high']:.2f}]"


def _e2(cell: dict[str, Any]) -> str:
    """E2 efficiency with its t half-width where the report has one."""
    ci = cell.get("E2_efficiency_ci")
    return f"{cell['E2_efficiency']:.2f}" + ("" if ci is None else f" ± {_f(ci)}")


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    s = report["suite"]
    runs = report["runs"]
    where = f"{report['wall_s']:.0f} s wall ({report['config']['jobs']} processes)"
    if runs or report["cells"] or s.get("topologies"):
        scope = (
            f"Backend `{report['config']['backend']}`, {s['seeds']} seeds per cell, team size "
            f"{s['agents']}, faults at rate {s['fault_rate']}; {len(runs)} runs in {where}."
        )
    else:  # a suite of envelope points alone
        n = len(report["envelope"])
        scope = f"Scale envelope only: {n} point{'s' if n != 1 else ''} in {where}."
    out = [f"# Benchmark report: {s['id']}", "", s.get("description", ""), "", scope, ""]
    for note in report.get("notes", []):
        out.append(f"* note: {note}")
    lost = (report.get("missing") or {}).get("runs") or []
    if lost:
        out += [
            "",
            "## Missing runs",
            "",
            f"{len(lost)} of {len(lost) + len(runs)} runs failed; every cell is aggregated over "
            "the runs it has.",
            "",
            "| topology | task | seed | fault | kind | attempts | error |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        out += [
            f"| {m['topology']} | {m['task']} | {m['seed']} | {m['fault'] or '-'} | "
            f"{m['kind']} | {m['attempts']} | {m['error'].replace('|', '/')} |"
            for m in lost
        ]
        empty = [
            f"{c['topology']}/{c['task']}"
            for c in report["missing"].get("cells", [])
            if not c.get("aggregated", True)
        ]
        if empty:
            out += ["", f"Cells with no run left (no row in the tables below): {', '.join(empty)}."]
    retried = report.get("retries") or []
    if retried:
        out += [
            "",
            "## Retried runs",
            "",
            "Runs started again because their worker died (a run listed here and not under "
            "Missing runs completed on a later attempt).",
            "",
            "| topology | task | seed | fault | attempt | reason |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        out += [
            f"| {r['topology']} | {r['task']} | {r['seed']} | {r['fault'] or '-'} | "
            f"{r['attempt']} | {r['reason'].replace('|', '/')} |"
            for r in retried
        ]
    if report["cells"]:
        out += _cells_markdown(report["cells"])
    out += _envelope_section(report)
    out += [
        "",
        "## Configuration",
        "",
        "```json",
        json.dumps(
            {"suite": s, "config": report["config"], "environment": report["environment"]}, indent=1
        ),
        "```",
        "",
    ]
    return "\n".join(out)


def _cells_markdown(cells: list[dict[str, Any]]) -> list[str]:
    """E1-E3, E4 and the failure taxonomy, one row per cell (only the sections with data)."""
    out = [
        "",
        "## E1-E3 per topology and task",
        "",
        "E1 is the share of seeds solved with its 95% Wilson score interval [low, high]; "
        "E2 efficiency with its 95% t half-width over seeds; E3 per solved is n/a where no "
        "seed was solved.",
        "",
        "| topology | task | E1 success [95% Wilson] | E2 speedup / ideal (efficiency) | "
        "E3 messages / solved | E3 tokens / solved | E3 coordination share | width | "
        "depth | length | credit unit (units) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        out.append(
            f"| {c['topology']} | {c['task']} | {_e1(c)} | {c['E2_speedup']:.2f} / "
            f"{c['E2_ideal']:.0f} ({_e2(c)}) | "
            f"{_f(c['E3_messages_per_solved'], 1)} | {_f(c['E3_tokens_per_solved'], 0)} | "
            f"{c['E3_coordination_share']:.2f} | "
            f"{c['shape']['width']:.1f} | {c['shape']['depth']:.1f} | "
            f"{c['shape']['length']:.0f} | {c['credit_unit']} ({c['credit_units']:.1f}) |"
        )
    faults = sorted({f for c in cells for f in c["E4"]})
    if faults:
        out += [
            "",
            "## E4 error amplification",
            "",
            "Final error rate with faults injected (its 95% Wilson interval in the JSON as "
            "error_low / error_high); amplification = error rate / injected "
            "rate (above 1 amplifies, below 1 absorbs); excess = (error with faults - "
            "clean error) / injected rate.",
            "",
            "| topology | task | clean error | "
            + " | ".join(f"{f}: injected / error / amplification / excess" for f in faults)
            + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in faults) + " |",
        ]
        for c in cells:
            cols = []
            for f in faults:
                e = c["E4"].get(f)
                cols.append(
                    "n/a"
                    if e is None or not e["units"]
                    else f"{e['injected_rate']:.2f} / {e['error_rate']:.2f} / "
                    f"{_f(e['amplification'])} / {_f(e['excess_per_injected'])}"
                )
            out.append(
                f"| {c['topology']} | {c['task']} | {1 - c['E1_success']:.2f} | "
                + " | ".join(cols)
                + " |"
            )
    modes = list(cells[0]["failure_rate"]) if cells else []
    if modes:
        out += [
            "",
            "## Failure taxonomy (share of clean runs showing each mode)",
            "",
            "| topology | task | " + " | ".join(modes) + " |",
            "| --- | --- | " + " | ".join("---" for _ in modes) + " |",
        ]
        for c in cells:
            out.append(
                f"| {c['topology']} | {c['task']} | "
                + " | ".join(f"{c['failure_rate'][m]:.2f}" for m in modes)
                + " |"
            )
    return out


def _envelope_section(report: dict[str, Any]) -> list[str]:
    """The scale envelope's table and infeasible points (nothing when it has neither)."""
    out: list[str] = []
    if report["envelope"]:
        out += [
            "",
            "## Scale envelope (sim backend, virtual time)",
            "",
            "Swarm points: wide-search, one document per turn; industry: the staged "
            "three-level hierarchy (`orchestrace.masbench.envelope.INDUSTRY`). CPU s covers "
            "recording, validation and analysis; peak MiB is the peak resident memory of the "
            "point's own process (n/a when it ran in the suite's process).",
            "",
        ]
        out += envelope_markdown(report["envelope"])
    if report.get("envelope_infeasible"):
        pts = ", ".join(
            f"{p['agents']}x{p['target_length']}" for p in report["envelope_infeasible"]
        )
        out += ["", f"Infeasible envelope points (every agent needs a few events): {pts}."]
    return out


def write_report(report: dict[str, Any], out: str | Path, *, force: bool = False) -> Path:
    """Write ``report.json``, ``report.md`` and the plots into ``out``; return it.

    ``out`` is checked as ``orchestrace bench -o`` checks it: new, empty, or written by an
    earlier bench report (then only with ``force``). Each file is written atomically; when a
    write fails the files this call created are removed.

    Raises:
        orchestrace.io._output.OutputError: ``out`` may not be written, or a write failed.
        ConfigError: ``report`` is not a suite report (what :func:`run_suite` returns).
    """
    if not (
        isinstance(report, dict) and isinstance(report.get("suite"), dict) and "runs" in report
    ):
        raise ConfigError(
            "write_report takes the report run_suite returns (a dict with 'suite' and 'runs'), "
            f"got {type(report).__name__}"
        )
    with report_dir(out, force=force, report="bench") as target:
        with report_file(target / "report.json", "w") as fh:
            fh.write(report_json(report))
        with report_file(target / "report.md", "w") as fh:
            fh.write(markdown(report))
        _plots(report, target)
    return Path(out)


def _savefig(fig: Any, path: Path) -> None:
    with report_file(path) as fh:
        fig.savefig(fh, format="png", dpi=100)


def _plots(report: dict[str, Any], out: Path) -> None:
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return
    cells = report["cells"]
    if cells:
        labels = [f"{c['topology']}\n{c['task'].split('-')[0]}" for c in cells]
        x = range(len(cells))
        fig, axes = plt.subplots(2, 1, figsize=(max(8, len(cells) * 0.45), 6), sharex=True)
        e1 = [c["E1_success"] for c in cells]
        err = None
        if all("E1_success_low" in c for c in cells):
            err = [
                [max(0.0, v - c["E1_success_low"]) for v, c in zip(e1, cells, strict=True)],
                [max(0.0, c["E1_success_high"] - v) for v, c in zip(e1, cells, strict=True)],
            ]
        axes[0].bar(x, e1, color="tab:green", yerr=err, capsize=2, ecolor="k")
        axes[0].set_ylabel("E1 success")
        axes[0].set_ylim(0, 1.05)
        if err is not None:
            axes[0].set_title("E1 success with 95% Wilson intervals", fontsize=9)
        e2_err = [c.get("E2_efficiency_ci") for c in cells]
        axes[1].bar(
            x,
            [c["E2_efficiency"] for c in cells],
            color="tab:blue",
            yerr=None if None in e2_err else [0.0 if math.isnan(v) else v for v in e2_err],
            capsize=2,
            ecolor="k",
        )
        axes[1].set_ylabel("E2 efficiency (95% t)")
        axes[1].set_xticks(list(x), labels, rotation=90, fontsize=7)
        fig.tight_layout()
        _savefig(fig, out / "e1_e2.png")
        plt.close(fig)
        faults = sorted({f for c in cells for f in c["E4"]})
        if faults:
            fig, ax = plt.subplots(figsize=(max(8, len(cells) * 0.45), 3.5))
            w = 0.8 / len(faults)
            for i, f in enumerate(faults):
                ax.bar(
                    [j + i * w for j in x],
                    [(c["E4"].get(f) or {}).get("excess_per_injected") or 0.0 for c in cells],
                    width=w,
                    label=f,
                )
            ax.axhline(1.0, color="k", lw=0.8, ls="--")
            ax.axhline(0.0, color="k", lw=0.5)
            ax.set_ylabel("E4 excess error / injected rate")
            ax.set_title(
                "error the faults add, per unit of injected rate (above 1: amplified)",
                fontsize=9,
            )
            ax.set_xticks(list(x), labels, rotation=90, fontsize=7)
            ax.legend(fontsize=8)
            fig.tight_layout()
            _savefig(fig, out / "e4.png")
            plt.close(fig)
    if report["envelope"]:
        fig = scale_gap_figure(report["envelope"])
        _savefig(fig, out / "scale_gap.png")
        plt.close(fig)
    env = [r for r in report["envelope"] if r.get("target_length") is not None]
    if env:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for n in sorted({r["target_length"] for r in env}):
            rows = sorted((r for r in env if r["target_length"] == n), key=lambda r: r["agents"])
            axes[0].plot(
                [r["agents"] for r in rows], [r["cpu_s"] for r in rows], "o-", label=f"~{n} events"
            )
            axes[1].plot(
                [r["agents"] for r in rows],
                [r["speedup"] for r in rows],
                "o-",
                label=f"~{n} events",
            )
        for ax, name in zip(
            axes, ("CPU seconds per run", "speedup (work / critical path)"), strict=True
        ):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("agents")
            ax.set_title(name)
            ax.axvspan(1.5, 5.5, color="tab:gray", alpha=0.15)
            ax.axvspan(100, 350, color="tab:orange", alpha=0.12)
            ax.grid(alpha=0.3)
        axes[0].text(2, axes[0].get_ylim()[1] * 0.5, "academic", fontsize=8)
        axes[0].text(110, axes[0].get_ylim()[1] * 0.5, "production", fontsize=8)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        _savefig(fig, out / "envelope.png")
        plt.close(fig)
