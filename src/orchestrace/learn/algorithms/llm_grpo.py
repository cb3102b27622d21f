"""Online GRPO / PPO of an LLM orchestrator over rollouts on the runtime (the loop).

The loop, per iteration:

1. **Rollouts.** ``tasks`` task instances, ``group`` episodes each (same instance, same seed
   of the workers' simulator). All episodes advance in lockstep: the prompts of every episode
   waiting for a decision are answered by ONE batched ``generate`` call of the policy
   (:meth:`~orchestrace.runtime.backends.hf.HFBackend.generate_batch`), so weight updates reach
   the rollout engine at once (same model object). The text is parsed as an action
   (:mod:`orchestrace.learn.llm_policy`); an unparseable one is recorded on the decision event
   (``attrs.parse_error``), takes the env's default decision and costs ``invalid_penalty``.
2. **Rewards.** The env's reward (default PARL with annealed lambdas; ``latency_weight``
   subtracts a Critical-Steps term; ``reward_fn`` replaces it with any composition), minus
   the penalties. ``shuffle_rewards`` permutes rewards across the batch: the control run that
   shows what is learned by chance.
3. **Advantages.** GRPO: ``(r - mean_group) / (std_group + eps)``, the same for every call of
   the episode. PPO: a value head on the policy's last hidden state (at the last prompt token
   of each call) estimates the state value; the episode's reward arrives at its last call and
   GAE (``gae_gamma``, ``gae_lambda``) over the episode's calls gives each call's advantage,
   normalised over the batch. Per-call credit (``credit``: ``uniform``, ``discounted``,
   ``turn``, ``message`` or ``c3``, see :mod:`orchestrace.learn.algorithms.llm_credit`)
   combines with it and is broadcast onto each call's generated tokens (loss mask).
4. **Loss.** Clipped policy gradient on the token log-ratio against the behaviour log-probs
   recorded at generation, averaged over masked tokens, plus ``kl_coef`` times the k3 estimate
   of KL to the frozen reference (the initial weights), plus (PPO) ``vf_coef`` times the value
   head's squared error to the GAE returns. ``epochs`` passes (GRPO: 1, PPO: 2).
5. **Logging.** ``train.csv`` (reward, success, tokens, Critical Steps, KL, clip fraction,
   invalid-action rate per iteration), ``train.png``, and the checkpoint: the output
   directory is itself a loadable model directory (``from_pretrained(out)``; PPO adds
   ``value_head.pt``). Ctrl-C writes the checkpoint and the CSV so far, then re-raises; a
   second Ctrl-C while they are written waits until they are complete.

Workers (``workers``): ``sim`` (the simulator, default), ``frozen:PATH`` (a second model
that answers the workers' calls and is never updated; the run fails if its weights change) or
``self`` (the policy itself answers the workers' calls with their role prompts; only the
orchestrator's calls are trained).

Every episode's trace records the policy's token ids on its decision events (the token table,
:mod:`orchestrace.trace.tokens`); ``keep_traces`` keeps them on the result.

Example (tiny model built from a config; a few seconds on CPU)::

    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    res = train_llm(LLMTrainConfig(policy=str(tiny_chat_lm("tiny")), iterations=2))
    print(res.log[-1]["reward"])
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError, RuntimeError_
from orchestrace.learn.algorithms.llm_checkpoint import (
    check_device,
    local_model,
    read_state,
    restore,
    resume_config,
    write_checkpoint,
)
from orchestrace.learn.algorithms.llm_credit import (
    CREDITS,
    discounted_weights,
    gae,
    message_credits,
    spread,
    turn_weights,
)
from orchestrace.learn.algorithms.llm_rollout import (
    _Call,
    c3_siblings,
    make_rollout_env,
    make_workers,
    run_episodes,
    weights_sum,
)
from orchestrace.learn.env import ENV_IDS
from orchestrace.learn.llm_policy import instructions
from orchestrace.runtime.backends.hf import HFBackend, require_transformers
from orchestrace.trace.model import Trace

__all__ = ["LLMTrainConfig", "LLMTrainResult", "resume_config", "train_llm"]


@dataclass
class LLMTrainConfig:
    """Settings of an online LLM-orchestrator run (see the module docstring).

    Attributes:
        policy: Model directory (config, weights, tokenizer with a chat template).
        algo: ``grpo`` or ``ppo``.
        env: Environment id (``stop-v0``: the stopping decision; ``orchestrate-v0``: all five).
        task: Task of the environment.
        iterations: Updates.
        tasks: Task instances per iteration.
        group: Episodes per task instance.
        lr: AdamW learning rate.
        epochs: Passes over each batch (default: 1 for GRPO, 2 for PPO).
        clip: PPO/GRPO ratio clip.
        kl_coef: Weight of the KL to the reference (0: no reference model is kept).
        credit: Per-call credit: ``uniform``, ``discounted``, ``turn``, ``message`` or ``c3``
            (:mod:`~orchestrace.learn.algorithms.llm_credit`).
        gamma: Discount of ``discounted`` credit and per hop of ``turn`` credit.
        credit_samples: ``c3``: sibling completions per call (``K``); ``message``: paired
            forks per message.
        workers: ``sim``, ``frozen:PATH`` (a model that is never updated) or ``self``.
        worker_max_tokens: Tokens per worker answer when a model answers the workers.
        env_options: More :class:`~orchestrace.learn.env.EnvConfig` settings (``fixed``...).
        vf_coef: PPO: weight of the value head's loss.
        gae_gamma: PPO: discount over an episode's calls.
        gae_lambda: PPO: GAE lambda.
        temperature: Sampling temperature of rollouts.
        max_new_tokens: Tokens per action.
        invalid_penalty: Reward lost per unparseable action.
        max_rounds: Decision rounds per episode.
        latency_weight: Reward lost per Critical-Steps norm (see ``EnvConfig``).
        reward_fn: Replace the env reward: ``fn([trace], step=) -> [value]``.
        shuffle_rewards: Permute rewards across each batch (the chance-level control).
        lora: Train LoRA adapters (needs ``peft``) instead of all weights.
        device: Where the model runs (``cpu``, ``cuda``, ``cuda:0``...).
        seed: Seeds task instances, sampling and the shuffles.
        out: Output directory (CSV, plot, checkpoint); ``None`` writes nothing.
        save_every: Write the checkpoint every this many iterations (and at the end).
        keep_traces: Keep the last iteration's traces (with token tables) on the result.
        resume: Continue the run whose output directory this is (see :func:`resume_config`):
            the model loads from it; ``policy`` stays the run's starting model (the KL
            reference).
        start: Iterations already done (set by :func:`resume_config`).
    """

    policy: str
    algo: str = "grpo"
    env: str = "stop-v0"
    task: str = "arith"
    iterations: int = 20
    tasks: int = 2
    group: int = 6
    lr: float = 1e-2
    epochs: int | None = None
    clip: float = 0.2
    kl_coef: float = 0.0
    credit: str = "uniform"
    gamma: float = 0.9
    credit_samples: int = 2
    workers: str = "sim"
    worker_max_tokens: int = 16
    env_options: dict[str, Any] = field(default_factory=dict)
    vf_coef: float = 0.5
    gae_gamma: float = 1.0
    gae_lambda: float = 0.95
    temperature: float = 1.0
    max_new_tokens: int = 1
    invalid_penalty: float = 0.5
    max_rounds: int = 4
    latency_weight: float = 0.2
    reward_fn: Callable[..., list[float | None]] | None = None
    shuffle_rewards: bool = False
    lora: bool = False
    device: str = "cpu"
    seed: int = 0
    out: str | None = None
    save_every: int = 5
    keep_traces: bool = False
    resume: str | None = None
    start: int = 0

    def __post_init__(self) -> None:
        if self.algo not in ("grpo", "ppo"):
            raise ConfigError(f"algo must be grpo or ppo for an LLM policy, got {self.algo!r}")
        if self.env not in ENV_IDS:
            raise ConfigError(f"unknown env {self.env!r}; use one of: {', '.join(ENV_IDS)}")
        for name, flag in (
            ("iterations", "--steps"),
            ("tasks", "--tasks"),
            ("group", "--group"),
            ("max_new_tokens", ""),
            ("max_rounds", ""),
            ("save_every", "--save-every"),
            ("credit_samples", "--credit-samples"),
            ("worker_max_tokens", ""),
        ):
            if int(getattr(self, name)) < 1:
                where = f"{name} ({flag})" if flag else name
                raise ConfigError(f"{where} must be >= 1, got {getattr(self, name)}")
        if self.algo == "grpo" and self.group < 2:
            raise ConfigError("GRPO needs group >= 2 episodes per task instance (--group)")
        if self.credit not in CREDITS:
            raise ConfigError(
                f"credit must be one of {', '.join(CREDITS)} (--credit), got {self.credit!r}"
            )
        w = self.workers
        if not (w in ("sim", "self") or (w.startswith("frozen:") and len(w) > len("frozen:"))):
            raise ConfigError(
                f"workers must be sim, self or frozen:PATH (--workers), got {self.workers!r}"
            )
        for ok, what, value in (
            (0 < self.gae_gamma <= 1, "gae_gamma must be in (0, 1]", self.gae_gamma),
            (0 <= self.gae_lambda <= 1, "gae_lambda must be in [0, 1]", self.gae_lambda),
            (self.vf_coef >= 0, "vf_coef (--vf-coef) must be >= 0", self.vf_coef),
            (self.lr > 0, "lr (--lr) must be > 0", self.lr),
            (self.clip > 0, "clip must be > 0", self.clip),
            (self.temperature > 0, "temperature must be > 0", self.temperature),
            (self.kl_coef >= 0, "kl_coef (--kl) must be >= 0", self.kl_coef),
        ):
            if not ok:  # NaN fails every comparison
                raise ConfigError(f"{what}, got {value}")
        if self.start >= self.iterations:
            raise ConfigError(
                f"iterations (--steps) is {self.iterations}, but the resumed run has done "
                f"{self.start} already; give more"
            )
        if not isinstance(self.env_options, dict):
            raise ConfigError("env_options must be a dict of EnvConfig settings")
        clash = {"task", "max_rounds", "latency_weight", "reward_fn", "backend"}
        clash &= set(self.env_options)
        if clash:
            raise ConfigError(
                f"env_options may not set {sorted(clash)[0]}: it is a field of LLMTrainConfig "
                "(backend: use workers)"
            )


@dataclass
class LLMTrainResult:
    """What a run returns.

    Attributes:
        log: One row per iteration (the CSV's columns).
        out: The output directory, or ``None``.
        traces: The last iteration's traces (with ``keep_traces``).
        calls: The last iteration's calls, per episode: ``text``, ``advantage``, ``credit`` (the
            per-call credit term) and, under ``c3``, the ``siblings`` (text and return each).
        worker_model: The frozen worker model (``workers=frozen:PATH``), else ``None``.
    """

    log: list[dict[str, float]]
    out: Path | None
    traces: list[Trace]
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    worker_model: Any = None


def train_llm(
    config: LLMTrainConfig, progress: Callable[[int], None] | None = None
) -> LLMTrainResult:
    """Train ``config.policy`` online; write CSV, plot and checkpoint to ``config.out``.

    Raises:
        ConfigError: The model (or a frozen worker model) cannot be loaded, or the policy's
            tokenizer has no chat template.
        RuntimeError_: The frozen worker model's weights changed during training.
        KeyboardInterrupt: After writing the checkpoint and the CSV so far.
    """
    torch, transformers = require_transformers()
    cfg = config
    check_device(cfg.device, torch)
    source = local_model(cfg.resume, "--resume") if cfg.resume else local_model(cfg.policy)
    if not cfg.resume:
        # recorded as an absolute path: a resume from another directory finds the KL reference
        cfg = dataclasses.replace(cfg, policy=str(source.resolve()))
    if cfg.workers.startswith("frozen:"):
        local_model(cfg.workers[len("frozen:") :], "--workers frozen:")
    state = read_state(cfg.resume) if cfg.resume else None
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    backend = HFBackend(
        model=str(source),
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        do_sample=True,
        max_batch=cfg.tasks * cfg.group,
        seed=cfg.seed,
        require_chat_template=True,
        plain_sampling=True,  # the recorded log-probs are those the update recomputes
        device=cfg.device,
    )
    backend.load()
    model = backend.model
    if cfg.lora:
        model = backend.model = _lora(model)
    ref = None
    if cfg.kl_coef > 0:  # the KL reference is the run's starting model, also on a resume
        ref = _frozen_copy(
            model
            if state is None
            else _load_reference(cfg, transformers).to(next(model.parameters()).device)
        )
    head = _value_head(model, torch) if cfg.algo == "ppo" else None
    params = [p for p in model.parameters() if p.requires_grad]
    params += list(head.parameters()) if head is not None else []
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    epochs = cfg.epochs or (1 if cfg.algo == "grpo" else 2)
    log: list[dict[str, float]] = []
    if state is not None:
        log = restore(state, cfg, opt=opt, head=head, rng=rng, backend=backend, torch=torch)
    workers, frozen_sum = make_workers(cfg, backend, HFBackend, torch)
    n_envs = cfg.tasks * cfg.group
    envs = [make_rollout_env(cfg, workers) for _ in range(n_envs)]
    forks: list[Any] = []  # c3: environments of the sibling rollouts, made on first use
    system = instructions(envs[0])
    if state is not None and workers is not None and state.get("worker_calls") is not None:
        workers._batch_sizes[:] = list(state["worker_calls"])  # the workers' sampling seeds
    traces: list[Trace] = []
    kept: list[list[dict[str, Any]]] = []
    try:
        for it in range(cfg.start, cfg.iterations):
            t0 = time.perf_counter()
            seeds = [cfg.seed * 1_000_003 + it * cfg.tasks + k for k in range(cfg.tasks)]
            model.eval()
            eps = _rollouts(envs, seeds, cfg, backend, system, it)
            rewards = [e["reward"] for e in eps]
            if cfg.shuffle_rewards:
                rng.shuffle(rewards)
            for e, r in zip(eps, rewards, strict=True):
                e["trained_reward"] = r
            if cfg.credit == "c3":
                if not forks:
                    forks = [make_rollout_env(cfg, workers) for _ in range(n_envs)]
                c3_siblings(eps, forks, cfg, backend, system, it)
            calls = _assign(eps, cfg, model, head, workers, torch)
            model.train()
            stats = _update(model, head, ref, opt, calls, cfg, epochs, torch)
            n_calls = max(len(calls), 1)
            row = {
                "iteration": it,
                "episodes": (it + 1) * len(eps),
                "reward": _mean([e["reward"] for e in eps]),
                "success": _mean([e["success"] for e in eps]),
                "tokens": _mean([e["tokens"] for e in eps]),
                "critical_steps": _mean([e["critical_steps"] for e in eps]),
                "invalid_rate": sum(e["invalid"] for e in eps) / n_calls,
                "stop_rate": sum(e["stops"] for e in eps) / n_calls,
                **stats,
                "seconds": round(time.perf_counter() - t0, 3),
            }
            log.append(row)
            kept = [e["report"] for e in eps]
            if cfg.keep_traces:
                traces = [e["trace"] for e in eps]
            if progress is not None:
                progress(1)
            if cfg.out and (it + 1) % cfg.save_every == 0 and it + 1 < cfg.iterations:
                write_checkpoint(
                    cfg, log, backend, model, head, _state(opt, rng, backend, workers, torch)
                )
    except KeyboardInterrupt:
        if cfg.out and log:
            write_checkpoint(
                cfg, log, backend, model, head, _state(opt, rng, backend, workers, torch)
            )
        raise
    finally:
        for env in envs + forks:
            env.close()
    if frozen_sum is not None and weights_sum(workers.model, torch) != frozen_sum:
        raise RuntimeError_(f"the frozen worker model {cfg.workers[7:]} changed during training")
    out = (
        write_checkpoint(cfg, log, backend, model, head, _state(opt, rng, backend, workers, torch))
        if cfg.out and log
        else None
    )
    frozen = workers.model if frozen_sum is not None else None
    return LLMTrainResult(log, out, traces, kept, frozen)


def _state(opt: Any, rng: random.Random, backend: Any, workers: Any, torch: Any) -> dict[str, Any]:
    """What a resume needs besides the model, value head and CSV (``trainer-state.pt``)."""
    return {
        "optimizer": opt.state_dict(),
        "rng": rng.getstate(),
        "torch_rng": torch.get_rng_state(),
        "policy_calls": backend.batch_sizes,
        "worker_calls": workers.batch_sizes if workers is not None else None,
    }


def _load_reference(cfg: LLMTrainConfig, transformers: Any) -> Any:
    """The resumed run's starting model (``policy``), the reference of its KL term."""
    path = local_model(cfg.policy, "the run's starting --policy (the KL reference)")
    return transformers.AutoModelForCausalLM.from_pretrained(str(path))


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def _assign(
    eps: list[dict[str, Any]],
    cfg: LLMTrainConfig,
    model: Any,
    head: Any,
    workers: Any,
    torch: Any,
) -> list[_Call]:
    """Each call's advantage (base advantage combined with its credit), in order."""
    rewards = [e["trained_reward"] for e in eps]
    if head is not None:  # PPO: GAE over each episode's calls from the value head
        base = _gae_advantages(eps, rewards, cfg, model, head, torch)
    else:
        base = [[a] * len(e["calls"]) for a, e in zip(_advantages(rewards, cfg), eps, strict=True)]
    scale = spread(rewards)
    if cfg.credit == "c3":
        pooled = rewards + [r for e in eps for sib in e["siblings"] for _, r in sib]
        scale = spread(pooled)
    calls: list[_Call] = []
    for e, b in zip(eps, base, strict=True):
        n = len(e["calls"])
        per = list(b)
        credit = [0.0] * n
        if cfg.credit == "discounted":
            credit = discounted_weights(n, cfg.gamma)
            adv = [a * w for a, w in zip(per, credit, strict=True)]
        elif cfg.credit == "turn":
            credit = turn_weights(e["trace"], n, cfg.gamma)
            adv = [a * w for a, w in zip(per, credit, strict=True)]
        elif cfg.credit == "message":
            credit, _ = message_credits(
                e["trace"], n, samples=cfg.credit_samples, backend=workers, reward_fn=cfg.reward_fn
            )
            adv = [a + c / scale for a, c in zip(per, credit, strict=True)]
        elif cfg.credit == "c3":
            credit = [
                e["trained_reward"] - _mean([r for _, r in sib]) if sib else 0.0
                for sib in e["siblings"]
            ]
            adv = [c / scale for c in credit]
        else:
            adv = per
        report = []
        for t, (c, a) in enumerate(zip(e["calls"], adv, strict=True)):
            c.adv = a
            calls.append(c)
            row: dict[str, Any] = {"text": e["records"][t][1], "advantage": a, "credit": credit[t]}
            if cfg.credit == "c3":
                row["siblings"] = [{"text": x, "return": r} for x, r in e["siblings"][t]]
            report.append(row)
        e["report"] = report
    return calls


