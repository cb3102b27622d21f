"""The trace package's internal layering: which module may import which."""

import ast
from pathlib import Path

import pytest

TRACE = Path(__file__).parents[2] / "src" / "orchestrace" / "trace"


def imported_modules(name: str) -> set[str]:
    """Every orchestrace module ``trace/<name>.py`` imports, at any depth (even TYPE_CHECKING)."""
    tree = ast.parse((TRACE / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("orchestrace")}


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("graph", {"orchestrace.trace.model"}),
        ("steps", {"orchestrace.trace.model", "orchestrace.trace.graph"}),
        ("enums", {"orchestrace.trace.model", "orchestrace.trace.graph"}),
        ("_ids", {"orchestrace.trace.model", "orchestrace.trace.graph"}),
        ("records", {"orchestrace.trace.model", "orchestrace.trace.graph"}),
    ],
)
def test_lower_modules_never_import_upper_ones(module, forbidden):
    assert not imported_modules(module) & forbidden


def test_enums_import_nothing_of_the_package():
    assert imported_modules("enums") == set()


def test_nothing_in_trace_imports_io_or_above():
    for path in TRACE.glob("*.py"):
        upward = {
            m
            for m in imported_modules(path.stem)
            if m.startswith("orchestrace.")
            and m.split(".")[1] not in ("trace", "errors", "_version", "_collector", "_numbers")
        }
        assert not upward, (path.name, upward)


def test_the_graph_compiles_any_records_shaped_like_a_trace():
    """The graph reads records through protocols: a plain namespace compiles like a Trace."""
    from types import SimpleNamespace

    from orchestrace.trace.generate import generate_trace
    from orchestrace.trace.graph import TraceGraph

    tr = generate_trace(agents=3, steps=30, seed=1)
    fields = ("id", "t", "dur", "type", "agent", "to", "role", "tool", "decision", "step")
    fields += ("tokens_in", "tokens_out", "cost")
    events = [SimpleNamespace(**{f: getattr(e, f) for f in fields}) for e in tr.events]
    edges = [SimpleNamespace(src=e.src, dst=e.dst, type=e.type) for e in tr.edges]
    g = TraceGraph.from_trace(SimpleNamespace(events=events, edges=edges))
    assert g.critical_path() == tr.graph.critical_path()
    assert g.critical_steps() == tr.graph.critical_steps()
    assert (g.tokens_in == tr.graph.tokens_in).all() and g.names == tr.graph.names
