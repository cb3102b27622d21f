"""Rollouts of the LLM-orchestrator trainer: lockstep episodes, workers, C3 siblings.

All episodes advance in lockstep: the prompts of every episode waiting for a decision are
answered by ONE batched ``generate`` call of the policy. Workers are the simulator, a frozen
model or the policy itself (``LLMTrainConfig.workers``); one model object serves the workers of
every environment.

Example:
    >>> from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig
    >>> env = make_rollout_env(LLMTrainConfig(policy="unused"), None)
    >>> env.id, env.config.backend
    ('stop-v0', 'sim')
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from orchestrace.learn.algorithms.llm_credit import decision_events
from orchestrace.learn.env import make_env
from orchestrace.learn.llm_policy import action_of, state_prompt
from orchestrace.runtime.backends.base import LLMRequest
from orchestrace.trace.model import Trace
from orchestrace.trace.tokens import attach_tokens

if TYPE_CHECKING:
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig

__all__ = ["c3_siblings", "make_rollout_env", "make_workers", "run_episodes", "weights_sum"]


@dataclass
class _Call:
    prompt: list[int]
    completion: list[int]
    logprobs: list[float]
    mask: list[int]
    adv: float = 0.0
    ret: float = 0.0  # PPO: the GAE return the value head regresses on


def make_workers(cfg: LLMTrainConfig, policy: Any, hf: Any, torch: Any) -> tuple[Any, Any]:
    """The workers' backend (``None``: the simulator) and a frozen model's weight sum.

    The sum is checked again after training: a frozen model must not change.
    """
    if cfg.workers == "sim":
        return None, None
    common = {
        "max_new_tokens": cfg.worker_max_tokens,
        "max_batch": cfg.tasks * cfg.group,
        "seed": cfg.seed + 1,
        "device": cfg.device,
    }
    if cfg.workers == "self":  # the policy's own weights, with the workers' role prompts
        return hf(model=policy.model, tokenizer=policy.tokenizer, **common), None
    frozen = hf(model=cfg.workers[len("frozen:") :], require_chat_template=True, **common)
    frozen.load()
    frozen.model.eval()
    for p in frozen.model.parameters():
        p.requires_grad_(False)
    return frozen, weights_sum(frozen.model, torch)


def weights_sum(model: Any, torch: Any) -> float:
    """A checksum of a model's weights (sum and absolute sum, in float64)."""
    with torch.no_grad():
        return float(sum(p.double().abs().sum() + p.double().sum() for p in model.parameters()))


def make_rollout_env(cfg: LLMTrainConfig, workers: Any) -> Any:
    """One environment; with model workers, on a real loop answered by ``workers``."""
    if workers is None:
        return make_env(
            cfg.env,
            task=cfg.task,
            max_rounds=cfg.max_rounds,
            latency_weight=cfg.latency_weight,
            reward_fn=cfg.reward_fn,
            **cfg.env_options,
        )

    env = make_env(
        cfg.env,
        task=cfg.task,
        max_rounds=cfg.max_rounds,
        latency_weight=cfg.latency_weight,
        reward_fn=cfg.reward_fn,
        backend="hf",
        backend_options={"model": str(getattr(workers.model, "name_or_path", "policy"))},
        **cfg.env_options,
    )
    env._real = (asyncio.new_event_loop(), workers)  # one model serves every environment
    return env


def _request(system: str, env: Any, cfg: LLMTrainConfig) -> LLMRequest:
    return LLMRequest(
        agent="orchestrator",
        role="orchestrator",
        kind="decide",
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": state_prompt(env)},
        ],
        max_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
    )


