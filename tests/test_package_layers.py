"""The package layers of docs/architecture.md hold for every import in ``src/orchestrace``.

The table in the document is the source: a package imports only from lower rows, and packages on
one row do not import each other. Imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "orchestrace"
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

#: Modules that belong to another unit of the table.
SAME_UNIT = {"_ray_executor": "executors", "_pools": "executors"}
#: Imports the document names as exceptions: (importing module, imported module).
EXCEPTIONS = {("orchestrace.rewards.base", "orchestrace.credit.base")}


def layers_of(text: str) -> dict[str, int]:
    """Row of every unit named in the first code block after ``## Layers``."""
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    units = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    rows: dict[str, int] = {}
    row = None
    for line in block.splitlines():
        m = re.match(r"^\s*(\d+)\s", line)
        if m:
            row = int(m.group(1))
            line = line[m.end() :]
        for word in line.split():
            if word not in units:
                break
            assert row is not None, f"{word} is listed before any row number"
            rows[word] = row
    return rows


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = SRC) -> list[tuple[str, int]]:
    """Every ``orchestrace`` module ``path`` imports, with the line."""
    mod = module_name(path, root)
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "orchestrace":
                found += [(f"orchestrace.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((target, node.lineno))
    return [(t, line) for t, line in found if t.split(".")[0] == "orchestrace"]


def unit(module: str, rows: dict[str, int]) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    name = SAME_UNIT.get(parts[1], parts[1])
    return name if name in rows else None


def upward_imports(rows: dict[str, int], root: Path = SRC) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        src = unit(mod, rows)
        if src is None:
            continue
        for target, line in imports(path, root):
            dst = unit(target, rows)
            if dst is None or dst == src:
                continue
            pair = (mod, ".".join(target.split(".")[:3]))
            if rows[dst] >= rows[src] and pair not in EXCEPTIONS:
                bad.append(
                    f"{path.relative_to(root.parent)}:{line}: {src} (row {rows[src]}) imports "
                    f"{target} ({dst}, row {rows[dst]})"
                )
    return bad


def test_every_unit_of_the_package_has_a_row() -> None:
    rows = layers_of(DOC.read_text(encoding="utf-8"))
    units = {
        p.stem
        for p in SRC.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    missing = sorted(units - rows.keys() - SAME_UNIT.keys())
    assert not missing, f"docs/architecture.md gives no row to: {missing}"


def test_no_import_goes_up_or_across_a_row() -> None:
    bad = upward_imports(layers_of(DOC.read_text(encoding="utf-8")))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from orchestrace.learn import env\n", "trace (row 2) imports orchestrace.learn"),
        ("def f():\n    import orchestrace.io.json\n", "trace (row 2) imports orchestrace.io.json"),
        ("from ..executors import Executor\n", "trace (row 2) imports orchestrace.executors"),
        ("from orchestrace import cli\n", "trace (row 2) imports orchestrace.cli"),
    ],
)
def test_the_check_finds_an_upward_or_sideways_import(
    tmp_path: Path, source: str, expected: str
) -> None:
    root = tmp_path / "orchestrace"
    (root / "trace").mkdir(parents=True)
    (root / "trace" / "__init__.py").write_text("", encoding="utf-8")
    (root / "trace" / "planted.py").write_text(source, encoding="utf-8")
    (root / "trace" / "fine.py").write_text("from orchestrace.errors import ConfigError\n")
    bad = upward_imports(layers_of(DOC.read_text(encoding="utf-8")), root)
    assert len(bad) == 1, bad
    assert expected in bad[0] and "planted.py" in bad[0], bad


def test_the_row_table_is_read_as_written() -> None:
    rows = layers_of(DOC.read_text(encoding="utf-8"))
    assert rows["cli"] > rows["learn"] > rows["credit"] > rows["rewards"] > rows["runtime"]
    assert rows["runtime"] > rows["io"] > rows["trace"] > rows["errors"]
    assert rows["credit"] == rows["safety"] == rows["integrations"] == rows["testing"]
