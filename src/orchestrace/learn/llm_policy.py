"""An LLM as the orchestrator: text actions for decisions O1-O5, parsed strictly.

At each decision point the policy reads the state as text (the environment's prompt) and
answers with ONE action line:

| action | decisions |
| --- | --- |
| ``STOP`` | O5 stop, aggregate with the environment's method |
| ``STOP <aggregate>`` | O5 stop and O4: ``vote``, ``trust``, ``judge`` or ``first`` |
| ``CONTINUE`` | O5 continue with the environment's spawn, role and comm |
| ``SPAWN <n>`` | O1: ``n`` in 0, 1, 2, 4, 8 new workers this round |
| ``SPAWN <n> <role>`` | and O2: ``novice``, ``worker`` or ``expert`` |
| ``SPAWN <n> <role> <comm>`` | and O3: ``none``, ``broadcast`` or ``p2p`` |

Words are upper-case keywords followed by lower-case values separated by single spaces;
surrounding white space is ignored, anything else (another word, a second line, a value the
environment does not learn) is an :class:`ActionError`. A trainer records the error on the
decision and penalises it; the episode goes on with the environment's default decision.

Example:
    >>> parse_action("SPAWN 2 expert broadcast")
    {'stop': False, 'spawn': 2, 'role': 'expert', 'comm': 'broadcast'}
    >>> parse_action("STOP judge")
    {'stop': True, 'aggregate': 'judge'}
    >>> try:
    ...     parse_action("stop please")
    ... except ActionError as err:
    ...     print(str(err)[:48])
    'stop please' is not an action; answer one line:
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.runtime.backends.hf import require_transformers
from orchestrace.runtime.rounds import AGGREGATES, COMMS, ROLES, SPAWNS

__all__ = [
    "ACTION_FORMAT",
    "ActionError",
    "action_format",
    "action_of",
    "instructions",
    "parse_action",
    "state_prompt",
    "tiny_chat_lm",
]

ACTION_FORMAT = (
    "STOP [vote|trust|judge|first], CONTINUE or SPAWN <0|1|2|4|8> "
    "[novice|worker|expert] [none|broadcast|p2p]"
)
#: Which decision (O1..O5) each parsed key sets.
_DECISION = {"spawn": "O1", "role": "O2", "comm": "O3", "aggregate": "O4", "stop": "O5"}


class ActionError(OrchestraceError, ValueError):
    """A policy's text is not an action (recorded on the decision and penalised)."""


def parse_action(text: str) -> dict[str, Any]:
    """The decisions a text action sets (only those it names).

    Raises:
        ActionError: The text is not exactly one action of the documented format.
    """
    words = text.strip().split(" ")
    bad = ActionError(f"{_short(text)!r} is not an action; answer one line: {ACTION_FORMAT}")
    if not text.strip() or "\n" in text.strip() or any(w == "" for w in words):
        raise bad
    head, rest = words[0], words[1:]
    if head == "STOP" and len(rest) <= 1:
        if not rest:
            return {"stop": True}
        if rest[0] in AGGREGATES:
            return {"stop": True, "aggregate": rest[0]}
    elif head == "CONTINUE" and not rest:
        return {"stop": False}
    elif head == "SPAWN" and 1 <= len(rest) <= 3:
        if rest[0] not in {str(n) for n in SPAWNS}:
            raise bad
        out: dict[str, Any] = {"stop": False, "spawn": int(rest[0])}
        for key, value, allowed in zip(("role", "comm"), rest[1:], (ROLES, COMMS), strict=False):
            if value not in allowed:
                raise bad
            out[key] = value
        return out
    raise bad


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def action_of(env: Any, text: str) -> tuple[Any, str | None]:
    """The env action a text takes, and the parse error (``None`` when it parsed).

    An unparseable text, or one setting a decision the env does not learn, takes the env's
    default decision (continue with its fixed spawn, role and comm) and returns the error.

    Example:
        >>> from orchestrace.learn.env import make_env
        >>> env = make_env("stop-v0", task="arith")
        >>> action_of(env, "STOP"), action_of(env, "CONTINUE")
        ((1, None), (0, None))
        >>> action_of(env, "SPAWN 2")[1]
        "'SPAWN 2' sets O1, which this environment does not learn (it learns O5)"
    """
    learned = tuple(env.learned)
    base = {
        "spawn": int(env.config.fixed.get("O1") or 1),
        "role": str(env.config.fixed.get("O2") or "worker"),
        "comm": str(env.config.fixed.get("O3") or "none"),
        "aggregate": str(env.config.fixed.get("O4") or "vote"),
        "stop": False,
    }
    try:
        got = parse_action(text)
    except ActionError as err:
        return env.encode(base), str(err)
    extra = [_DECISION[k] for k in got if _DECISION[k] not in learned and k != "stop"]
    if "O5" not in learned and got.get("stop"):
        extra.insert(0, "O5")
    if extra:
        return env.encode(base), (
            f"{_short(text)!r} sets {extra[0]}, which this environment does not learn "
            f"(it learns {', '.join(learned)})"
        )
    return env.encode({**base, **got}), None