def run_episodes(
    envs: list[Any],
    starts: list[tuple[int, list[tuple[Any, str, str | None]], int]],
    cfg: LLMTrainConfig,
    backend: Any,
    system: str,
    it: int,
) -> list[dict[str, Any]]:
    """Run ``envs[i]`` from ``starts[i]`` to the end, one batched generate per lockstep round.

    A start is ``(seed, forced, invalid)``: ``forced`` actions ``(action, text, error)`` are
    taken first (a recorded prefix and an alternative action: the sibling rollouts of ``c3``)
    and ``invalid`` refused actions are already counted; the policy takes the rest.
    """
    eps: list[dict[str, Any]] = []
    for env, (seed, forced, invalid) in zip(envs, starts, strict=False):
        env.train_step = it * cfg.tasks * cfg.group
        env.reset(seed=seed)
        e: dict[str, Any] = {"calls": [], "records": [], "actions": [], "requests": []}
        e.update(invalid=invalid, stops=0, done=False, seed=seed, forced=len(forced))
        eps.append(e)
        for action, _text, _error in forced:
            if not e["done"]:
                _step(e, env, action, cfg)
    while True:
        live = [i for i, e in enumerate(eps) if not e["done"]]
        if not live:
            break
        reqs = [_request(system, envs[i], cfg) for i in live]
        answers = backend.generate_batch(reqs)
        for i, req, resp in zip(live, reqs, answers, strict=True):
            e, env = eps[i], envs[i]
            rec = resp.token_record
            action, error = action_of(env, resp.text)
            e["calls"].append(
                _Call(rec["prompt_ids"], rec["completion_ids"], rec["logprobs"], rec["mask"])
            )
            e["records"].append((rec, resp.text, error))
            e["actions"].append((action, resp.text, error))
            e["requests"].append(req)
            e["invalid"] += error is not None
            e["stops"] += error is None and bool(env.decode(action)["stop"])
            _step(e, env, action, cfg)
    return eps


def _step(e: dict[str, Any], env: Any, action: Any, cfg: LLMTrainConfig) -> None:
    _, reward, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        e["done"] = True
        e["reward"] = float(reward) - cfg.invalid_penalty * e["invalid"]
        e["success"] = float(info["success"])
        e["tokens"] = float(info["tokens"])
        e["critical_steps"] = float(info.get("critical_steps", 0.0))
        e["trace"] = _with_tokens(info["trace"], e["records"]) if not e["forced"] else None


def c3_siblings(
    eps: list[dict[str, Any]],
    forks: list[Any],
    cfg: LLMTrainConfig,
    backend: Any,
    system: str,
    it: int,
) -> None:
    """C3: ``K`` sibling completions of each call's prompt, each rollout completed by the policy.

    Sibling ``k`` of call ``t`` replays the episode's first ``t`` actions on the same task
    instance (same seed: the simulator draws the same answers), takes the sibling's action and
    lets the policy decide from there; its return counts its own refused actions. Stores
    ``e["siblings"][t] = [(text, return), ...]``.
    """
    jobs: list[tuple[int, int, LLMRequest]] = []
    for i, e in enumerate(eps):
        e["siblings"] = [[] for _ in e["calls"]]
        for t, req in enumerate(e["requests"]):
            jobs += [(i, t, req)] * cfg.credit_samples
    if not jobs:
        return
    answers = backend.generate_batch([req for _, _, req in jobs])
    starts = []
    for (i, t, _), resp in zip(jobs, answers, strict=True):
        e = eps[i]
        prefix = e["actions"][:t]
        action, error = action_of(forks[0], resp.text)  # the same decision set
        invalid = sum(err is not None for _, _, err in prefix) + (error is not None)
        starts.append((e["seed"], [*prefix, (action, resp.text, error)], invalid))
    texts = [resp.text for resp in answers]
    for lo in range(0, len(starts), len(forks)):
        done = run_episodes(forks, starts[lo : lo + len(forks)], cfg, backend, system, it)
        for k, sib in enumerate(done):
            i, t, _ = jobs[lo + k]
            eps[i]["siblings"][t].append((texts[lo + k], sib["reward"]))


def _with_tokens(trace: Trace, records: list[tuple[dict[str, Any], str, str | None]]) -> Trace:
    """The trace with each decision's token record, text and parse error on its event."""
    table = {}
    notes = {}
    for ev, (rec, text, error) in zip(decision_events(trace), records, strict=False):
        table[ev.id] = rec
        notes[ev.id] = {"text": text, **({"parse_error": error} if error else {})}
    events = tuple(
        msgspec.structs.replace(e, attrs={**(e.attrs or {}), **notes[e.id]}) if e.id in notes else e
        for e in trace.events
    )
    return attach_tokens(msgspec.structs.replace(trace, events=events), table)
