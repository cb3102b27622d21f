"""Quality of the test suite itself: no assertion that cannot fail.

``vacuous_checks`` walks a test module's syntax tree and reports checks that pass whatever the
code under test does: an ``assert`` whose condition is always true (``x or True``, a non-empty
literal or tuple, ``a == a``, ``len(x) >= 0``, ``isinstance(x, object)``, a branch that is
``True``), a check written where the assertion message goes (``assert a, b and c``), an
``assert`` whose ``AssertionError`` an ``except`` swallows, an ``assert`` inside a
``pytest.raises`` block (never reached when the block raises), and a ``pytest.raises`` block
whose body cannot raise. Every module under ``tests/`` must be free of them.

Lint (``ruff``) and types (``mypy``) are checked by CI as their own steps (``.ci/run``), not here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Calls whose result is never negative.
_NON_NEGATIVE = frozenset({"len", "abs"})
#: Exception names whose handler also catches ``AssertionError``.
_CATCHES_ASSERT = frozenset({"AssertionError", "Exception", "BaseException"})
#: Mock attributes that look like checks but are just (always truthy) attributes.
_MOCK_LOOKALIKES = frozenset(
    {"called_once", "called_once_with", "called_with", "has_calls", "not_called", "any_call"}
)
#: Nodes whose evaluation can raise; a ``pytest.raises`` body without one cannot raise.
_CAN_RAISE = (
    ast.Call,
    ast.Raise,
    ast.Assert,
    ast.Subscript,
    ast.Attribute,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Await,
    ast.Import,
    ast.ImportFrom,
    ast.Delete,
    ast.AugAssign,
    ast.With,
    ast.AsyncWith,
    ast.For,
    ast.AsyncFor,
    ast.Starred,
    ast.Yield,
    ast.YieldFrom,
)


def _can_raise(node: ast.AST) -> bool:
    # reading a name can raise NameError; binding one cannot
    return isinstance(node, _CAN_RAISE) or (
        isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    )


def _truthy_constant(node: ast.expr) -> bool:
    """Whether ``node`` is a literal that is always true (``True``, ``1``, ``"x"``, ``(a,)``)."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and v.value for v in node.values)
    if isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _falsy_constant(node.operand)
    return False


def _falsy_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return not node.value
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return False