def _rollouts(
    envs: list[Any], seeds: list[int], cfg: LLMTrainConfig, backend: Any, system: str, it: int
) -> list[dict[str, Any]]:
    """``group`` episodes per seed from the start, in lockstep (see :func:`run_episodes`)."""
    starts: list[tuple[int, list[Any], int]] = [
        (seeds[i // cfg.group], [], 0) for i in range(min(len(envs), len(seeds) * cfg.group))
    ]
    return run_episodes(envs, starts, cfg, backend, system, it)


def _advantages(rewards: list[float], cfg: LLMTrainConfig) -> list[float]:
    """GRPO: each reward normalised within its group (the same task instance)."""
    out = []
    for g in range(0, len(rewards), cfg.group):
        grp = rewards[g : g + cfg.group]
        m = sum(grp) / len(grp)
        sd = math.sqrt(sum((r - m) ** 2 for r in grp) / len(grp))
        out += [(r - m) / (sd + 1e-4) for r in grp]
    return out


def _gae_advantages(
    eps: list[dict[str, Any]],
    rewards: list[float],
    cfg: LLMTrainConfig,
    model: Any,
    head: Any,
    torch: Any,
) -> list[list[float]]:
    """PPO: per-call GAE advantages (normalised over the batch); sets each call's return."""
    flat = [c for e in eps for c in e["calls"] if c.completion]
    values: dict[int, float] = {}
    if flat:
        with torch.no_grad():
            _, v = _seq_logprobs(model, flat, torch, cfg.temperature, head)
        values = {id(c): float(x) for c, x in zip(flat, v.tolist(), strict=True)}
    out = []
    for e, r in zip(eps, rewards, strict=True):
        n = len(e["calls"])
        vs = [values.get(id(c), 0.0) for c in e["calls"]]
        rs = [0.0] * (n - 1) + [r] if n else []
        adv = gae(rs, vs, gamma=cfg.gae_gamma, lam=cfg.gae_lambda)
        for c, a, v in zip(e["calls"], adv, vs, strict=True):
            c.ret = a + v
        out.append(adv)
    every = [a for adv in out for a in adv]
    m, sd = _mean(every), spread(every)
    return [[(a - m) / sd for a in adv] for adv in out]


def _value_head(model: Any, torch: Any) -> Any:
    """A linear state-value head on the policy's last hidden state (starts at 0)."""
    hidden = int(model.config.hidden_size)
    head = torch.nn.Linear(hidden, 1)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    return head.to(next(model.parameters()).device)


def _seq_logprobs(
    model: Any, calls: list[_Call], torch: Any, temperature: float, head: Any = None
) -> Any:
    """Log-probs of completion tokens under ``model`` at ``temperature``: [calls, completion].

    With ``head``, also each call's state value (the head on the last hidden state at the
    call's last prompt token): ``(logprobs, values)``.
    """
    width = max(len(c.prompt) + len(c.completion) for c in calls)
    comp = max(len(c.completion) for c in calls)
    ids = torch.zeros((len(calls), width), dtype=torch.long)
    att = torch.zeros((len(calls), width), dtype=torch.long)
    for b, c in enumerate(calls):
        seq = c.prompt + c.completion
        ids[b, width - len(seq) :] = torch.tensor(seq)
        att[b, width - len(seq) :] = 1
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    dev = next(model.parameters()).device
    ids, att, pos = ids.to(dev), att.to(dev), pos.to(dev)
    res = model(
        input_ids=ids, attention_mask=att, position_ids=pos, output_hidden_states=head is not None
    )
    logits = res.logits.float() / temperature  # the distribution the tokens were drawn from
    logp = torch.log_softmax(logits[:, -comp - 1 : -1], dim=-1)
    tgt = ids[:, -comp:]
    out = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)  # right-aligned completions
    if head is None:
        return out
    last = torch.tensor([width - len(c.completion) - 1 for c in calls], device=dev)
    hidden = res.hidden_states[-1].float()[torch.arange(len(calls), device=dev), last]
    return out, head(hidden).squeeze(-1)


def _update(
    model: Any,
    head: Any,
    ref: Any,
    opt: Any,
    calls: list[_Call],
    cfg: LLMTrainConfig,
    epochs: int,
    torch: Any,
) -> dict[str, float]:
    calls = [c for c in calls if c.completion]
    if not calls:
        return {"loss": 0.0, "kl": 0.0, "approx_kl": 0.0, "clip_frac": 0.0, "value_loss": 0.0}
    comp = max(len(c.completion) for c in calls)
    old = torch.zeros((len(calls), comp))
    mask = torch.zeros((len(calls), comp))
    for b, c in enumerate(calls):
        n = len(c.completion)
        old[b, comp - n :] = torch.tensor(c.logprobs)
        mask[b, comp - n :] = torch.tensor(c.mask, dtype=torch.float32)
    dev = next(model.parameters()).device
    old, mask = old.to(dev), mask.to(dev)
    adv = torch.tensor([c.adv for c in calls], device=dev).unsqueeze(-1)
    rets = torch.tensor([c.ret for c in calls], device=dev)
    ref_lp = None
    if ref is not None:
        with torch.no_grad():
            ref_lp = _seq_logprobs(ref, calls, torch, cfg.temperature)
    denom = mask.sum().clamp(min=1.0)
    stats: dict[str, float] = {}
    for _ in range(epochs):
        value_loss = torch.tensor(0.0, device=dev)
        if head is not None:
            new, values = _seq_logprobs(model, calls, torch, cfg.temperature, head)
            value_loss = ((values - rets) ** 2).mean()
        else:
            new = _seq_logprobs(model, calls, torch, cfg.temperature)
        ratio = torch.exp(new - old)
        pg1 = ratio * adv
        pg2 = torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv
        loss = -(torch.minimum(pg1, pg2) * mask).sum() / denom + cfg.vf_coef * value_loss
        kl = torch.tensor(0.0, device=dev)
        if ref_lp is not None:
            d = ref_lp - new
            kl = ((torch.exp(d) - d - 1) * mask).sum() / denom
            loss = loss + cfg.kl_coef * kl
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
        opt.step()
        with torch.no_grad():
            lr = new.detach() - old
            stats = {
                "loss": float(loss.detach()),
                "kl": float(kl.detach()),
                "approx_kl": float((((torch.exp(lr) - 1) - lr) * mask).sum() / denom),
                "clip_frac": float((((ratio - 1).abs() > cfg.clip).float() * mask).sum() / denom),
                "value_loss": float(value_loss.detach()),
            }
    return stats


def _frozen_copy(model: Any) -> Any:
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _lora(model: Any) -> Any:
    try:
        import peft  # noqa: PLC0415  optional extra [hf]
    except ImportError:
        raise ImportError("LoRA needs peft: pip install 'orchestrace[hf]'") from None
    targets = [
        n for n in ("q_proj", "v_proj", "c_attn") if any(n in k for k, _ in model.named_modules())
    ]
    return peft.get_peft_model(
        model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=targets or None)
    )
