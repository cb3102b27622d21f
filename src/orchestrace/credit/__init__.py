"""Credit assignment at the eight units, from team to token.

Assigners return a :class:`CreditTable` of ``(unit, id, value)`` rows:

| method | class | units | efficient |
| --- | --- | --- | --- |
| uniform terminal | :class:`UniformCredit` | all | yes |
| discounted along causal paths | :class:`DiscountedCredit` | all | yes |
| Shapley (exact / Monte-Carlo) | :class:`ShapleyCredit` | agent, message | yes |
| difference rewards (leave-one-out) | :class:`LeaveOneOutCredit` | agent, message | no |
| counterfactual message credit | :class:`CounterfactualMessageCredit` | message | no |

Example:
    >>> sorted(ASSIGNERS)
    ['counterfactual', 'discounted', 'loo', 'shapley', 'uniform']
"""

from typing import Any

from orchestrace.credit.base import (
    UNITS,
    Credit,
    CreditAssigner,
    CreditTable,
    root_agents,
    unit_members,
)
from orchestrace.credit.check import check_credit
from orchestrace.credit.counterfactual import (
    CounterfactualMessageCredit,
    LeaveOneOutCredit,
    llm_descendants,
)
from orchestrace.credit.discounted import DiscountedCredit
from orchestrace.credit.normalize import agentwise, by_task, group_relative
from orchestrace.credit.shapley import (
    ShapleyCredit,
    shapley_exact,
    shapley_mc,
)
from orchestrace.credit.uniform import UniformCredit
from orchestrace.errors import ConfigError

__all__ = [
    "ASSIGNERS",
    "UNITS",
    "CounterfactualMessageCredit",
    "Credit",
    "CreditAssigner",
    "CreditTable",
    "DiscountedCredit",
    "LeaveOneOutCredit",
    "ShapleyCredit",
    "UniformCredit",
    "agentwise",
    "by_task",
    "check_credit",
    "group_relative",
    "llm_descendants",
    "make_assigner",
    "root_agents",
    "shapley_exact",
    "shapley_mc",
    "unit_members",
]

ASSIGNERS: dict[str, type] = {
    "uniform": UniformCredit,
    "discounted": DiscountedCredit,
    "shapley": ShapleyCredit,
    "loo": LeaveOneOutCredit,
    "counterfactual": CounterfactualMessageCredit,
}


def make_assigner(method: str, **kw: Any) -> Any:
    """Build an assigner by name.

    Raises:
        ConfigError: Unknown method or bad option.
    """
    cls = ASSIGNERS.get(method)
    if cls is None:
        raise ConfigError(f"unknown credit method {method!r}; use one of: {', '.join(ASSIGNERS)}")
    try:
        return cls(**kw)
    except TypeError as err:
        raise ConfigError(f"credit method {method!r}: {err}") from None
