"""The security report: Markdown tables, ``report.json``, ``runs.jsonl.gz`` and plots.

Example:
    >>> _r({"rate": 0.5, "low": 0.2, "high": 0.8})
    '0.50 [0.20, 0.80]'
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.io._output import report_dir, report_file, report_json


def _r(cell: dict[str, Any] | None) -> str:
    if not cell or cell.get("rate") is None:
        return "n/a"
    return f"{cell['rate']:.2f} [{cell['low']:.2f}, {cell['high']:.2f}]"


def _p(cell: dict[str, Any] | None) -> str:
    if not cell or cell.get("rate") is None:
        return "n/a"
    return f"{cell['rate']:.2f}"


def _f(x: float | None, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def security_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (AgentDojo-style tables)."""
    s = report["suite"]
    defenses = list(s["defenses"])
    attacks = list(s["attacks"])
    out = [
        f"# Security benchmark report: {s['id']}",
        "",
        s.get("description", ""),
        "",
        f"Backend `{report['config']['backend']}`, {s['seeds']} seeds per cell, team size "
        f"{s['agents']}, task size {s['task_size']}, "
        + (
            f"simulated victims' susceptibility {s['susceptibility']} (the same with and "
            "without defenses); "
            if report["config"]["backend"] == "sim"
            else "the model decides whether to follow an instruction (susceptibility is "
            "the simulator's, not used); "
        )
        + f"{report.get('runs_count', len(report.get('runs', [])))} "
        f"runs in {report['wall_s']:.0f} s wall.",
        "",
        "Rates carry their 95% Wilson score interval [low, high]. Targeted ASR: the share of "
        "attacked runs where the attack reached its goal, checked on the trace. Safety = 1 - "
        "ASR; ERS = harmonic mean of safety and benign utility. Utility cost = benign utility "
        "without defenses minus with the setting.",
        "",
        "## Summary by defense",
        "",
        "| defense | benign utility | utility under attack | targeted ASR | safety | ERS | "
        "utility cost | tokens / benign run | safety events / run |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d in defenses:
        row = report["summary"][d]
        out.append(
            f"| {d} | {_r(row['benign_utility'])} | {_r(row['utility_under_attack'])} | "
            f"{_r(row['asr'])} | {_f(row['safety'])} | {_f(row['ers'])} | "
            f"{_f(row.get('utility_cost'))} | {_f(row['tokens_per_benign_run'], 0)} | "
            f"{_f(row['safety_events_per_run'])} |"
        )
    out += [
        "",
        "## Targeted ASR by attack and defense (pooled over topologies and tasks)",
        "",
        "| attack | " + " | ".join(defenses) + " |",
        "| --- | " + " | ".join("---" for _ in defenses) + " |",
    ]
    for a in attacks:
        out.append(
            f"| {a} | " + " | ".join(_p(report["per_attack"][d][a]["asr"]) for d in defenses) + " |"
        )
    out += [
        "",
        "## Utility under attack by attack and defense",
        "",
        "| attack | " + " | ".join(defenses) + " |",
        "| --- | " + " | ".join("---" for _ in defenses) + " |",
    ]
    for a in attacks:
        out.append(
            f"| {a} | "
            + " | ".join(_p(report["per_attack"][d][a]["utility_under_attack"]) for d in defenses)
            + " |"
        )
    topos = list(s["topologies"])
    mech = [a for a in ("spoofing", "escalation", "aggregation_forge") if a in attacks]
    pair = [d for d in ("none", "sig_cap") if d in defenses]
    if mech and len(pair) == 2:
        out += [
            "",
            "## Spoofing and escalation by topology: no defense vs signatures + capabilities",
            "",
            "| topology | " + " | ".join(f"{a}: none / sig_cap" for a in mech) + " |",
            "| --- | " + " | ".join("---" for _ in mech) + " |",
        ]
        for t in topos:
            cols = []
            for a in mech:
                lo = report["per_attack"]["none"][a]["by_topology"][t]
                hi = report["per_attack"]["sig_cap"][a]["by_topology"][t]
                cols.append("n/a" if not lo["n"] else f"{_r(lo)} / {_r(hi)}")
            out.append(f"| {t} | " + " | ".join(cols) + " |")
    inj = [
        a
        for a in (
            "direct_injection",
            "direct_injection_reworded",
            "indirect_injection_tool",
            "indirect_injection_document",
            "indirect_injection_reworded",
            "replication",
        )
        if a in attacks
    ]
    shown = [d for d in ("none", "taint", "detector", "all") if d in defenses]
    if inj and "none" in shown and len(shown) > 1:
        out += [
            "",
            "## Injection: the fixed wording and rewordings, per defense",
            "",
            "`*_reworded` settings use paraphrases of the instruction the built-in detector's "
            "patterns were not written for. Taint endorses by role and never reads the "
            "wording; the detector is a heuristic filter on the wording. ASR / utility under "
            "attack:",
            "",
            "| attack | " + " | ".join(shown) + " |",
            "| --- | " + " | ".join("---" for _ in shown) + " |",
        ]
        for a in inj:
            cells = [report["per_attack"][d][a] for d in shown]
            out.append(
                f"| {a} | "
                + " | ".join(
                    f"{_r(c['asr'])} / {_f(c['utility_under_attack']['rate'])}" for c in cells
                )
                + " |"
            )
        out += [
            "",
            "Benign utility: "
            + ", ".join(f"{d} {_r(report['summary'][d]['benign_utility'])}" for d in shown)
            + ".",
        ]
    out += [
        "",
        "## Safety and ERS per topology",
        "",
        "| topology | " + " | ".join(f"{d} S / ERS" for d in defenses) + " |",
        "| --- | " + " | ".join("---" for _ in defenses) + " |",
    ]
    for t in topos:
        cells = [report["per_topology"][d][t] for d in defenses]
        out.append(
            f"| {t} | " + " | ".join(f"{_f(c['safety'])} / {_f(c['ers'])}" for c in cells) + " |"
        )
    out += [
        "",
        "## Collusion detector and rewards (no defense)",
        "",
        "Flagged: share of runs where the detector finds agents agreeing on an answer the "
        "task's checker rejects (it reads the checker's per-call truth recorded in the "
        "trace: a benchmark signal, not one a deployed reward has), or copying each other "
        "(truth-free). Agreement reward: the share of solving agents whose answer the final "
        "answer accepted (it is the answer, or one of the parts a combined answer was built "
        "from); it needs no ground truth, so collusion can hack it. On centralized, swarm and "
        "hierarchical each worker solves its own part, so every part is accepted and the "
        "reward is 1 by construction, colluded or not: there the collusion's effect shows in "
        "the gated reward and the solve rate only. Gated: the same reward set to 0 on "
        "flagged runs, so it uses the checker's truth.",
        "",
        "| topology | runs | flagged benign | flagged colluded | agreement reward benign / "
        "colluded | gated benign / colluded | solved benign / colluded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in topos:
        c = report["collusion"][t]
        b, k = c["benign"], c["collusion"]
        out.append(
            f"| {t} | {b['runs']} / {k['runs']} | {_r(b['flagged'])} | {_r(k['flagged'])} | "
            f"{_f(b['agreement_reward'])} / {_f(k['agreement_reward'])} | "
            f"{_f(b['gated_reward'])} / {_f(k['gated_reward'])} | "
            f"{_p(b['solved'])} / {_p(k['solved'])} |"
        )
    if report["not_applicable"]:
        out += [
            "",
            "## Attacks that do not apply",
            "",
            "| attack | topology | task | reason |",
            "| --- | --- | --- | --- |",
        ]
        for r in report["not_applicable"]:
            out.append(f"| {r['attack']} | {r['topology']} | {r['task']} | {r['reason']} |")
    out += [
        "",
        "## Configuration",
        "",
        "```json",
        json.dumps(
            {"suite": s, "config": report["config"], "environment": report["environment"]},
            indent=1,
        ),
        "```",
        "",
    ]
    return "\n".join(out)


def write_security_report(report: dict[str, Any], out: str | Path, *, force: bool = False) -> Path:
    """Write ``report.json``, ``runs.jsonl.gz``, ``report.md`` and the plots into ``out``.

    ``report.json`` holds everything but the per-run rows, which go to ``runs.jsonl.gz`` (one
    JSON object a line; ``read_security_runs`` reads them back). ``out`` is checked as
    ``orchestrace bench -o`` checks it (new, empty, or an earlier bench report with ``force``).
    Returns ``out``.
    """
    runs = report.get("runs", [])
    head = {k: v for k, v in report.items() if k != "runs"}
    head["runs_file"] = "runs.jsonl.gz"
    head["runs_count"] = len(runs)
    with report_dir(out, force=force, report="bench") as target:
        with report_file(target / "report.json", "w") as fh:
            fh.write(report_json(head))
        lines = "".join(report_json(r, indent=None) + "\n" for r in runs).encode()
        with report_file(target / "runs.jsonl.gz") as fh:
            fh.write(gzip.compress(lines, mtime=0))
        with report_file(target / "report.md", "w") as fh:
            fh.write(security_markdown(head))
        _plots(head, target)
    return Path(out)


def read_security_runs(out: str | Path) -> list[dict[str, Any]]:
    """The per-run rows of a report written by :func:`write_security_report`.

    Raises:
        ConfigError: The file is missing or not what the writer writes.
    """
    path = Path(out) / "runs.jsonl.gz"
    try:
        text = gzip.decompress(path.read_bytes()).decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, EOFError, ValueError) as err:
        raise ConfigError(
            f"{path}: cannot read the runs of a security report ({err}); "
            "write it again with orchestrace bench --suite security-v1"
        ) from None


def _plots(report: dict[str, Any], out: Path) -> None:
    try:
        import matplotlib  # noqa: PLC0415  optional extra [learn]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415  optional extra [learn]
    except ImportError:
        return

    s = report["suite"]
    defenses, attacks = list(s["defenses"]), list(s["attacks"])
    fig, ax = plt.subplots(figsize=(max(8, len(attacks) * 0.9), 4))
    w = 0.8 / max(1, len(defenses))
    for i, d in enumerate(defenses):
        vals = [report["per_attack"][d][a]["asr"]["rate"] or 0.0 for a in attacks]
        ax.bar([j + i * w for j in range(len(attacks))], vals, width=w, label=d)
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(attacks))], attacks, rotation=45, ha="right")
    ax.set_ylabel("targeted ASR")
    ax.set_ylim(0, 1.05)
    ax.set_title("attack success by defense (pooled over topologies and tasks)", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    with report_file(out / "asr_by_defense.png") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for d in defenses:
        row = report["summary"][d]
        x, y = row["asr"]["rate"], row["utility_under_attack"]["rate"]
        if x is None or y is None:
            continue
        ax.scatter([x], [y], s=40)
        ax.annotate(d, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("targeted ASR")
    ax.set_ylabel("utility under attack")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title("utility under attack vs ASR (AgentDojo-style)", fontsize=9)
    fig.tight_layout()
    with report_file(out / "utility_vs_asr.png") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
