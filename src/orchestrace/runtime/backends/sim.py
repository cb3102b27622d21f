"""The simulated backend: a seeded model of skill, latency and tokens on virtual time.

Every answer is a pure function of ``(seed, request key)``, so runs are reproducible bit for bit
and a counterfactual fork that changes one call leaves every other call's answer intact.

* **Skill**: each role has a skill (``worker`` 0.9, ``expert`` 0.97, ``novice`` 0.75, ...), varied
  a little per agent. A ``solve`` request is answered correctly unless an error strikes, with
  probability ``(1 - skill) * hardness`` where the task sets ``hardness`` from the part's size
  (quadratic: big parts are disproportionately error-prone). A wrong input (a previous hop
  answered wrongly) gives a wrong answer.
* **Evidence**: a ``solve`` request whose payload carries ``supported`` (what the tool results
  the agent actually retrieved say, computed from those results by the task) answers from that
  evidence instead: the supported value unless an error strikes. When the results settle
  nothing (``supported`` is ``None``: a failed search, a broken lookup chain) the model guesses
  from the question alone (``guess``, or a random choice), so a lost tool result costs accuracy.
  The error rate of reading is ``(1 - skill) * hardness`` with the ``hardness`` the request
  carries: ``wide-search-v2`` sets a per-read hardness (0.5) independent of the part's size,
  ``wide-search-v1`` keeps the part's (quadratic) hardness.
* **Verification** (default): ``judge``, ``critique`` and ``revise`` decide from what they are
  shown plus their own noisy solving of the task (with the same skill/hardness model as
  ``solve``): the judge picks the candidate equal to its own answer, else the most common
  candidate; the critic accepts a candidate equal to its own answer; a reviser keeps the
  answer its own re-solving agrees with among its and its peers' answers, else the most common
  one (ties: its own). None of them reads the ground truth to decide. On tasks that answer
  from tool results (``supported`` in the request: the verifier's own lookups) the verifier's
  answer is read from that evidence, or guessed when the lookups failed.
* **Oracle verification** (``oracle_verifiers=True``, the behaviour before the option existed
  and of the ``sim-v1`` suite): ``critique`` is right with probability ``skill``; ``judge``
  picks the correct candidate with probability ``skill`` even when it is a minority answer;
  ``revise`` moves to the truth whenever a peer holds it. Verifiers then read the ground truth.
* **Correlated errors** (``error_correlation``, default 0): independent by default; with
  probability ``error_correlation`` a solve uses draws shared by every agent solving the same
  part, so errors (and wrong answers) coincide, as real models' shared mistakes do.
* **Confidence**: ``solve`` and ``revise`` answers come with a confidence in [0, 1], higher for
  right answers (mean 0.75 against 0.62, sd 0.12: an AUROC near 0.78, like log-prob or
  verbalised confidence of current models) and lower on harder parts.
* **Latency**: time to first token plus ``tokens_out / tokens_per_s``, jittered (virtual seconds).
* **Tokens**: prompt tokens from the rendered messages (4 characters each); completion tokens
  from a per-kind mean, jittered.

Example:
    >>> import asyncio
    >>> from orchestrace.runtime.backends.base import LLMRequest
    >>> sim = SimBackend(seed=0)
    >>> req = LLMRequest("w1", "worker", "solve", [{"role": "user", "content": "2+2?"}],
    ...                  {"truth": 4, "hardness": 0.0, "wrong": "int"})
    >>> r = asyncio.run(sim.complete(req))
    >>> r.answer, r.text.endswith("ANSWER: 4"), r.latency > 0
    (4, True, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends.base import LLMRequest, LLMResponse, request_key

__all__ = ["DEFAULT_SKILLS", "SimBackend"]

#: Skill per role (probability of getting a unit-size part right).
DEFAULT_SKILLS: dict[str, float] = {
    "orchestrator": 0.95, "manager": 0.92, "worker": 0.9, "expert": 0.97, "novice": 0.75,
    "critic": 0.85, "judge": 0.85, "debater": 0.8, "planner": 0.9, "executor": 0.9,
    "aggregator": 0.95,
}  # fmt: skip
#: Request kinds that verify or revise others' answers.
_VERIFY = ("critique", "judge", "revise")
#: Payload fields a non-oracle verifier solves from (ignored by the oracle).
_SOLVING = ("hardness", "size", "wrong", "choices", "task", "index")
_OUT_TOKENS = {"solve": 60, "plan": 90, "critique": 30, "judge": 25, "revise": 50, "aggregate": 40}


@dataclass
class SimBackend:
    """Seeded skill/latency/token model (virtual time).

    Args:
        seed: Seed of every draw.
        skills: Skill per role (defaults: :data:`DEFAULT_SKILLS`).
        skill_spread: Per-agent variation of skill (uniform +- spread).
        ttft_s: Mean time to first token (virtual seconds).
        tokens_per_s: Generation speed.
        latency_scale: Multiplies all latencies (0 for zero-latency benchmarks).
        price_in: Cost per prompt token.
        price_out: Cost per completion token.
        fail_rate: Probability that a call fails (an injected backend fault).
        role_tokens: Completion-length multiplier per role (e.g. experts write more).
        error_correlation: Probability that a solve shares its error draw (and its wrong
            answer) with every other agent solving the same thing; 0 (default): errors are
            independent.
        oracle_verifiers: Let ``judge``, ``critique`` and ``revise`` read the ground truth
            (the behaviour of the ``sim-v1`` suite); off by default: verifiers decide from what
            they are shown plus their own noisy solving.
    """

    seed: int = 0
    skills: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SKILLS))
    skill_spread: float = 0.03
    ttft_s: float = 0.4
    tokens_per_s: float = 60.0
    latency_scale: float = 1.0
    price_in: float = 0.5e-6
    price_out: float = 2.0e-6
    fail_rate: float = 0.0
    role_tokens: dict[str, float] = field(default_factory=dict)
    error_correlation: float = 0.0
    oracle_verifiers: bool = False
    name: str = "sim"
    virtual: bool = True
    calls: int = 0

    def __post_init__(self) -> None:
        for role, s in self.skills.items():
            if not 0.0 <= s <= 1.0:
                raise ConfigError(f"skill of role {role!r} must be in [0, 1], got {s}")
        if self.latency_scale < 0 or self.tokens_per_s <= 0 or self.ttft_s < 0:
            raise ConfigError("latency_scale and ttft_s must be >= 0 and tokens_per_s > 0")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ConfigError(f"fail_rate must be in [0, 1], got {self.fail_rate}")
        rho = self.error_correlation
        if isinstance(rho, bool) or not isinstance(rho, int | float) or not 0.0 <= rho <= 1.0:
            raise ConfigError(f"error_correlation must be a number in [0, 1], got {rho!r}")
        if not isinstance(self.oracle_verifiers, bool):
            raise ConfigError(
                f"oracle_verifiers must be true or false, got {self.oracle_verifiers!r}"
            )

    def spec(self) -> dict[str, Any]:
        """Everything that rebuilds this simulator (``options`` are its constructor arguments).

        Example:
            >>> SimBackend(seed=2, fail_rate=0.1).spec()["options"]["fail_rate"]
            0.1
        """
        options = {
            "seed": self.seed,
            "skills": dict(self.skills),
            "skill_spread": self.skill_spread,
            "ttft_s": self.ttft_s,
            "tokens_per_s": self.tokens_per_s,
            "latency_scale": self.latency_scale,
            "price_in": self.price_in,
            "price_out": self.price_out,
            "fail_rate": self.fail_rate,
            "role_tokens": dict(self.role_tokens),
            "error_correlation": self.error_correlation,
            "oracle_verifiers": self.oracle_verifiers,
        }
        return {"name": "sim", "virtual": True, "options": options}

    def skill(self, agent: str, role: str) -> float:
        """Skill of ``agent`` (its role's skill, varied per agent, in [0, 1])."""
        base = self.skills.get(role, self.skills.get("worker", 0.9))
        h = hashlib.blake2b(f"{self.seed}:{agent}".encode(), digest_size=8).digest()
        jitter = (int.from_bytes(h, "little") / 2**64 * 2 - 1) * self.skill_spread
        return min(1.0, max(0.0, base + jitter))

    def _rng(self, request: LLMRequest) -> random.Random:
        from orchestrace.runtime.prompts import SPOTLIGHT_NOTE, render  # noqa: PLC0415  import cycle: orchestrace.runtime.prompts imports this module

        msgs = request.messages
        if msgs and SPOTLIGHT_NOTE in msgs[0].get("content", ""):
            # draws depend on what is asked, not on how untrusted text is delimited: a
            # spotlighted prompt draws as its plain rendering does
            plain = render(request.kind, request.payload, request.role)
            request = dataclasses.replace(request, messages=plain)
        key = request_key(request, 0)
        return random.Random(f"{self.seed}:{key}")

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` (instantly; ``latency`` says how long it took in virtual time)."""
        self.calls += 1
        if self.oracle_verifiers and request.kind in _VERIFY:
            # the oracle never used the solving fields: draw exactly as before they were sent
            trimmed = {k: v for k, v in request.payload.items() if k not in _SOLVING}
            request = dataclasses.replace(request, payload=trimmed)
        rng = self._rng(request)
        p = request.payload
        skill = self.skill(request.agent, request.role)
        answer = self._answer(request.kind, p, skill, rng)
        tokens_in = sum(len(m.get("content", "")) for m in request.messages) // 4 + 8
        mean_out = (_OUT_TOKENS.get(request.kind, 50) + 2 * int(p.get("size", 0) or 0)) * (
            self.role_tokens.get(request.role, 1.0)
        )
        tokens_out = max(1, min(request.max_tokens, int(mean_out * rng.lognormvariate(0, 0.3))))
        latency = self.latency_scale * (
            self.ttft_s * rng.uniform(0.5, 1.5) + tokens_out / self.tokens_per_s
        )
        cost = tokens_in * self.price_in + tokens_out * self.price_out
        if self.fail_rate and rng.random() < self.fail_rate:
            return LLMResponse(
                "", None, tokens_in, 0, latency, cost, self.name, error="simulated backend failure"
            )
        text = f"ANSWER: {json.dumps(answer)}"
        confidence = None
        if request.kind in ("solve", "revise") and "truth" in p:
            right = answer == p["truth"]
            mu = (0.75 if right else 0.62) - 0.05 * min(float(p.get("hardness", 1.0)), 3.0) / 3
            if request.kind == "solve" and "supported" in p and p["supported"] is None:
                mu = 0.45  # a guess without evidence
            confidence = round(min(1.0, max(0.0, rng.gauss(mu, 0.12))), 4)
        return LLMResponse(
            text,
            answer,
            tokens_in,
            tokens_out,
            round(latency, 6),
            cost,
            self.name,
            confidence=confidence,
        )

    @staticmethod
    def _wrong(truth: Any, p: dict[str, Any], rng: random.Random) -> Any:
        if p.get("wrong") == "choice" or not isinstance(truth, int | float):
            choices = [c for c in p.get("choices") or [] if c != truth]
            return rng.choice(choices) if choices else f"not-{truth}"
        delta = rng.choice([-3, -2, -1, 1, 2, 3]) * rng.randint(1, 3)
        return truth + delta

    def _solve(self, target: Any, p: dict[str, Any], skill: float, rng: random.Random) -> Any:
        """``target`` unless an error strikes (rate ``(1 - skill) * hardness``).

        With ``error_correlation`` > 0, a solve takes, with that probability, the draws shared
        by every agent solving the same thing (same part and answer): those agents are then
        right together, or wrong together with the same wrong answer.
        """
        error = min(0.98, (1.0 - skill) * float(p.get("hardness", 1.0)))
        if self.error_correlation and rng.random() < self.error_correlation:
            what = [p.get("task"), p.get("index"), p.get("size"), target]
            rng = random.Random(f"{self.seed}:shared:{json.dumps(what, default=str)}")
        return target if rng.random() >= error else self._wrong(target, p, rng)

    @staticmethod
    def _guess(p: dict[str, Any], rng: random.Random) -> Any:
        """An answer from the question alone (no evidence): never reads the truth."""
        choices = list(p.get("choices") or [])
        if p.get("wrong") == "choice" or not isinstance(p.get("guess"), int | float):
            return rng.choice(choices) if choices else None
        return max(0, round(float(p["guess"])) + rng.randint(-2, 2))

    @staticmethod
    def _plurality(values: list[Any]) -> Any:
        """The most common value (ties: the one seen first)."""
        counts = Counter(json.dumps(v, sort_keys=True) for v in values)
        best = max(counts.values())
        return next(v for v in values if counts[json.dumps(v, sort_keys=True)] == best)

    def _answer(self, kind: str, p: dict[str, Any], skill: float, rng: random.Random) -> Any:
        truth = p.get("truth")
        if kind == "solve":
            if "supported" in p:  # answer from the evidence the agent retrieved
                if p["supported"] is None:
                    return self._guess(p, rng)
                return self._solve(p["supported"], p, skill, rng)
            if "expected_input" in p and p.get("input") != p["expected_input"]:
                return self._wrong(truth, p, rng)
            return self._solve(truth, p, skill, rng)
        if kind in _VERIFY and not self.oracle_verifiers:
            return self._verify(kind, p, skill, rng)
        if kind == "critique":
            right = p.get("candidate") == truth
            sees = rng.random() < skill
            return "accept" if right == sees else "reject"
        if kind == "judge":
            cands = list(p.get("candidates") or [])
            if not cands:
                return None
            good = [i for i, c in enumerate(cands) if c == truth]
            if good and rng.random() < skill:
                return good[0]
            return rng.randrange(len(cands))
        if kind == "revise":
            own, peers = p.get("own"), list(p.get("peers") or [])
            everyone = [own, *peers]
            if truth in everyone and own != truth:
                share = everyone.count(truth) / len(everyone)
                if rng.random() < skill * (0.5 + share):
                    return truth
            if own == truth and peers and rng.random() < (1 - skill) * 0.5:
                top = Counter(json.dumps(x, sort_keys=True) for x in peers).most_common(1)[0][0]
                return json.loads(top)  # conformity: the majority of peers, right or wrong
            return own
        if kind == "plan":
            return int(p.get("suggest", 4))
        if not self.oracle_verifiers:  # any other request: the model's own noisy solving
            return None if truth is None else self._solve(truth, p, skill, rng)
        if kind == "aggregate":
            parts = p.get("parts") or []
            return truth if rng.random() < skill else (parts[0] if parts else None)
        return truth

    def _verify(self, kind: str, p: dict[str, Any], skill: float, rng: random.Random) -> Any:
        """Judge, critique or revise from what is shown plus the verifier's own solving.

        The verifier solves the task itself (the ``solve`` model: right unless an error
        strikes at rate ``(1 - skill) * hardness``; without ``hardness`` in the payload, a
        unit-size task) and compares what it is shown with its own answer. On a task whose
        answers rest on tool results the payload carries ``supported`` (what the verifier's own
        lookups returned): it answers from that, and guesses when they settle nothing; it
        never reads the truth then.
        """
        if "supported" in p:  # a task that needs lookups: what the verifier retrieved
            supported = p["supported"]
            mine = (
                self._guess(p, rng) if supported is None else self._solve(supported, p, skill, rng)
            )
        else:
            mine = self._solve(p.get("truth"), p, skill, rng)
        if kind == "critique":
            candidate = p.get("candidate")
            return "accept" if candidate is not None and candidate == mine else "reject"
        if kind == "judge":
            cands = list(p.get("candidates") or [])
            if not cands:
                return None
            if mine in cands:
                return cands.index(mine)
            shown = [c for c in cands if c is not None]
            return cands.index(self._plurality(shown)) if shown else 0
        own, peers = p.get("own"), list(p.get("peers") or [])
        everyone = [x for x in (own, *peers) if x is not None]
        if mine in everyone:
            return mine
        if not everyone:
            return own
        top = self._plurality(everyone)
        return own if everyone.count(own) == everyone.count(top) else top

    async def aclose(self) -> None:
        """Nothing to release."""
