"""``--backend``, ``--model`` and ``--base-url`` for commands that re-execute recorded runs.

Also the check of ``--timeout``, the request setting ``run`` and ``bench`` give a server.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from orchestrace.errors import ConfigError
from orchestrace.runtime.backends import BACKENDS


def add_backend_flags(p: argparse.ArgumentParser, what: str) -> None:
    """Register the flags that choose who answers the changed calls of ``what``."""
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        help=f"who answers the changed calls of {what} (default: the backend the trace "
        "records, rebuilt from its meta.backend)",
    )
    p.add_argument(
        "--model",
        help="openai: model name; hf: model directory or hub id (replaces the recorded one)",
    )
    p.add_argument(
        "--base-url",
        help="openai: server URL ending in /v1 (replaces the recorded one; the API key comes "
        "from ORCHESTRACE_OPENAI_API_KEY)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="openai: sampling temperature of the changed calls (replaces the recorded one; "
        "above 0 so that resampling a message draws a new one)",
    )


def given(args: argparse.Namespace) -> bool:
    """Whether any of the backend flags was given."""
    return any(
        getattr(args, k, None) is not None for k in ("backend", "model", "base_url", "temperature")
    )


def backend_args(args: argparse.Namespace) -> dict[str, Any]:
    """``backend`` and ``backend_options`` for :func:`orchestrace.runtime.replay.fork`.

    Raises:
        ConfigError: ``--model`` or ``--base-url`` with ``--backend sim``.
    """
    options = {
        k: v for k, v in (("model", args.model), ("base_url", args.base_url)) if v is not None
    }
    temperature = getattr(args, "temperature", None)
    if temperature is not None:
        if not 0.0 <= temperature <= 2.0:
            raise ConfigError(f"--temperature must be from 0 to 2, got {temperature}")
        if args.backend in ("sim", "hf"):
            raise ConfigError(
                f"--temperature does not apply to --backend {args.backend}; leave it out"
            )
        options["temperature"] = temperature
    if args.backend == "sim" and options:
        flag = "--model" if "model" in options else "--base-url"
        raise ConfigError(f"{flag} does not apply to --backend sim; leave it out")
    if args.backend == "hf" and "base_url" in options:
        raise ConfigError("--base-url does not apply to --backend hf; leave it out")
    return {"backend": args.backend, "backend_options": options}


def check_timeout(seconds: float) -> float:
    """``--timeout``: seconds per request attempt, a finite number above 0.

    Raises:
        ConfigError: Any other value (the message names the flag).
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"--timeout must be a number of seconds > 0, got {seconds}")
    return seconds
