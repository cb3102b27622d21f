"""Build a small orchestration trace by hand, check it, analyse it and save it.

Run: python examples/quickstart.py [OUT_DIR]
"""

import sys
import tempfile
from pathlib import Path

import orchestrace as ot


def main(out_dir: Path) -> None:
    b = ot.TraceBuilder(task_id="sum-three-numbers", topology="centralized")
    plan = b.llm("lead", dur=1.0, step=0, tokens_in=200, tokens_out=40)
    spawns = [b.spawn("lead", f"w{i}", role="worker", after=[plan], step=1) for i in range(3)]
    returns = []
    for i, s in enumerate(spawns):
        _, result = b.tool(f"w{i}", "calculator", after=[s], dur=0.5 * (i + 1), content=f"{i}+1")
        returns.append(b.ret(f"w{i}", "lead", content=str(i + 1), after=[result]))
    b.aggregate("lead", returns, content="6", step=2, dur=0.2)
    b.stop("lead", "answer found", step=3)
    trace = b.build(rewards={"team": 1.0})

    assert ot.check_trace(trace) == []
    summary = ot.summarize(trace)
    print(f"critical path {summary['critical_path_s']:.1f} s over {summary['critical_path']}")
    print(f"speedup {summary['speedup']:.2f}x, critical steps {summary['critical_steps']}")
    for name in ("trace.json", "trace.jsonl", "trace.parquet"):
        ot.dump(trace, out_dir / name)
        assert ot.load(out_dir / name) == trace
    print(f"saved to {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
