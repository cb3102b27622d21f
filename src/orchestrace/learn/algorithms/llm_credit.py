"""Per-call credit for the LLM-orchestrator trainer, and the PPO critic's advantages.

An episode of :mod:`~orchestrace.learn.algorithms.llm_grpo` is a chain of policy calls (one per
decision). Each call gets an advantage: the base one (GRPO: the episode's reward normalised in
its group, the same for every call; PPO: GAE of the value head over the episode's calls),
combined with a per-call credit chosen by ``credit``:

| ``credit`` | advantage of call ``t`` of ``T`` |
| --- | --- |
| ``uniform`` | the base advantage |
| ``discounted`` | base ``* gamma ** (T - 1 - t)`` |
| ``turn`` | base ``* T * share_t``: ``share_t`` is the call's turn (``orchestrator@t``) in\
 :class:`~orchestrace.credit.DiscountedCredit` at unit ``turn``, over the policy's turns |
| ``message`` | base ``+ c_t / s``: ``c_t`` sums the counterfactual credit\
 (:class:`~orchestrace.credit.CounterfactualMessageCredit`, drop) of the messages the call's\
 decision sent; ``s`` is the batch's reward standard deviation |
| ``c3`` | ``(R - mean_k R_k) / s``: ``R_k`` are the returns of ``K`` sibling completions of\
 the same prompt, each rollout completed from there by the policy (C3-style resampling) |

The advantage of a call is broadcast onto its generated tokens through the loss mask.

Example:
    >>> [round(w, 3) for w in discounted_weights(3, 0.5)]
    [0.25, 0.5, 1.0]
    >>> [round(a, 3) for a in gae([0.0, 0.0, 1.0], [0.2, 0.5, 0.8], gamma=1.0, lam=1.0)]
    [0.8, 0.5, 0.2]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from orchestrace.credit import CounterfactualMessageCredit, DiscountedCredit
from orchestrace.trace.model import Trace

__all__ = [
    "CREDITS",
    "decision_events",
    "discounted_weights",
    "gae",
    "message_credits",
    "turn_weights",
]

#: The per-call credit modes (``LLMTrainConfig.credit``, ``--credit``).
CREDITS = ("uniform", "discounted", "turn", "message", "c3")


def decision_events(trace: Trace) -> list[Any]:
    """The decision events the policy was asked for, in order (call ``t`` is turn ``t``)."""
    return [
        e
        for e in trace.events
        if e.type == "orchestrator_decision" and e.attrs and "turn" in e.attrs
    ]


def discounted_weights(n: int, gamma: float) -> list[float]:
    """``gamma ** (n - 1 - t)`` for calls ``t = 0..n-1``: the last call weighs 1."""
    return [gamma ** (n - 1 - t) for t in range(n)]


def turn_weights(trace: Trace, n: int, gamma: float) -> list[float]:
    """Weights of the policy's ``n`` calls from turn credit, averaging 1.

    Each call's turn (``<orchestrator>@<step>`` of its decision event) takes its share of
    :class:`~orchestrace.credit.DiscountedCredit` (causal-path discount ``gamma``) at unit
    ``turn``; the shares are renormalised over the policy's turns and scaled by ``n``. A call
    whose turn never leads to the outcome weighs 0; when none does, every call weighs 1.

    Example:
        >>> from orchestrace.learn.env import make_env
        >>> env = make_env("stop-v0", task="arith")
        >>> _ = env.reset(seed=1); _ = env.step(0); out = env.step(1)
        >>> w = turn_weights(out[4]["trace"], 2, 0.9)
        >>> round(sum(w), 9), w[0] != w[1]
        (2.0, True)
    """
    if n == 0:
        return []
    shares = DiscountedCredit(gamma=gamma).assign(trace, "turn", reward=1.0).by_unit("turn")
    decisions = decision_events(trace)[:n]
    raw = [shares.get(f"{e.agent}@{e.step or 0}", 0.0) for e in decisions]
    raw += [0.0] * (n - len(raw))
    total = sum(raw)
    if total <= 0:
        return [1.0] * n
    return [n * v / total for v in raw]


def message_credits(
    trace: Trace, n: int, *, samples: int, backend: Any = None, reward_fn: Any = None
) -> tuple[list[float], dict[str, float]]:
    """Counterfactual credit of the messages each of the policy's ``n`` calls sent.

    Messages are credited by :class:`~orchestrace.credit.CounterfactualMessageCredit` (drop
    intervention, ``samples`` paired forks of the rollout); a message belongs to the call
    whose decision sent it (the orchestrator's message events of the decision's step). The
    forks' worker calls are answered by ``backend``: the rollout's own worker backend object
    (a frozen model, or the policy itself), or ``None`` for the simulator the trace records;
    the decisions in a fork keep their recorded values (open loop). Returns the per-call sums
    and the per-message credits.
    """
    if n == 0:
        return [], {}
    messages = [e for e in trace.events if e.type == "message"]
    if not messages:
        return [0.0] * n, {}
    table = CounterfactualMessageCredit(samples=samples, backend=backend, reward_fn=reward_fn)
    per_message = table.assign(trace, "message").by_unit("message")
    step_of: dict[tuple[str, int], int] = {}
    for t, e in enumerate(decision_events(trace)[:n]):
        step_of[(e.agent, e.step or 0)] = t
    out = [0.0] * n
    for m in messages:
        at = step_of.get((m.agent, m.step or 0))
        if at is not None:
            out[at] += per_message.get(m.id, 0.0)
    return out, per_message


def gae(
    rewards: Sequence[float], values: Sequence[float], *, gamma: float, lam: float
) -> list[float]:
    """Generalised advantage estimates over one episode's calls (the last call is terminal).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` (``V_T = 0``),
    ``A_t = delta_t + gamma * lam * A_{t+1}``.
    """
    n = len(rewards)
    out = [0.0] * n
    nxt = 0.0
    for t in reversed(range(n)):
        v_next = values[t + 1] if t + 1 < n else 0.0
        delta = rewards[t] + gamma * v_next - values[t]
        nxt = delta + gamma * lam * nxt
        out[t] = nxt
    return out


def spread(xs: Sequence[float]) -> float:
    """Standard deviation of ``xs``, or 1.0 when they (nearly) agree: a scale for credits."""
    if len(xs) < 2:
        return 1.0
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    return sd if sd > 1e-6 else 1.0
