"""The string tables of a compiled graph: names to codes, in the order first met.

Example:
    >>> t = NameTable(["lead", "w0"])
    >>> t["w1"], t["lead"], t.names
    (2, 0, ['lead', 'w0', 'w1'])
    >>> _NoneAware(t)[None]
    -1
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["NameTable"]


class _NoneAware(dict[Any, int]):
    """A view of a :class:`NameTable` table that maps ``None`` to -1 (C-level lookups)."""

    def __init__(self, table: NameTable) -> None:
        super().__init__(table)
        self[None] = -1
        self._table = table

    def __missing__(self, name: str) -> int:
        code = self[name] = self._table[name]
        return code


class NameTable(dict[str, int]):
    """An append-only string table: ``table[name]`` gives the code, adding new names.

    The agent, role and tool names of a :class:`TraceGraph`; ``names`` lists them by code.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        super().__init__()
        self.names: list[str] = []
        for x in names:
            self[x]

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self.names)
        self.names.append(name)
        return code

    def code(self, name: str) -> int:
        """The code of ``name`` (added when new)."""
        return self[name]
