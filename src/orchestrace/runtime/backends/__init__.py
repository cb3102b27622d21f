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
}


def _check_complete(name: str, built: Any, given: set[str]) -> None:
    """Say which options a rebuilt backend took by default, its recorded options lacking them.

    The recorded run may not have used those values (a simulator's seed, a model's sampling):
    a fork's changed calls are then answered as by another backend. The forked trace records
    the values used (``meta.fork.backend``); this warning says so where it happens.
    """
    spec = getattr(built, "spec", None)
    wanted = spec().get("options") if callable(spec) else None
    if not isinstance(wanted, Mapping):
        return
    missing = sorted({str(k) for k in wanted} - given - _RECORDED_LATER.get(name, frozenset()))
    if missing:
        used = ", ".join(f"{k}={_short(repr(wanted[k]), 40)}" for k in missing[:8])
        warnings.warn(
            f"the recorded options of backend {name!r} lack {', '.join(missing[:8])}: it was "
            f"rebuilt with the defaults {used}, which the recorded run may not have used; pass "
            f"them (e.g. {missing[0]}=...) to choose",
            UserWarning,
            stacklevel=3,
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
