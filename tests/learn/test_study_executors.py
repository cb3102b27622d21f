"""The learned-stopping study on every executor: the same results (timings aside)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("torch")

from orchestrace.executors import make_executor
from orchestrace.learn.stopping import StudyConfig, run_study

TINY = StudyConfig(
    budget=32,
    train_seeds=2,
    train_episodes=64,
    weights=(0.1,),
    eval_seeds=1,
    episodes=8,
    live_episodes=2,
    samples=20,
)


def _stable(study: dict[str, Any]) -> str:
    """The study without wall-clock and CPU timings."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.endswith(("_s", "cpu_s"))}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(study), sort_keys=True, default=repr)


@pytest.mark.slow
def test_study_is_the_same_on_every_executor(shared_ray: str | None) -> None:
    local = _stable(run_study(["multihop"], config=TINY, executor=make_executor("local")))
    with make_executor("process", 2) as ex:
        process = _stable(run_study(["multihop"], config=TINY, executor=ex))
    assert local == process
    if shared_ray is not None:
        on_ray = _stable(run_study(["multihop"], config=TINY, executor=make_executor("ray", 2)))
        assert local == on_ray


def _fail_replicate_1(task: str, r: int, cfg: StudyConfig, ev: Any) -> dict[str, Any]:
    from orchestrace.learn import stopping

    if r == 1:
        raise ValueError("replicate 1 cannot train")
    return stopping._REAL_REPLICATE(task, r, cfg, ev)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.slow
def test_a_failed_job_leaves_the_rest_of_the_study_and_is_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from orchestrace.learn import stopping

    monkeypatch.setattr(stopping, "_REAL_REPLICATE", stopping._job_replicate, raising=False)
    monkeypatch.setattr(stopping, "_job_replicate", _fail_replicate_1)
    study = run_study(["multihop"], config=TINY, jobs=1, out=tmp_path / "study")
    assert study["missing"] == [
        {
            "task": "multihop-v0",
            "job": "replicate 1",
            "error": "ValueError: replicate 1 cannot train",
            "attempts": 1,
            "kind": "raised",
        }
    ]
    res = study["tasks"]["multihop-v0"]
    assert res["replicates"] == [0] and res["live_check"]["mismatches"] == 0
    md = (tmp_path / "study" / "results.md").read_text()
    assert "## Missing" in md and "| multihop-v0 | replicate 1 | raised | 1 |" in md
    assert stopping.missing_note(study).startswith(
        "1 study job failed (multihop-v0 replicate 1: ValueError: replicate 1 cannot train); "
        "tasks left out: none"
    )

    def no_bank(task: str, seeds: list[int]) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(stopping, "_job_bank", no_bank)
    study = run_study(["multihop"], config=TINY, jobs=1)
    assert study["tasks"] == {} and study["missing"][0]["job"] == "evaluation bank"
    assert "tasks left out: multihop-v0" in stopping.missing_note(study)
