"""Gymnasium environments refuse a malformed action or task with a clear ConfigError."""

import pytest

from orchestrace.errors import ConfigError


@pytest.mark.parametrize("action", [99, [0, 0, 0, 0, 9], [0, 0, 0], 1.5, [[0, 0, 0, 0, 0]]])
def test_orchestrate_v1_refuses_an_action_outside_its_space(action):
    gymnasium = pytest.importorskip("gymnasium")
    import orchestrace.learn.gym  # noqa: F401  registers the ids

    env = gymnasium.make("orchestrace/Orchestrate-v1", task="arith")
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"is not in MultiDiscrete\(\[5 3 3 4 2\]\): give 5"):
        env.step(action)
    env.step([0, 0, 0, 0, 1])  # a valid action still steps


def test_an_unknown_task_is_named_by_its_keyword_not_a_cli_option():
    gymnasium = pytest.importorskip("gymnasium")
    import orchestrace.learn.gym  # noqa: F401

    with pytest.raises(ConfigError, match=r"^task='nope' is not a task; use one of: arith"):
        gymnasium.make("orchestrace/Orchestrate-v1", task="nope")


@pytest.mark.parametrize("action", [1.5, [0], None, "x", 99, -1])
def test_stop_v0_refuses_an_action_outside_its_space(action):
    gymnasium = pytest.importorskip("gymnasium")
    import numpy as np

    import orchestrace.learn.gym  # noqa: F401  registers the ids

    env = gymnasium.make("orchestrace/Stop-v0")
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"is not in Discrete\(2\): give one integer from 0 to 1"):
        env.step(np.asarray(action) if isinstance(action, list) else action)
    env.step(np.int64(0))  # a valid action still steps
