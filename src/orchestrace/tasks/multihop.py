"""``multihop-v2`` (and ``-v1``, ``-v0``): follow a chain of relations through a generated knowledge table.

Starting from an entity, follow ``size`` relations (``manager``, ``city``, ``mentor``...) with the
``lookup`` tool. Each hop needs the previous hop's answer, so parts run in sequence: the task
tests orchestration where parallelism cannot help.

In ``multihop-v1`` the lookups are the worker's evidence: they start from the entity the worker
was handed (the previous part's answer), are shown in its prompt, and the simulator answers
with the entity the chain reached; a failed lookup breaks the chain and leaves it guessing.
``multihop-v0`` keeps the earlier behaviour: lookups are recorded but never shown, and the
simulator answers from the part's ground truth (wrong only when its input was wrong).
``multihop-v2`` is ``-v1`` where reading a lookup chain errs at a fixed per-read rate
(``(1 - skill) * 0.5``) and judges, critics and revisers run the lookups themselves and decide
from what they return (on ``-v1`` their own solving reads the ground truth).

Example:
    >>> t = MultiHopTask(seed=3, size=4)
    >>> parts = t.subtasks(4)
    >>> [p.size for p in parts], parts[-1].truth == t.answer
    ([1, 1, 1, 1], True)
    >>> t.tools()["lookup"]({"entity": t.start, "relation": t.relations[0]}) == parts[0].truth
    True
"""

from __future__ import annotations

from typing import Any

from orchestrace.tasks.base import Subtask, Task

__all__ = ["MultiHopTask", "MultiHopTaskV1", "MultiHopTaskV2"]

_RELATIONS = ["manager", "mentor", "sibling", "neighbor", "rival", "partner"]


class MultiHopTask(Task):
    """Answer ``relation_k(...relation_1(start))``."""

    name = "multihop-v0"
    wrong_kind = "choice"
    unit = 2.0
    parallel = False
    max_size = 10_000

    def __init__(self, seed: int = 0, size: int = 4) -> None:
        super().__init__(seed, size)
        r = self.rng
        self.entities = [f"entity_{i}" for i in range(40)]
        self.table = {
            (e, rel): self.entities[int(r.integers(len(self.entities)))]
            for e in self.entities
            for rel in _RELATIONS
        }
        self.start = self.entities[int(r.integers(len(self.entities)))]
        self.relations = [_RELATIONS[int(r.integers(len(_RELATIONS)))] for _ in range(size)]
        chain = [self.start]
        for rel in self.relations:
            chain.append(self.table[(chain[-1], rel)])
        self.chain = chain
        self.answer = chain[-1]
        self.choices = list(self.entities)
        path = " of the ".join(reversed(self.relations))
        self.question = f"Who is the {path} of {self.start}? Reply with ANSWER: <entity>."

    def _span(self, index: int, lo: int, hi: int) -> Subtask:
        rels = self.relations[lo:hi]
        path = " of the ".join(reversed(rels))
        return Subtask(
            index,
            f"Using the lookup tool, find the {path} of {self.chain[lo]}. "
            "Reply with ANSWER: <entity>.",
            self.chain[hi],
            len(rels),
            {"relations": rels, "start": self.chain[lo], "lo": lo, "hi": hi},
        )

    def span_truth(self, lo: int, hi: int) -> Any:
        """The entity reached after hop ``hi``."""
        return self.chain[hi]

    def combine(self, parts: list[Any]) -> Any:
        """Put part answers together (in part order)."""
        return parts[-1] if parts else None

    def tools(self) -> dict[str, Any]:
        """Tools bound to this instance."""

        def lookup(args: dict[str, Any]) -> str:
            key = (str(args.get("entity", "")), str(args.get("relation", "")))
            if key not in self.table:
                raise ValueError(f"no entry for {key[0]!r} / {key[1]!r}")
            return self.table[key]

        return {"lookup": lookup}


class MultiHopTaskV1(MultiHopTask):
    """``multihop-v1``: the answer is the entity the worker's own lookups reached.

    Example:
        >>> t = MultiHopTaskV1(seed=3, size=4)
        >>> part = t.subtasks(2)[1]
        >>> part.prompt.startswith("Find the ") and "{previous}" in part.prompt
        True
        >>> t.read_evidence(part, ["entity_1", "entity_2"]), t.guess(part) is None
        ('entity_2', True)
    """

    name = "multihop-v1"
    #: Tool results reach the prompt and the simulator answers from them.
    evidence = True

    def _span(self, index: int, lo: int, hi: int) -> Subtask:
        part = super()._span(index, lo, hi)
        path = " of the ".join(reversed(self.relations[lo:hi]))
        prompt = (
            f"Find the {path} of {{previous}}. The lookup tool's results are below. "
            "Reply with ANSWER: <entity>."
        )
        return Subtask(part.index, prompt, part.truth, part.size, part.data)

    def read_evidence(self, part: Subtask, results: list[Any]) -> Any:
        """What a faithful reader of a complete lookup chain answers: the last entity."""
        return results[-1] if results else None

    def guess(self, part: Subtask) -> Any:
        """No answer follows from the question alone (the simulator picks an entity)."""
        return None


class MultiHopTaskV2(MultiHopTaskV1):
    """``multihop-v2``: fixed per-read error rate; verifiers answer from their own lookups.

    Example:
        >>> t = MultiHopTaskV2(seed=3, size=4)
        >>> t.read_hardness, t.verifiers_look_up
        (0.5, True)
    """

    name = "multihop-v2"
    #: Hardness of reading the entity a lookup chain reached (any chain length).
    read_hardness = 0.5
    #: Judges, critics and revisers run the lookups themselves (they never read the truth).
    verifiers_look_up = True
