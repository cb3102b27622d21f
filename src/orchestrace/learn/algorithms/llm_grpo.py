"""Online GRPO / PPO of an LLM orchestrator over rollouts on the runtime (one readable file).

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
3. **Advantages.** GRPO: ``(r - mean_group) / (std_group + eps)``; PPO: ``r - mean_batch``
   over a running baseline (no value head). Per-call credit spreads each episode's advantage
   over its calls (``credit="uniform"``: every call gets it; ``"discounted"``: call t of T gets
   ``gamma ** (T - 1 - t)`` of it) and is broadcast onto the call's generated tokens (loss mask).
4. **Loss.** Clipped policy gradient on the token log-ratio against the behaviour log-probs
   recorded at generation, averaged over masked tokens, plus ``kl_coef`` times the k3 estimate
   of KL to the frozen reference (the initial weights). ``epochs`` passes (GRPO: 1, PPO: 2).
5. **Logging.** ``train.csv`` (reward, success, tokens, Critical Steps, KL, clip fraction,
   invalid-action rate per iteration), ``train.png``, and the checkpoint: the output
   directory is itself a loadable model directory (``from_pretrained(out)``). Ctrl-C writes
   the checkpoint and the CSV so far, then re-raises.

Every episode's trace records the policy's token ids on its decision events (the token table,
:mod:`orchestrace.trace.tokens`); ``keep_traces`` keeps them on the result.

Example (tiny model built from a config; a few seconds on CPU)::

    from orchestrace.learn.llm_policy import tiny_chat_lm
    from orchestrace.learn.algorithms.llm_grpo import LLMTrainConfig, train_llm
    res = train_llm(LLMTrainConfig(policy=str(tiny_chat_lm("tiny")), iterations=2))
    print(res.log[-1]["reward"])
"""

from __future__ import annotations

import csv
import json
import math
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.learn.env import ENV_IDS, make_env
from orchestrace.learn.llm_policy import action_of, instructions, state_prompt
from orchestrace.runtime.backends.base import LLMRequest
from orchestrace.trace.model import Trace
from orchestrace.trace.tokens import attach_tokens

__all__ = ["LLMTrainConfig", "LLMTrainResult", "train_llm"]

