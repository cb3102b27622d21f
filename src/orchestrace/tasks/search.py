"""``wide-search-v2`` (and ``-v1``, ``-v0``): count matching records across a generated corpus.

The corpus holds ``size`` short documents ("<name> works as <job> at <company> in <city>").
The question asks how many people work in one city. Parts are shards of the corpus; a worker
searches its shard with the ``search`` tool and counts; the answer is the sum of the counts.

In ``wide-search-v1`` the search results are the worker's evidence: they are shown in its
prompt, and the simulator counts what was retrieved (a failed search leaves it guessing).
``wide-search-v0`` keeps the earlier behaviour: the search is called and recorded, but its
results never reach the prompt, and the simulator answers as if it had read the shard.
``wide-search-v2`` is ``-v1`` with a per-read error rate: counting the documents a search
listed errs at ``(1 - skill) * 0.5`` (5% for a worker) whatever the shard's size, where ``-v1``
keeps the size-driven (quadratic) rate of solving unaided, so that tools matter at every team
size; its judges, critics and revisers run the search themselves and decide from what it
returns (on ``-v1`` their own solving reads the ground truth).

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

from orchestrace.tasks.base import Subtask, Task

__all__ = ["WideSearchTask", "WideSearchTaskV1", "WideSearchTaskV2"]

_FIRST = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lia"]
_LAST = ["Ng", "Okafor", "Park", "Quinn", "Rossi", "Sato", "Tan", "Umar", "Vega", "Wu"]
_JOBS = ["engineer", "analyst", "designer", "nurse", "teacher", "chef"]
_COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"]
_CITIES = ["Lagos", "Lima", "Oslo", "Pune", "Quito", "Riga", "Seoul", "Tunis"]


class WideSearchTask(Task):
    """How many people in the corpus work in a given city."""

    name = "wide-search-v0"
    unit = 25.0
    max_size = 120_000

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


class WideSearchTaskV1(WideSearchTask):
    """``wide-search-v1``: the count rests on the documents the search returned.

    Example:
        >>> t = WideSearchTaskV1(seed=2, size=40)
        >>> part = t.subtasks(4)[0]
        >>> t.read_evidence(part, t.tools()["search"](part.data)) == part.truth
        True
        >>> t.guess(part)  # from the question alone: one city in eight
        1
    """

    name = "wide-search-v1"
    #: Tool results reach the prompt and the simulator answers from them.
    evidence = True

    def _span(self, index: int, start: int, end: int) -> Subtask:
        part = super()._span(index, start, end)
        prompt = (
            f"The search tool was run on documents {start}..{end - 1} of the corpus for people "
            f"who work in {self.city}; its results are below. Count the people who work in "
            f"{self.city}. Reply with ANSWER: <integer>."
        )
        return Subtask(part.index, prompt, part.truth, part.size, part.data)

    def read_evidence(self, part: Subtask, results: list[Any]) -> int:
        """What a faithful reader of ``results`` answers: the matching documents it lists."""
        city = str(part.data.get("city", self.city))
        return sum(1 for doc in results if str(doc).endswith(f" in {city}"))

    def guess(self, part: Subtask) -> int:
        """An answer from the question alone: the share of one city among eight."""
        return round(part.size / len(_CITIES))


class WideSearchTaskV2(WideSearchTaskV1):
    """``wide-search-v2``: reading the retrieved documents errs at a fixed per-read rate.

    Example:
        >>> WideSearchTaskV2(seed=2, size=40).read_hardness
        0.5
    """

    name = "wide-search-v2"
    #: Hardness of counting the documents a search listed (any shard size).
    read_hardness = 0.5
    #: Judges, critics and revisers search themselves (they never read the truth).
    verifiers_look_up = True