def action_format(learned: tuple[str, ...] | list[str]) -> str:
    """The actions an env that learns ``learned`` (``O1``..``O5``) accepts, as one line.

    Example:
        >>> action_format(["O5"])
        'STOP or CONTINUE'
        >>> action_format(["O1", "O2", "O5"])
        'STOP, CONTINUE or SPAWN <0|1|2|4|8> [novice|worker|expert]'
    """
    stop = "STOP [vote|trust|judge|first]" if "O4" in learned else "STOP"
    forms = [stop, "CONTINUE"] if "O5" in learned else ["CONTINUE"]
    if "O1" in learned:
        spawn = "SPAWN <0|1|2|4|8>"
        if "O2" in learned:
            spawn += " [novice|worker|expert]"
            if "O3" in learned:
                spawn += " [none|broadcast|p2p]"
        forms.append(spawn)
    return forms[0] if len(forms) == 1 else ", ".join(forms[:-1]) + " or " + forms[-1]


_NAMES = {"O1": "spawn", "O2": "delegate", "O3": "communicate", "O4": "aggregate", "O5": "stop"}


def instructions(env: Any) -> str:
    """The system prompt: which decisions the policy takes and the actions it may answer."""
    taken = ", ".join(f"{d} ({_NAMES[d]})" for d in env.learned)
    return (
        f"You orchestrate workers. Decisions you take: {taken}. "
        f"Answer with one action: {action_format(tuple(env.learned))}."
    )


def state_prompt(env: Any) -> str:
    """The env's state as text for an LLM policy, ending with the action format.

    The runtime's prompt ends with a request for a JSON decision (what a structured-output
    model answers); an action policy is asked for an action line instead.

    Example:
        >>> from orchestrace.learn.env import make_env
        >>> env = make_env("stop-v0", task="arith")
        >>> _ = env.reset(seed=1)
        >>> state_prompt(env).splitlines()[-1][:24]
        'Answer with one action: '
    """
    text = str(env.prompt())
    head, sep, _ = text.rpartition("\nDecide as JSON")
    fmt = action_format(tuple(env.learned))
    return (head if sep else text) + f"\nAnswer with one action: {fmt}."


def tiny_chat_lm(
    path: str | Path, *, words: list[str] | None = None, seed: int = 0, layers: int = 2
) -> Path:
    """Build and save a tiny Llama model with a word-level chat tokenizer (no download).

    The vocabulary holds the action keywords and values, digits and a few prompt words; the
    tokenizer has a chat template, so the directory works as ``--policy`` of
    ``orchestrace train``. Needs the ``[hf]`` extra.

    Raises:
        ConfigError: ``path`` exists and is not empty.
    """
    torch, transformers = require_transformers()
    from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: PLC0415  optional extra [hf]

    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise ConfigError(f"{path} is not empty; choose a new directory for the tiny model")
    vocab = ["STOP", "CONTINUE", "SPAWN", *AGGREGATES, *ROLES, *COMMS]
    vocab += [str(n) for n in range(10)] + list(words or ["Answers", "so", "far:", "of", "top"])
    table = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2, "<s>": 3, "system": 4, "user": 5}
    table["assistant"] = 6
    for w in vocab:
        table.setdefault(w, len(table))
    tk = Tokenizer(models.WordLevel(table, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]"
    )
    fast.chat_template = (
        "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} [EOS] {% endfor %}"
        "{% if add_generation_prompt %}<s> assistant {% endif %}"
    )
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=len(table),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=3,
        eos_token_id=2,
        pad_token_id=1,
        tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(cfg)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path
