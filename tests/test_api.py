"""The public surface: curated __all__, typing marker, runnable docstring examples."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import orchestrace

EXPECTED = {
    "SCHEMA_VERSION",
    "ConfigError",
    "CreditUnit",
    "CriticalPath",
    "CycleError",
    "Decision",
    "Edge",
    "EdgeType",
    "Event",
    "EventType",
    "OrchestraceError",
    "Problem",
    "Topology",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "TraceFormatError",
    "TraceGraph",
    "TraceValidationError",
    "__version__",
    "check_trace",
    "critical_path",
    "critical_steps",
    "dump",
    "dumps",
    "generate_trace",
    "is_valid",
    "iter_traces",
    "load",
    "load_all",
    "loads",
    "native_schema",
    "speedup",
    "summarize",
    "validate",
    "work",
}


def test_all_is_curated():
    assert set(orchestrace.__all__) >= EXPECTED
    for name in orchestrace.__all__:
        assert hasattr(orchestrace, name), name


def test_py_typed_present():
    assert (Path(orchestrace.__file__).parent / "py.typed").exists()


MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(orchestrace.__path__, "orchestrace.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_public_objects_have_docstrings():
    for name in orchestrace.__all__:
        obj = getattr(orchestrace, name)
        if callable(obj) and not isinstance(obj, str):
            assert obj.__doc__, name


def test_errors_form_one_tree():
    for name in ("ConfigError", "TraceError", "TraceFormatError", "TraceValidationError"):
        assert issubclass(getattr(orchestrace, name), orchestrace.OrchestraceError)
