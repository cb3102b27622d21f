"""Orchestration learning: environments, policies, trainers, evaluation, export.

Importing this package makes the Gymnasium ids (``orchestrace/Stop-v0``...) available to
``gymnasium.make`` without importing Gymnasium: they are registered at once when Gymnasium is
already imported, else when it is (see :mod:`orchestrace.learn.gym`). :class:`VectorEnv`
(:mod:`orchestrace.learn.vector`) is loaded on first use, as are the verl reward module
:mod:`orchestrace.learn.verl_reward` (``verl_reward``) and its ``compute_score``, the function a
verl config names.

Example:
    >>> import orchestrace.learn
    >>> orchestrace.learn.VectorEnv.__name__
    'VectorEnv'
    >>> orchestrace.learn.compute_score("orchestrace/arith-mapreduce-v0", "ANSWER: 3", "3")
    1.0
    >>> orchestrace.learn.verl_reward.compute_score is orchestrace.learn.compute_score
    True
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["VectorEnv", "compute_score", "verl_reward"]


def __getattr__(name: str) -> Any:
    if name == "VectorEnv":
        from orchestrace.learn.vector import VectorEnv  # noqa: PLC0415  loaded on first use: `import orchestrace.learn` stays light

        return VectorEnv
    if name in ("verl_reward", "compute_score"):
        import orchestrace.learn.verl_reward as verl_reward  # noqa: PLC0415, PLR0402  loaded on first use (a from-import would re-enter this __getattr__)

        return verl_reward if name == "verl_reward" else verl_reward.compute_score
    raise AttributeError(f"module 'orchestrace.learn' has no attribute {name!r}")


def _register_gym() -> None:
    import orchestrace.learn.gym  # noqa: F401, PLC0415  registers the ids once Gymnasium (extra [learn]) is imported


class _OnGymnasiumImport(importlib.abc.MetaPathFinder):
    """Registers the ids right after Gymnasium is imported, then steps aside (one shot)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "gymnasium":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _register_gym()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "gymnasium" in sys.modules:
    _register_gym()
elif importlib.util.find_spec("gymnasium") is not None and not any(
    isinstance(f, _OnGymnasiumImport) for f in sys.meta_path
):
    sys.meta_path.insert(0, _OnGymnasiumImport())
