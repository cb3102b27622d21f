"""Every re-executing credit method refuses a trace that cannot be re-executed, the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace.credit import make_assigner
from orchestrace.errors import TraceError
from orchestrace.io import load

OTEL = Path(__file__).parents[1] / "fixtures" / "otel"


@pytest.mark.parametrize(
    ("method", "unit"), [("loo", "agent"), ("shapley", "agent"), ("counterfactual", "message")]
)
@pytest.mark.parametrize("name", ["openinference_agents.json", "genai_otlp.json"])
def test_imported_trace_is_refused_by_every_forking_method(method, unit, name):
    trace = load(OTEL / name)
    with pytest.raises(TraceError, match=r"missing meta 'runner'.*can be replayed"):
        make_assigner(method, backend="sim").assign(trace, unit)