def _number(node: ast.expr) -> float | None:
    """The value of a numeric literal (``-1`` included), or ``None``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else float(node.value)
    return None


def _at_most_zero(op: ast.cmpop, bound: float | None, inclusive: type, strict: type) -> bool:
    """Whether ``n <op> bound`` holds for every ``n >= 0``."""
    if bound is None:
        return False
    return (isinstance(op, inclusive) and bound <= 0) or (isinstance(op, strict) and bound < 0)


def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return None


def _is_pytest_raises(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr == "raises"
        and isinstance(f.value, ast.Name)
        and f.value.id == "pytest"
    ) or (isinstance(f, ast.Name) and f.id == "raises")


def _raises_assertion(item: ast.withitem) -> bool:
    call = item.context_expr
    assert isinstance(call, ast.Call)
    names = {n.id for arg in call.args[:1] for n in ast.walk(arg) if isinstance(n, ast.Name)}
    return bool(names & _CATCHES_ASSERT)


def _always_true(test: ast.expr) -> str | None:
    """Why ``test`` is always true, or ``None``."""
    if _truthy_constant(test):
        return "the condition is a non-empty literal, always true"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        if any(_truthy_constant(v) for v in test.values):
            return "`or` with an always-true operand"
        for v in test.values:
            why = _always_true(v)
            if why:
                return f"`or` with an always-true operand ({why})"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        whys = [_always_true(v) for v in test.values]
        if all(whys):
            return whys[0]
    if isinstance(test, ast.IfExp) and (
        _truthy_constant(test.body) or _truthy_constant(test.orelse)
    ):
        return (
            "a branch of the conditional is always true, so the check is skipped silently "
            "whenever its condition fails"
        )
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        # the same pure expression on both sides (calls may differ: `f() == f()` checks determinism)
        same = ast.dump(left) == ast.dump(right) and not any(
            isinstance(n, ast.Call | ast.Await | ast.NamedExpr | ast.Yield | ast.YieldFrom)
            for n in ast.walk(left)
        )
        if same and isinstance(op, ast.Eq | ast.Is | ast.LtE | ast.GtE | ast.In):
            return "compares an expression with itself"
        lo, hi = _number(right), _number(left)
        if _call_name(left) in _NON_NEGATIVE and _at_most_zero(op, lo, ast.GtE, ast.Gt):
            return f"{_call_name(left)}() is never negative"
        if _call_name(right) in _NON_NEGATIVE and _at_most_zero(op, hi, ast.LtE, ast.Lt):
            return f"{_call_name(right)}() is never negative"
    if _call_name(test) == "isinstance" and len(test.args) == 2:  # type: ignore[attr-defined]
        kinds = test.args[1]  # type: ignore[attr-defined]
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        if any(isinstance(n, ast.Name) and n.id == "object" for n in names):
            return "everything is an instance of object"
    if isinstance(test, ast.Attribute) and test.attr in _MOCK_LOOKALIKES:
        return f"`.{test.attr}` is a mock attribute, always truthy (use assert_{test.attr}())"
    if _call_name(test) in _MOCK_LOOKALIKES:
        return f"`.{_call_name(test)}()` is a mock attribute, always truthy"
    return None


def _check_in_message(msg: ast.expr | None) -> bool:
    """Whether an assertion message is itself a check (``assert a, b and c``)."""
    if isinstance(msg, ast.Compare):
        return True
    if isinstance(msg, ast.BoolOp):
        return any(isinstance(v, ast.Compare) for v in msg.values)
    return False


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes of ``body``, not descending into nested functions, classes or lambdas."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    stack: list[ast.AST] = [s for s in body if not isinstance(s, nested)]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, nested):
                stack.append(child)


def _handler_swallows(handler: ast.ExceptHandler) -> bool:
    """Whether ``handler`` catches ``AssertionError`` and does not raise again."""
    kinds = handler.type
    if kinds is not None:
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        caught = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in names}
        if not caught & _CATCHES_ASSERT:
            return False
    return not any(
        isinstance(n, ast.Raise) or _call_name(n) in ("fail", "exit")  # type: ignore[arg-type]
        for n in _own_nodes(handler.body)
    )


def vacuous_checks(source: str, filename: str = "<test>") -> list[tuple[int, str]]:
    """``(line, reason)`` of every check in ``source`` that cannot fail.

    Example:
        >>> vacuous_checks("def test():\\n    assert f() or True\\n")
        [(2, 'assert that cannot fail: `or` with an always-true operand')]
    """
    tree = ast.parse(source, filename)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            why = _always_true(node.test)
            if why:
                found.append((node.lineno, f"assert that cannot fail: {why}"))
            if _check_in_message(node.msg):
                found.append(
                    (
                        node.lineno,
                        "a check written as the assertion message is never checked "
                        "(`assert a, b and c` checks only `a`); join the checks with `and`",
                    )
                )
        elif isinstance(node, ast.Call) and _call_name(node) == "assertTrue" and node.args:
            why = _always_true(node.args[0])
            if why:
                found.append((node.lineno, f"assertTrue that cannot fail: {why}"))
        elif isinstance(node, ast.Try | ast.TryStar):
            asserts = [n for n in _own_nodes(node.body) if isinstance(n, ast.Assert)]
            swallowing = [h for h in node.handlers if _handler_swallows(h)]
            if asserts and swallowing:
                found.append(
                    (
                        asserts[0].lineno,
                        f"assert inside a try whose `except` (line {swallowing[0].lineno}) "
                        "swallows its AssertionError; catch the exception the code raises, "
                        "outside the assert",
                    )
                )
        elif isinstance(node, ast.With | ast.AsyncWith):
            raises = [i for i in node.items if _is_pytest_raises(i)]
            if not raises:
                continue
            if not any(_can_raise(n) for n in _own_nodes(node.body)):
                found.append(
                    (
                        node.lineno,
                        "pytest.raises block whose body cannot raise (always fails or is dead)",
                    )
                )
            if not any(_raises_assertion(i) for i in raises):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assert):
                        found.append(
                            (
                                stmt.lineno,
                                "assert inside a pytest.raises block: never reached once the "
                                "block raises; move it after the block",
                            )
                        )
    return sorted(found)


# A snippet of each pattern, with the reason reported for it.
BAD = {
    "or-true": ("assert f() or True", "`or` with an always-true operand"),
    "or-nested-true": ("assert f() or (g() or 1)", "`or` with an always-true operand"),
    "true": ("assert True", "non-empty literal"),
    "string": ("assert 'ok'", "non-empty literal"),
    "fstring": ("assert f'{x} ok'", "non-empty literal"),
    "tuple": ("assert (x == 1, 'x should be 1')", "non-empty literal"),
    "list": ("assert [x]", "non-empty literal"),
    "not-none": ("assert not None", "non-empty literal"),
    "else-true": ("assert (g(x) if x.exists() else True)", "a branch of the conditional"),
    "same": ("assert a.b == a.b", "compares an expression with itself"),
    "same-is": ("assert x[0] is x[0]", "compares an expression with itself"),
    "empty-not": ("assert not []", "non-empty literal"),
    "same-ge": ("assert x >= x", "compares an expression with itself"),
    "len": ("assert len(rows) >= 0", "len() is never negative"),
    "len-gt": ("assert len(rows) > -1", "len() is never negative"),
    "len-left": ("assert 0 <= len(rows)", "len() is never negative"),
    "abs": ("assert abs(d) >= 0.0", "abs() is never negative"),
    "object": ("assert isinstance(x, object)", "everything is an instance of object"),
    "object-tuple": ("assert isinstance(x, (int, object))", "everything is an instance of object"),
    "mock": ("assert m.called_once_with(1)", "mock attribute"),
    "message": ("assert code == 0, err and 'wrote' in out", "check written as the assertion"),
    "message-compare": ("assert ok, n == 3", "check written as the assertion"),
    "swallow": (
        "try:\n    assert f() == 1\nexcept AssertionError:\n    pass",
        "swallows its AssertionError",
    ),
    "swallow-exception": (
        "try:\n    assert f() == 1\nexcept (ValueError, Exception) as e:\n    log(e)",
        "swallows its AssertionError",
    ),
    "swallow-bare": ("try:\n    assert f()\nexcept:\n    x = 1", "swallows its AssertionError"),
    "raises-pass": ("with pytest.raises(ValueError):\n    pass", "body cannot raise"),
    "raises-const": (
        "with pytest.raises(ValueError, match='x'):\n    y = 1\n    'doc'",
        "body cannot raise",
    ),
    "raises-assert": (
        "with pytest.raises(ValueError):\n    f()\n    assert g() == 2",
        "assert inside a pytest.raises block",
    ),
    "unittest": ("self.assertTrue(x or True)", "assertTrue that cannot fail"),
}

GOOD = {
    "plain": "assert f() == 1",
    "or": "assert f() or g()",
    "message": "assert code == 0, err",
    "message-or": "assert ok, out or err",
    "conditional": "assert (g(x) if x.exists() else h(x))",
    "len": "assert len(rows) >= 1",
    "len-zero": "assert len(rows) == 0",
    "isinstance": "assert isinstance(x, int)",
    "different": "assert a.b == a.c",
    "empty": "assert not rows",
    "same-calls": "assert f(x) == f(x)",
    "raises": "with pytest.raises(ValueError):\n    f()",
    "raises-subscript": "with pytest.raises(KeyError):\n    d['x']",
    "raises-assertion": "with pytest.raises(AssertionError):\n    f()\n    assert g()",
    "reraise": "try:\n    assert f()\nexcept AssertionError:\n    log()\n    raise",
    "fail": "try:\n    assert f()\nexcept Exception as e:\n    pytest.fail(str(e))",
    "other-error": "try:\n    assert f()\nexcept ValueError:\n    pass",
    "nested-def": "try:\n    def g():\n        assert f()\nexcept Exception:\n    pass",
    "mock": "m.assert_called_once_with(1)",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_vacuous_pattern_is_caught(name: str) -> None:
    snippet, reason = BAD[name]
    found = vacuous_checks(snippet + "\n")
    assert len(found) == 1, found
    assert reason in found[0][1], found


@pytest.mark.parametrize("name", sorted(GOOD))
def test_checks_that_can_fail_pass(name: str) -> None:
    assert vacuous_checks(GOOD[name] + "\n") == []


def test_line_numbers_point_at_the_assert() -> None:
    src = "def test_x():\n    y = 1\n    assert y or True\n"
    assert vacuous_checks(src) == [(3, "assert that cannot fail: `or` with an always-true operand")]


def test_no_test_module_has_a_check_that_cannot_fail() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 50
    problems = [
        f"{path.relative_to(TESTS.parent)}:{line}: {why}"
        for path in files
        for line, why in vacuous_checks(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not problems, "\n".join(problems)


def test_ci_runs_lint_and_types_as_their_own_steps_before_the_tests() -> None:
    lines = [
        line.strip()
        for line in (TESTS.parent / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    tests_at = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    steps = {
        "ruff check": ".venv/bin/ruff check src tests benchmarks examples",
        "ruff format": ".venv/bin/ruff format --check src tests",
        "mypy": ".venv/bin/mypy",
    }
    for name, step in steps.items():
        assert step in lines, f"{name} is not a step of .ci/run"
        assert lines.index(step) < tests_at, f"{name} runs after the tests"
    assert "set -euo pipefail" in lines, "a failing step must fail CI"