_LOG_FIELDS = (
    "iteration",
    "episodes",
    "reward",
    "success",
    "tokens",
    "critical_steps",
    "invalid_rate",
    "stop_rate",
    "loss",
    "kl",
    "approx_kl",
    "clip_frac",
    "seconds",
)


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
        credit: ``uniform`` or ``discounted`` spread of an episode's advantage over its calls.
        gamma: Discount of ``discounted`` credit.
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

    def __post_init__(self) -> None:
        if self.algo not in ("grpo", "ppo"):
            raise ConfigError(f"algo must be grpo or ppo for an LLM policy, got {self.algo!r}")
        if self.env not in ENV_IDS:
            raise ConfigError(f"unknown env {self.env!r}; use one of: {', '.join(ENV_IDS)}")
        for name in ("iterations", "tasks", "group", "max_new_tokens", "max_rounds", "save_every"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.algo == "grpo" and self.group < 2:
            raise ConfigError("GRPO needs group >= 2 episodes per task instance (--group)")
        if self.credit not in ("uniform", "discounted"):
            raise ConfigError(f"credit must be uniform or discounted, got {self.credit!r}")
        if not (self.lr > 0 and self.clip > 0 and self.temperature > 0 and self.kl_coef >= 0):
            raise ConfigError("lr, clip and temperature must be > 0 and kl_coef >= 0")


@dataclass
class LLMTrainResult:
    """What a run returns: the per-iteration log, the output directory and kept traces."""

    log: list[dict[str, float]]
    out: Path | None
    traces: list[Trace]


@dataclass
class _Call:
    prompt: list[int]
    completion: list[int]
    logprobs: list[float]
    mask: list[int]
    adv: float = 0.0


def train_llm(
    config: LLMTrainConfig, progress: Callable[[int], None] | None = None
) -> LLMTrainResult:
    """Train ``config.policy`` online; write CSV, plot and checkpoint to ``config.out``.

    Raises:
        ConfigError: The model cannot be loaded or its tokenizer has no chat template.
        KeyboardInterrupt: After writing the checkpoint and the CSV so far.
    """
    from orchestrace.runtime.backends.hf import HFBackend, require_transformers

    torch, _ = require_transformers()
    cfg = config
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    backend = HFBackend(
        model=cfg.policy,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        do_sample=True,
        max_batch=cfg.tasks * cfg.group,
        seed=cfg.seed,
        require_chat_template=True,
        device=cfg.device,
    )
    backend.load()
    model = backend.model
    if cfg.lora:
        model = backend.model = _lora(model)
    ref = _frozen_copy(model) if cfg.kl_coef > 0 else None
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    epochs = cfg.epochs or (1 if cfg.algo == "grpo" else 2)
    envs = [
        make_env(
            cfg.env,
            task=cfg.task,
            max_rounds=cfg.max_rounds,
            latency_weight=cfg.latency_weight,
            reward_fn=cfg.reward_fn,
        )
        for _ in range(cfg.tasks * cfg.group)
    ]
    system = instructions(envs[0])
    log: list[dict[str, float]] = []
    traces: list[Trace] = []
    baseline = 0.0
    try:
        for it in range(cfg.iterations):
            t0 = time.perf_counter()
            seeds = [cfg.seed * 1_000_003 + it * cfg.tasks + k for k in range(cfg.tasks)]
            model.eval()
            eps = _rollouts(envs, seeds, cfg, backend, system, it)
            rewards = [e["reward"] for e in eps]
            if cfg.shuffle_rewards:
                rng.shuffle(rewards)
            advs = _advantages(rewards, cfg, baseline)
            baseline = 0.9 * baseline + 0.1 * (sum(rewards) / len(rewards))
            calls: list[_Call] = []
            for e, a in zip(eps, advs, strict=True):
                n = len(e["calls"])
                for t, c in enumerate(e["calls"]):
                    w = cfg.gamma ** (n - 1 - t) if cfg.credit == "discounted" else 1.0
                    c.adv = a * w
                    calls.append(c)
            model.train()
            stats = _update(model, ref, opt, calls, cfg, epochs, torch)
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
            if cfg.keep_traces:
                traces = [e["trace"] for e in eps]
            if progress is not None:
                progress(1)
            if cfg.out and (it + 1) % cfg.save_every == 0 and it + 1 < cfg.iterations:
                _write(cfg, log, backend, model)
    except KeyboardInterrupt:
        if cfg.out and log:
            _write(cfg, log, backend, model)
        raise
    finally:
        for env in envs:
            env.close()
    out = _write(cfg, log, backend, model) if cfg.out and log else None
    return LLMTrainResult(log, out, traces)


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def _rollouts(
    envs: list[Any], seeds: list[int], cfg: LLMTrainConfig, backend: Any, system: str, it: int
) -> list[dict[str, Any]]:
    """Run every env to the end, one batched generate call per lockstep decision."""
    eps: list[dict[str, Any]] = []
    for i, env in enumerate(envs):
        env.train_step = it * len(envs)
        env.reset(seed=seeds[i // cfg.group])
        eps.append({"calls": [], "records": [], "invalid": 0, "stops": 0, "done": False})
    while True:
        live = [i for i, e in enumerate(eps) if not e["done"]]
        if not live:
            break
        reqs = [
            LLMRequest(
                agent="orchestrator",
                role="orchestrator",
                kind="decide",
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": state_prompt(envs[i])},
                ],
                max_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature,
            )
            for i in live
        ]
        answers = backend.generate_batch(reqs)
        for i, resp in zip(live, answers, strict=True):
            e, env = eps[i], envs[i]
            rec = resp.token_record
            action, error = action_of(env, resp.text)
            e["calls"].append(
                _Call(rec["prompt_ids"], rec["completion_ids"], rec["logprobs"], rec["mask"])
            )
            e["records"].append((rec, resp.text, error))
            e["invalid"] += error is not None
            e["stops"] += error is None and bool(env.decode(action)["stop"])
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                e["done"] = True
                e["reward"] = float(reward) - cfg.invalid_penalty * e["invalid"]
                e["success"] = float(info["success"])
                e["tokens"] = float(info["tokens"])
                e["critical_steps"] = float(info.get("critical_steps", 0.0))
                e["trace"] = _with_tokens(info["trace"], e["records"])
    return eps


def _with_tokens(trace: Trace, records: list[tuple[dict[str, Any], str, str | None]]) -> Trace:
    """The trace with each decision's token record, text and parse error on its event."""
    import msgspec

    decisions = [
        e
        for e in trace.events
        if e.type == "orchestrator_decision" and e.attrs and "turn" in e.attrs
    ]
    table = {}
    notes = {}
    for ev, (rec, text, error) in zip(decisions, records, strict=False):
        table[ev.id] = rec
        notes[ev.id] = {"text": text, **({"parse_error": error} if error else {})}
    events = tuple(
        msgspec.structs.replace(e, attrs={**(e.attrs or {}), **notes[e.id]}) if e.id in notes else e
        for e in trace.events
    )
    return attach_tokens(msgspec.structs.replace(trace, events=events), table)


def _advantages(rewards: list[float], cfg: LLMTrainConfig, baseline: float) -> list[float]:
    if cfg.algo == "ppo":
        mean = sum(rewards) / len(rewards)
        base = 0.5 * (mean + baseline)
        return [r - base for r in rewards]
    out = []
    for g in range(0, len(rewards), cfg.group):
        grp = rewards[g : g + cfg.group]
        m = sum(grp) / len(grp)
        sd = math.sqrt(sum((r - m) ** 2 for r in grp) / len(grp))
        out += [(r - m) / (sd + 1e-4) for r in grp]
    return out


def _seq_logprobs(model: Any, calls: list[_Call], torch: Any, temperature: float) -> Any:
    """Log-probs of completion tokens under ``model`` at ``temperature``: [calls, completion]."""
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
    logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits.float()
    logits = logits / temperature  # the distribution the behaviour tokens were drawn from
    logp = torch.log_softmax(logits[:, -comp - 1 : -1], dim=-1)
    tgt = ids[:, -comp:]
    out = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    return out  # right-aligned: completions end at the last column


def _update(
    model: Any,
    ref: Any,
    opt: Any,
    calls: list[_Call],
    cfg: LLMTrainConfig,
    epochs: int,
    torch: Any,
) -> dict[str, float]:
    calls = [c for c in calls if c.completion]
    if not calls:
        return {"loss": 0.0, "kl": 0.0, "approx_kl": 0.0, "clip_frac": 0.0}
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
    ref_lp = None
    if ref is not None:
        with torch.no_grad():
            ref_lp = _seq_logprobs(ref, calls, torch, cfg.temperature)
    denom = mask.sum().clamp(min=1.0)
    stats: dict[str, float] = {}
    for _ in range(epochs):
        new = _seq_logprobs(model, calls, torch, cfg.temperature)
        ratio = torch.exp(new - old)
        pg1 = ratio * adv
        pg2 = torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv
        loss = -(torch.minimum(pg1, pg2) * mask).sum() / denom
        kl = torch.tensor(0.0, device=dev)
        if ref_lp is not None:
            d = ref_lp - new
            kl = ((torch.exp(d) - d - 1) * mask).sum() / denom
            loss = loss + cfg.kl_coef * kl
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            lr = new.detach() - old
            stats = {
                "loss": float(loss.detach()),
                "kl": float(kl.detach()),
                "approx_kl": float((((torch.exp(lr) - 1) - lr) * mask).sum() / denom),
                "clip_frac": float((((ratio - 1).abs() > cfg.clip).float() * mask).sum() / denom),
            }
    return stats


def _frozen_copy(model: Any) -> Any:
    import copy

    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _lora(model: Any) -> Any:
    try:
        import peft  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError("LoRA needs peft: pip install peft") from None
    targets = [
        n for n in ("q_proj", "v_proj", "c_attn") if any(n in k for k, _ in model.named_modules())
    ]
    return peft.get_peft_model(
        model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=targets or None)
    )


def _write(cfg: LLMTrainConfig, log: list[dict[str, float]], backend: Any, model: Any) -> Path:
    """CSV, plot, the run's settings and the checkpoint (flat model files) into ``cfg.out``."""
    from orchestrace.io._output import report_dir, report_file

    out = Path(str(cfg.out))
    with report_dir(out, force=True, report="train"):
        with report_file(out / "train.csv", "w") as fh:
            w = csv.DictWriter(fh, fieldnames=list(_LOG_FIELDS))
            w.writeheader()
            for row in log:
                w.writerow({k: row.get(k, "") for k in _LOG_FIELDS})
        settings = {k: v for k, v in asdict(cfg).items() if k != "reward_fn"}
        with report_file(out / "train-config.json", "w") as fh:
            json.dump(settings, fh, indent=2, sort_keys=True, default=str)
        with tempfile.TemporaryDirectory() as tmp:
            save = (
                model.merge_and_unload()
                if cfg.lora and hasattr(model, "merge_and_unload")
                else model
            )
            save.save_pretrained(tmp)
            backend.tokenizer.save_pretrained(tmp)
            for f in sorted(Path(tmp).iterdir()):
                if f.is_file():
                    with report_file(out / f.name) as fh:
                        fh.write(f.read_bytes())
        _plot(log, out / "train.png", f"{cfg.algo} LLM orchestrator on {cfg.env} ({cfg.task})")
    return out


def _plot(log: list[dict[str, float]], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    from orchestrace.io._output import report_file

    keys = ("reward", "success", "tokens", "critical_steps", "kl", "invalid_rate")
    fig, axes = plt.subplots(2, 3, figsize=(11, 6))
    x = [r["iteration"] for r in log]
    for ax, k in zip(axes.flat, keys, strict=True):
        ax.plot(x, [r[k] for r in log])
        ax.set_title(k)
        ax.set_xlabel("iteration")
    fig.suptitle(title)
    fig.tight_layout()
    with report_file(path) as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
