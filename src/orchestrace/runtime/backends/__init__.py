"""LLM backends behind one protocol: ``sim`` (default), ``openai``, ``hf``, ``vllm``.

A backend with a ``spec()`` records, in every trace header (``meta.backend``), what rebuilds it:
:func:`backend_from_spec` turns that record back into a backend (secrets such as the API key
come from the environment, never from the trace).

Example:
    >>> make_backend("sim", seed=3).name
    'sim'
    >>> b = backend_from_spec(make_backend("sim", seed=3, fail_rate=0.2).spec(), seed=4)
    >>> b.seed, b.fail_rate
    (4, 0.2)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from orchestrace.errors import ConfigError, _short
from orchestrace.runtime.backends.base import (
    Backend,
    BackendError,
    LLMRequest,
    LLMResponse,
    backend_spec,
    request_key,
)
from orchestrace.runtime.backends.sim import SimBackend

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "LLMRequest",
    "LLMResponse",
    "SimBackend",
    "backend_from_spec",
    "backend_spec",
    "make_backend",
    "request_key",
]

BACKENDS = ("sim", "openai", "hf", "vllm")


def make_backend(name: str, **kw: Any) -> Backend:
    """Build a backend by name (``sim``, ``openai``, ``hf``, ``vllm``) with its keyword options.

    Raises:
        ConfigError: Unknown backend or bad options.
    """
    cls: Any
    if name == "sim":
        cls = SimBackend
    elif name == "openai":
        from orchestrace.runtime.backends.openai import OpenAIBackend  # noqa: PLC0415  import cycle: orchestrace.runtime.backends.openai imports this module

        cls = OpenAIBackend
    elif name == "hf":
        from orchestrace.runtime.backends.hf import HFBackend  # noqa: PLC0415  import cycle: orchestrace.runtime.backends.hf imports this module

        cls = HFBackend
    elif name == "vllm":
        from orchestrace.runtime.backends.vllm import VLLMBackend  # noqa: PLC0415  import cycle: orchestrace.runtime.backends.vllm imports this module

        cls = VLLMBackend
    else:
        raise ConfigError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    known = {f for f in getattr(cls, "__dataclass_fields__", {}) if not f.startswith("_")}
    known -= {"name", "virtual", "calls"}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise ConfigError(
            f"the {name} backend has no option {unknown[0]!r}; its options: "
            + ", ".join(sorted(known))
        )
    return cls(**kw)  # type: ignore[no-any-return]


def backend_from_spec(spec: Mapping[str, Any] | None, **overrides: Any) -> Backend:
    """Rebuild the backend that a trace header records (``meta.backend``).

    Args:
        spec: The recorded spec: ``name`` and ``options`` (constructor arguments), as written
            by :func:`backend_spec`.
        **overrides: Options that replace the recorded ones (``None`` values are ignored),
            e.g. ``base_url`` when the server moved, ``seed`` for another sample.

    Raises:
        ConfigError: No spec, a spec without ``options`` (recorded by an older version, or
            by a backend that cannot be rebuilt), an unknown backend or a bad option.
    """
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        raise ConfigError("no backend spec (a 'name' and its 'options') to rebuild a backend from")
    name = spec["name"]
    options = spec.get("options")
    if not isinstance(options, Mapping):
        raise ConfigError(
            f"the spec of backend {name!r} records no options, so it cannot be rebuilt; "
            "build the backend explicitly"
        )
    kw = {str(k): v for k, v in options.items() if v is not None}
    kw.update({k: v for k, v in overrides.items() if v is not None})
    base_url = kw.get("base_url")
    if isinstance(base_url, str) and "***" in base_url:
        raise ConfigError(
            f"the recorded base URL {base_url!r} held credentials, which are never recorded; "
            "pass the server's URL (base_url=..., --base-url URL)"
        )
    if name == "sim":
        # simulators recorded before verifiers stopped reading the ground truth were oracles
        kw.setdefault("oracle_verifiers", True)
        _check_sim_options(kw)
    try:
        built = make_backend(name, **kw)
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError(f"the spec of backend {name!r} holds a bad option: {err}") from None
    _check_complete(name, built, {*map(str, options), *kw})
    return built


#: Options a spec may lack because an older version did not record them, where what that
#: version did is what the rebuilt backend does: the simulator's verifiers were oracles
#: (filled in above) and its errors uncorrelated (``error_correlation`` 0, the default); the
#: OpenAI client's limits on ``Retry-After`` waits and body sizes shape no answer.
_RECORDED_LATER = {
    "sim": frozenset({"oracle_verifiers", "error_correlation"}),
    "openai": frozenset({"max_retry_after_s", "max_body_bytes"}),
    "vllm": frozenset({"max_retry_after_s", "max_body_bytes"}),
}
#: Options older versions did not record where they did something else than the default
#: (the transformers backend answered one request at a time, unseeded): rebuilt with the
#: default, said in a warning.
_DEFAULTED_LATER = {
    "hf": frozenset({"max_batch", "max_wait_ms", "seed", "plain_sampling", "top_k"}),
}


def _check_complete(name: str, built: Any, given: set[str]) -> None:
    """Refuse a rebuilt backend whose recorded options lack one every version recorded.

    Such a trace was edited: a default in its place (a simulator's seed) would answer a
    fork's changed calls as another backend would, without a word. Options an older version
    did not record are filled: silently where the default is what that version did, with a
    warning naming the values used otherwise (the forked trace records them too).
    """
    spec = getattr(built, "spec", None)
    wanted = spec().get("options") if callable(spec) else None
    if not isinstance(wanted, Mapping):
        return
    missing = {str(k) for k in wanted} - given - _RECORDED_LATER.get(name, frozenset())
    later = sorted(missing & _DEFAULTED_LATER.get(name, frozenset()))
    refused = sorted(missing - set(later))
    if refused:
        raise ConfigError(
            f"the recorded options of backend {name!r} lack {', '.join(refused[:8])}, which "
            "every version records (was the trace edited?): a default in their place might "
            f"not be what the run used; pass them (e.g. {refused[0]}=...) or record the run "
            "again"
        )
    if later:
        used = ", ".join(f"{k}={_short(repr(wanted[k]), 40)}" for k in later)
        warnings.warn(
            f"the recorded options of backend {name!r} lack {', '.join(later)} (recorded by "
            f"an older version): it was rebuilt with the defaults {used}, which that run may "
            f"not have used; pass them (e.g. {later[0]}=...) to choose",
            UserWarning,
            stacklevel=2,
        )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_sim_options(kw: Mapping[str, Any]) -> None:
    for key, value in kw.items():
        if key in ("skills", "role_tokens"):
            ok = isinstance(value, Mapping) and all(
                isinstance(k, str) and _number(v) for k, v in value.items()
            )
            want = "an object of role -> number"
        elif key == "oracle_verifiers":
            ok = isinstance(value, bool)
            want = "true or false"
        else:
            ok = _number(value) and (key != "seed" or isinstance(value, int))
            want = "an integer" if key == "seed" else "a number"
        if not ok:
            raise ConfigError(
                f"the spec of backend 'sim' holds a bad option {key}={value!r:.60} "
                f"(expected {want})"
            )
