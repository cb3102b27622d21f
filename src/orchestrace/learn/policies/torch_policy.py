"""A small MLP policy over the environment's decisions (needs the ``[learn]`` extra).

One categorical head per learned decision (a factorised MultiDiscrete policy) and a value head.

Example:
    >>> from orchestrace.learn.env import make_env
    >>> env = make_env("stop-v0", task="arith")
    >>> policy = MLPPolicy.for_env(env, hidden=16, seed=0)
    >>> obs, info = env.reset(seed=1)
    >>> action = policy.act(obs, info, env)
    >>> env.action_space.contains(action)
    True
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.io._output import report_file
from orchestrace.learn.env import OrchestrationEnv
from orchestrace.learn.spaces import Discrete

__all__ = ["MLPPolicy", "load_policy", "require_torch"]


def require_torch() -> Any:
    """Import torch or say how to install it."""
    try:
        import torch  # noqa: PLC0415  optional extra [learn] or [hf]
    except ImportError:
        raise ImportError(
            "learning needs torch: pip install 'orchestrace[learn]' "
            "(CPU torch: pip install torch==2.13.0)"
        ) from None
    return torch


def _module_cls() -> Any:
    torch = require_torch()
    nn = torch.nn

    class Net(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self, obs_dim: int, nvec: list[int], hidden: int, layers: int) -> None:
            super().__init__()
            mods: list[Any] = []
            d = obs_dim
            for _ in range(layers):
                mods += [nn.Linear(d, hidden), nn.Tanh()]
                d = hidden
            self.trunk = nn.Sequential(*mods)
            self.heads = nn.ModuleList(nn.Linear(d, n) for n in nvec)
            self.value = nn.Linear(d, 1)
            for h in self.heads:  # start near uniform
                nn.init.zeros_(h.weight)
                nn.init.zeros_(h.bias)

        def forward(self, x: Any) -> tuple[list[Any], Any]:
            z = self.trunk(x)
            return [h(z) for h in self.heads], self.value(z).squeeze(-1)

    return Net


class MLPPolicy:
    """Factorised categorical policy with a value head.

    Args:
        obs_dim: Observation size.
        nvec: Choices per decision head.
        hidden: Hidden width.
        layers: Hidden layers.
        seed: Initialisation seed.
    """

    def __init__(
        self, obs_dim: int, nvec: list[int], hidden: int = 64, layers: int = 2, seed: int = 0
    ) -> None:
        torch = require_torch()
        torch.manual_seed(seed)
        self.torch = torch
        self.obs_dim, self.nvec, self.hidden, self.layers = obs_dim, list(nvec), hidden, layers
        self.net = _module_cls()(obs_dim, self.nvec, hidden, layers)
        self.greedy = True
        self.discrete = len(self.nvec) == 1

    @classmethod
    def for_env(cls, env: OrchestrationEnv, **kw: Any) -> MLPPolicy:
        """A policy shaped for ``env``."""
        space = env.action_space
        nvec = [space.n] if isinstance(space, Discrete) else [int(n) for n in space.nvec]
        return cls(env.observation_space.shape[0], nvec, **kw)

    def distribution(self, obs: Any) -> tuple[list[Any], Any]:
        """Categorical heads and values for a batch of observations."""
        torch = self.torch
        x = torch.as_tensor(np.asarray(obs), dtype=torch.float32)
        logits, value = self.net(x)
        return [torch.distributions.Categorical(logits=lg) for lg in logits], value

    def sample(self, obs: np.ndarray, greedy: bool = False) -> tuple[list[int], float, float]:
        """``(actions per head, log-prob, value)`` for one observation."""
        torch = self.torch
        with torch.no_grad():
            dists, value = self.distribution(obs[None, :])
            acts = []
            logp = 0.0
            for d in dists:
                a = int(d.probs.argmax(-1).item()) if greedy else int(d.sample().item())
                logp += float(d.log_prob(torch.tensor([a])).item())
                acts.append(a)
        return acts, logp, float(value.item())

    def sample_batch(
        self, obs: np.ndarray, uniforms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actions, joint log-probs and values for a batch of observations, in one forward pass.

        Each head's action is drawn by inverting its cumulative distribution at the given
        uniform draw: row ``i``, head ``h`` takes the first choice whose cumulative probability
        exceeds ``uniforms[i, h]``. Whoever supplies the uniforms decides the random stream
        (the trainers key it by episode, so a decision does not depend on which other episodes
        share its batch). Without ``uniforms`` the actions are greedy (the most likely choice).

        Args:
            obs: Observations, shape ``(n, obs_dim)``.
            uniforms: Draws in ``[0, 1)``, shape ``(n, heads)``; ``None`` for greedy actions.

        Returns:
            ``(actions, logp, values)``: int64 ``(n, heads)``, float32 ``(n,)`` and ``(n,)``.

        Example:
            >>> policy = MLPPolicy(20, [5, 2], hidden=8, seed=0)  # heads start uniform
            >>> acts, logp, values = policy.sample_batch(
            ...     np.zeros((2, 20), np.float32), np.array([[0.1, 0.9], [0.5, 0.2]])
            ... )
            >>> acts.tolist(), logp.shape, values.shape
            ([[0, 1], [2, 0]], (2,), (2,))
        """
        torch = self.torch
        with torch.no_grad():
            logits, value = self.net(torch.from_numpy(np.ascontiguousarray(obs, np.float32)))
            u = None if uniforms is None else torch.from_numpy(np.asarray(uniforms, np.float32))
            acts, logp = [], torch.zeros(len(obs))
            for h, lg in enumerate(logits):
                lp = torch.log_softmax(lg, dim=-1)
                if u is None:
                    a = lp.argmax(dim=-1)
                else:
                    cdf = lp.exp().cumsum(dim=-1)
                    a = (cdf <= u[:, h : h + 1]).sum(dim=-1).clamp_(max=lg.shape[-1] - 1)
                logp += lp.gather(1, a[:, None])[:, 0]
                acts.append(a)
            return torch.stack(acts, dim=1).numpy(), logp.numpy(), value.numpy()

    def to_action(self, acts: list[int]) -> Any:
        """Env action from per-head choices."""
        return acts[0] if self.discrete else np.asarray(acts, dtype=np.int64)

    def act(self, obs: np.ndarray, info: dict[str, Any], env: OrchestrationEnv) -> Any:
        """Greedy action (evaluation)."""
        acts, _, _ = self.sample(obs, greedy=self.greedy)
        return self.to_action(acts)

    def reset(self) -> None:
        """Policies here are memoryless."""

    def save(self, path: str | Path, extra: dict[str, Any] | None = None) -> None:
        """Checkpoint weights and shape (and anything in ``extra``).

        The checkpoint is serialised in memory and written atomically (a temporary sibling
        renamed into place), so a failed write never leaves a truncated ``path``.

        Raises:
            orchestrace.io._output.OutputError: Writing failed (disk full, permission denied).
        """
        buf = io.BytesIO()
        self.torch.save(
            {
                "state_dict": self.net.state_dict(),
                "obs_dim": self.obs_dim,
                "nvec": self.nvec,
                "hidden": self.hidden,
                "layers": self.layers,
                "extra": extra or {},
            },
            buf,
        )
        with report_file(path) as fh:  # not torch's own writer: its errors carry no errno
            fh.write(buf.getbuffer())


def load_policy(path: str | Path) -> MLPPolicy:
    """Load a checkpoint written by :meth:`MLPPolicy.save`."""
    torch = require_torch()
    try:
        ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
        policy = MLPPolicy(ckpt["obs_dim"], ckpt["nvec"], ckpt["hidden"], ckpt["layers"])
        policy.net.load_state_dict(ckpt["state_dict"])
    except (
        OSError,
        KeyError,
        RuntimeError,
        ValueError,
        TypeError,
        EOFError,
        pickle.UnpicklingError,
    ) as err:
        raise ConfigError(
            f"cannot load policy {path}: {err}; pass a checkpoint written by `orchestrace train`"
        ) from None
    policy.extra = ckpt.get("extra", {})  # type: ignore[attr-defined]
    return policy
