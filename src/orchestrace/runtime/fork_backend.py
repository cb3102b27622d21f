"""Which backend answers a fork's changed calls: the recorded one, rebuilt, or a given one.

:func:`backend_for` rebuilds the backend a trace records (``meta.backend``), or builds the one
the caller names; a trace that does not record enough to rebuild its backend, or whose backend
cannot answer (server down, model missing), is refused with an error naming ``--backend``: the
simulator never stands in silently. A real backend answers a fork on virtual time through
:class:`OnVirtualTime`, one call at a time.

Example:
    >>> from orchestrace.runtime import run
    >>> tr = run("swarm", "arith", agents=2, seed=3).trace
    >>> b = backend_for(tr, seed_offset=2)
    >>> b.name, b.seed
    ('sim', 5)
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from orchestrace._safe import display, redact
from orchestrace.errors import ConfigError
from orchestrace.runtime.backends import backend_from_spec, make_backend
from orchestrace.runtime.backends.base import (
    Backend,
    BackendError,
    LLMRequest,
    LLMResponse,
    backend_spec,
)
from orchestrace.runtime.backends.sim import SimBackend
from orchestrace.runtime.interventions import shown_trace
from orchestrace.trace.model import Trace

__all__ = ["OnVirtualTime", "backend_for", "check_answered", "how"]

_FLAGS = "--backend sim to fork it on the simulator, or --backend openai --base-url URL"


def _recorded_spec(trace: Trace) -> dict[str, Any]:
    spec = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ConfigError(
            f"trace {shown_trace(trace)!r} does not record which backend produced it (no "
            f"meta.backend); pass {_FLAGS} (backend= in Python)"
        )
    return spec


def _describe(spec: dict[str, Any]) -> str:
    name = str(spec.get("name"))
    raw = spec.get("options")
    opts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    model = spec.get("model") or opts.get("model")
    url = spec.get("base_url") or opts.get("base_url")
    where = (f"model {model!r}" if model else "") + (f" at {url}" if url else "")
    return f"{name} ({where.strip()})" if where.strip() else name


def backend_for(
    trace: Trace,
    backend: Backend | str | None = None,
    *,
    seed_offset: int = 0,
    check: bool = False,
    **options: Any,
) -> Backend:
    """The backend that answers the changed calls of a fork of ``trace``.

    By default the backend the trace records (``meta.backend``) is rebuilt, secrets coming
    from the environment. A name (``sim``, ``openai``, ``hf``) overrides it: the recorded
    options are kept when the name is the recorded one, else the backend is built from
    ``options`` (the simulator with the run's seed). A backend object is used as it is.

    Args:
        trace: A trace recorded by the runtime.
        backend: ``None`` (the recorded backend), a backend name, or a backend object.
        seed_offset: Added to the simulator's seed (the k-th sample of a counterfactual).
        check: Check now that the backend can answer (an OpenAI-compatible server accepts
            connections, a transformers model loads); :func:`fork` checks at the first call.
        **options: Options that replace the recorded ones (``model``, ``base_url``...;
            ``None`` values are ignored).

    Raises:
        ConfigError: The trace records no backend, or not enough to rebuild it, or the
            rebuilt backend cannot answer; the message names the flag to pass.
    """
    if backend is not None and not isinstance(backend, str):
        if not callable(getattr(backend, "complete", None)) or not hasattr(backend, "virtual"):
            raise ConfigError(
                f"backend must be None (the recorded backend), a name ('sim', 'openai', 'hf') or "
                f"a backend object with complete() and virtual (got {display(repr(backend), 60)})"
            )
        if seed_offset and isinstance(backend, SimBackend):
            return dataclasses.replace(backend, seed=backend.seed + seed_offset, calls=0)
        return backend
    given = {k: v for k, v in options.items() if v is not None}
    spec: dict[str, Any] | None = None
    if backend is None:
        spec = _recorded_spec(trace)
        if not isinstance(spec.get("options"), dict):
            raise ConfigError(
                f"trace {shown_trace(trace)!r} records backend {_describe(spec)} but not the options "
                f"that rebuild it (recorded by an older version, or by a wrapped backend); "
                f"pass {_FLAGS} (backend= in Python)"
            )
    else:
        recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
        if (
            isinstance(recorded, dict)
            and recorded.get("name") == backend
            and isinstance(recorded.get("options"), dict)
        ):
            spec = recorded
    if spec is not None:
        opts = dict(spec["options"])
        seed = opts.get("seed", 0)
        if spec["name"] == "sim" and seed_offset and isinstance(seed, int):
            opts["seed"] = seed + seed_offset
        try:
            built = backend_from_spec({**spec, "options": opts}, **given)
        except ConfigError as err:
            raise ConfigError(
                f"cannot rebuild backend {_describe(spec)} of trace {shown_trace(trace)!r}: {err}; "
                f"pass {_FLAGS} (backend= in Python)"
            ) from None
        if "base_url" not in given and _trusted_url(built) is False:
            built.api_key = None  # type: ignore[attr-defined]  # never sent to a traced URL
    else:
        assert backend is not None
        kw = dict(given)
        if backend == "sim" and "seed" not in kw:
            config = trace.meta.get("config") if isinstance(trace.meta, dict) else None
            seed = config.get("seed", 0) if isinstance(config, dict) else 0
            kw["seed"] = (seed if isinstance(seed, int) and not isinstance(seed, bool) else 0) + (
                seed_offset
            )
        if backend == "hf" and "model" not in kw:
            raise ConfigError("the hf backend needs a model: pass --model DIR (model= in Python)")
        built = make_backend(backend, **kw)
    if check:
        _check_can_answer(built, how(trace, built))
    return built


#: Backends that send the API key to a server over HTTP.
_HTTP = ("openai", "vllm")
#: Where a server may be named that the API key can be sent to.
_URL_ENV = ("ORCHESTRACE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
_KEY_ENV = ("ORCHESTRACE_OPENAI_API_KEY", "OPENAI_API_KEY")


def _trusted_url(backend: Any) -> bool | None:
    """Whether an ``openai`` backend's server is the one the environment names.

    ``None`` for other backends. A base URL read from a trace is not trusted with the API
    key: a trace could name any server. The key goes only to a server named by the caller
    (``--base-url``, ``base_url=``) or by ``ORCHESTRACE_OPENAI_BASE_URL``/``OPENAI_BASE_URL``.
    """
    if getattr(backend, "name", "") not in _HTTP or getattr(backend, "mode", "server") != "server":
        return None

    url = str(getattr(backend, "base_url", "")).rstrip("/")
    return any((os.environ.get(n) or "").rstrip("/") == url for n in _URL_ENV if os.environ.get(n))


def _key_withheld(backend: Any) -> bool:
    return (
        getattr(backend, "name", "") in _HTTP
        and getattr(backend, "api_key", None) is None
        and any(os.environ.get(n) for n in _KEY_ENV)
    )


def how(trace: Trace, backend: Any) -> str:
    """The subject of an error about ``backend`` answering a fork of ``trace``."""
    spec = backend_spec(backend)
    recorded = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
    was = recorded.get("options") if isinstance(recorded, dict) else None
    now = spec.get("options")
    if (
        isinstance(recorded, dict)
        and recorded.get("name") == spec.get("name")
        and isinstance(was, dict)
        and isinstance(now, dict)
        and all(now.get(k) == v for k, v in was.items() if v is not None)
    ):
        return f"trace {shown_trace(trace)!r} was recorded with backend {_describe(spec)}, which"
    return f"backend {_describe(spec)}"


def _check_can_answer(backend: Any, how: str) -> None:
    """A cheap check that ``backend`` can answer (server reachable, model loadable)."""
    name = getattr(backend, "name", "")
    server = getattr(backend, "mode", "server") == "server"
    if name in _HTTP and server and getattr(backend, "transport", None) is None:
        url = urlsplit(str(backend.base_url))
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
            host = url.hostname or ""
            with socket.create_connection((host, port), timeout=min(5.0, backend.timeout_s)):
                pass
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"{how} cannot be reached ({type(err).__name__}: {err}); start that server, pass "
                "--base-url URL to use another, or --backend sim to fork on the simulator "
                "(backend= in Python)"
            ) from None
    elif name == "hf":
        try:
            backend.load()
        except (ImportError, ConfigError) as err:
            raise ConfigError(
                f"{how} cannot be loaded ({err}); pass --model DIR (a local model directory), or "
                "--backend sim to fork on the simulator (backend= in Python)"
            ) from None


class OnVirtualTime:
    """A real backend for a run on virtual time: one call at a time, on its own event loop.

    Each call blocks the virtual clock until the backend answers, then takes its measured
    time on the virtual clock, so no timer (a patience, a budget) fires while it is in flight.
    The first call checks that the backend can answer (:func:`_check_can_answer`); a backend
    that cannot, or that fails other than with :class:`BackendError`, sets :attr:`failure`
    (raised once the run ends) and every call fails without reaching it.
    """

    def __init__(self, inner: Backend, how: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.virtual = True
        self.how = how
        self.failure: ConfigError | None = None
        self._checked = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def spec(self) -> dict[str, Any]:
        """The wrapped backend's spec."""
        return backend_spec(self.inner)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer on the real backend (blocking this loop), timed on the wall clock."""
        if self.failure is None and not self._checked:
            self._checked = True
            try:
                _check_can_answer(self.inner, self.how)
            except ConfigError as err:
                self.failure = err
        if self.failure is not None:
            raise BackendError(str(self.failure))
        t0 = time.perf_counter()
        try:
            fut = asyncio.run_coroutine_threadsafe(self.inner.complete(request), self._loop)
            resp = fut.result()
        except BackendError:
            raise
        except Exception as err:  # e.g. a model that fails to load on first use
            self.failure = ConfigError(
                f"{self.how} failed ({type(err).__name__}: {redact(str(err))[:300]}); pass "
                "--backend sim to fork on the simulator, or fix the backend (backend= in Python)"
            )
            raise BackendError(str(self.failure)) from None
        return dataclasses.replace(resp, latency=round(time.perf_counter() - t0, 9))

    async def aclose(self) -> None:
        """Close the wrapped backend and stop its loop."""
        try:
            asyncio.run_coroutine_threadsafe(self.inner.aclose(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def check_answered(original: Trace, new: Trace, backend: Any) -> None:
    """Refuse a fork whose real backend answered none of the calls that reached it."""
    changed = [e for e in new.events if e.type == "llm_call" and "answered_by" in (e.attrs or {})]
    if changed and all(e.error is not None for e in changed):
        key = (
            "; the API key is sent only to a server named by --base-url (base_url=) or "
            "ORCHESTRACE_OPENAI_BASE_URL, never to one read from a trace: pass --base-url URL "
            "if this server needs it"
            if _key_withheld(backend)
            else ""
        )
        raise ConfigError(
            f"backend {_describe(backend_spec(backend))} answered none of the {len(changed)} "
            f"changed call(s) of the fork of {shown_trace(original)!r} ({changed[0].error}){key}; "
            "check the server, pass --base-url URL to use another, or --backend sim to fork on "
            "the simulator (backend= in Python)"
        )
