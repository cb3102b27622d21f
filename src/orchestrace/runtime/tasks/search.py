"""``wide-search-v0``: count matching records across a generated corpus.

The corpus holds ``size`` short documents ("<name> works as <job> at <company> in <city>").
The question asks how many people work in one city. Parts are shards of the corpus; a worker
searches its shard with the ``search`` tool and counts; the answer is the sum of the counts.

Example:
    >>> t = WideSearchTask(seed=2, size=40)
    >>> parts = t.subtasks(4)
    >>> t.combine([p.truth for p in parts]) == t.answer
    True
    >>> len(t.tools()["search"](parts[0].data)) == parts[0].truth
    True
"""

from __future__ import annotations

from typing import Any

from orchestrace.runtime.tasks.base import Subtask, Task

__all__ = ["WideSearchTask"]

_FIRST = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lia"]
_LAST = ["Ng", "Okafor", "Park", "Quinn", "Rossi", "Sato", "Tan", "Umar", "Vega", "Wu"]
_JOBS = ["engineer", "analyst", "designer", "nurse", "teacher", "chef"]
_COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"]
_CITIES = ["Lagos", "Lima", "Oslo", "Pune", "Quito", "Riga", "Seoul", "Tunis"]


class WideSearchTask(Task):
    """How many people in the corpus work in a given city."""

    name = "wide-search-v0"
    unit = 25.0
    max_size = 20_000

    def __init__(self, seed: int = 0, size: int = 200) -> None:
        super().__init__(seed, size)
        r = self.rng
        self.docs = [
            {
                "id": i,
                "text": f"{_FIRST[r.integers(len(_FIRST))]} {_LAST[r.integers(len(_LAST))]} works "
                f"as {_JOBS[r.integers(len(_JOBS))]} at {_COMPANIES[r.integers(len(_COMPANIES))]} "
                f"in {_CITIES[r.integers(len(_CITIES))]}",
            }
            for i in range(size)
        ]
        self.city = _CITIES[int(r.integers(len(_CITIES)))]
        self.answer = self._count(self.docs)
        self.question = (
            f"How many people in the {size}-document corpus work in {self.city}? "
            "Reply with ANSWER: <integer>."
        )

    def _count(self, docs: list[dict[str, Any]]) -> int:
        return sum(1 for d in docs if d["text"].endswith(f" in {self.city}"))

    def _span(self, index: int, start: int, end: int) -> Subtask:
        return Subtask(
            index,
            f"Search documents {start}..{end - 1} of the corpus with the search tool and count "
            f"the people who work in {self.city}. Reply with ANSWER: <integer>.",
            self._count(self.docs[start:end]),
            end - start,
            {"start": start, "end": end, "city": self.city, "lo": start, "hi": end},
        )

    def span_truth(self, lo: int, hi: int) -> Any:
        """Matches among documents ``lo..hi-1``."""
        return self._count(self.docs[lo:hi])

    def combine(self, parts: list[Any]) -> Any:
        """Put part answers together (in part order)."""
        try:
            return int(sum(int(p) for p in parts))
        except (TypeError, ValueError):
            return None

    def tools(self) -> dict[str, Any]:
        """Tools bound to this instance."""

        def search(args: dict[str, Any]) -> list[str]:
            start, end = int(args.get("start", 0)), int(args.get("end", self.size))
            if not 0 <= start <= end <= self.size:
                raise ValueError(f"documents {start}..{end} out of range 0..{self.size}")
            city = str(args.get("city", ""))
            texts = [str(d["text"]) for d in self.docs[start:end]]
            return [t for t in texts if t.endswith(f" in {city}")]

        return {"search": search}
