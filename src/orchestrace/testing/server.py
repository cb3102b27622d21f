"""A local OpenAI-compatible chat server for tests and benchmarks, and a seeded model behind it.

:class:`ChatServer` serves ``POST /v1/chat/completions`` on 127.0.0.1 from a daemon thread and
counts the requests it answers, so a test can check server-side which calls reached it.
:class:`SeededArithmeticModel` is the default answerer: it reads the rendered prompt (never a
payload or a ground truth), computes the arithmetic it asks for, and errs at a set rate, with
the randomness a sampling server has: at temperature 0 the same prompt always gets the same
answer; above 0 with a ``seed`` the answer is a fixed function of (prompt, seed), as servers
that honour ``seed`` do; above 0 without a seed every call draws afresh.

Example:
    >>> from orchestrace.runtime import run
    >>> with ChatServer() as srv:
    ...     res = run("debate", "arith", agents=3, seed=1, task_size=4, rounds=1,
    ...               backend="openai", backend_options={"base_url": srv.url, "retries": 0})
    ...     n_llm = sum(e.type == "llm_call" for e in res.trace.events)
    ...     srv.calls == n_llm > 0
    True
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "SeededArithmeticModel"]

_FORMULA = re.compile(r"\((\d+)\*x \+ (\d+)\) mod (\d+)")
_NUMBERS = re.compile(r"\[([-\d,\s]*)\]")
_REVISE = re.compile(r"Your answer: (.*?)\. Other agents answered: (.*?)\.\n")
_CANDIDATE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_PROPOSED = re.compile(r"Proposed answer: (.*)$", re.MULTILINE)
_PARTS = re.compile(r"Partial answers: (.*)$", re.MULTILINE)


def _int(text: str) -> int | None:
    try:
        value = json.loads(text.strip())
    except ValueError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class SeededArithmeticModel:
    """A chat model that does the arithmetic its prompt asks for, and errs at a set rate.

    It answers the harness's prompts for ``arith`` tasks: ``solve`` (the sum of
    ``(a*x + b) mod p`` over the listed numbers), ``revise`` (sides with the most common answer
    among its own and its peers', or solves again), ``judge`` (picks the candidate it computes
    itself, else the most common one), ``critique``, ``plan`` and ``aggregate``. Wrong answers
    are the truth off by a small offset, so two wrong agents can agree. Any other prompt gets
    a pseudo-random integer.

    Args:
        error: Chance that one solve is wrong.
        resolve: Chance that a revise solves again instead of siding with the most common answer.
        judge_error: Chance that a judge picks a candidate at random.
        seed: Seed of the draws of calls at a temperature above 0 without a ``seed``.

    Example:
        >>> m = SeededArithmeticModel(error=0.0)
        >>> body = {"messages": [{"role": "user", "content":
        ...         "Compute the sum of (2*x + 1) mod 7 for x in [1, 2]."}], "temperature": 0}
        >>> m(body)
        'Each term reduced and added. ANSWER: 8'
    """

    error: float = 0.3
    resolve: float = 0.25
    judge_error: float = 0.15
    seed: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._rng.seed(self.seed)

    def _draws(self, body: dict[str, Any]) -> random.Random:
        """The randomness of one call (see the module docstring)."""
        temperature = body.get("temperature") or 0
        seed = body.get("seed")
        fresh: int | None = None
        if temperature and seed is None:
            with self._lock:
                fresh = self._rng.getrandbits(64)
        key = json.dumps(
            [body.get("model"), body.get("messages"), temperature, seed, fresh],
            sort_keys=True,
            default=str,
        )
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))

    def _solve(self, prompt: str, rng: random.Random) -> int | None:
        formula, numbers = _FORMULA.search(prompt), _NUMBERS.search(prompt)
        if formula is None or numbers is None:
            return None
        a, b, p = (int(g) for g in formula.groups())
        xs = [int(x) for x in numbers.group(1).replace(",", " ").split()]
        truth = sum((a * x + b) % p for x in xs) if p else 0
        if rng.random() < self.error:
            return truth + rng.choice((-1, 1)) * rng.choice((1, 2, 3)) * rng.choice((1, 2))
        return truth

    def answer(self, prompt: str, rng: random.Random) -> tuple[str, Any]:
        """The reasoning line and the answer to one user prompt."""
        if "How many parallel workers" in prompt:
            return "Two parts balance the work.", 2
        revise = _REVISE.search(prompt)
        if revise is not None:
            own = _int(revise.group(1))
            votes = [own, *(_int(x) for x in revise.group(2).split(";"))]
            counts: dict[int, int] = {}
            for v in votes:
                if v is not None:
                    counts[v] = counts.get(v, 0) + 1
            if not counts or rng.random() < self.resolve:
                return "Solved it again.", self._solve(prompt, rng)
            top = max(counts.values())
            tied = sorted(v for v, c in counts.items() if c == top)
            return "Went with the most common answer.", own if own in tied else rng.choice(tied)
        candidates = [(int(i), _int(v)) for i, v in _CANDIDATE.findall(prompt)]
        if candidates:
            if rng.random() < self.judge_error:
                return "Picked one.", rng.choice(candidates)[0]
            mine = self._solve(prompt, rng)
            for i, v in candidates:
                if v is not None and v == mine:
                    return "It matches my own result.", i
            counts = {}
            for _, v in candidates:
                if v is not None:
                    counts[v] = counts.get(v, 0) + 1
            best = max(counts, key=lambda v: counts[v]) if counts else None
            return "The most common candidate.", next(
                (i for i, v in candidates if v == best), candidates[0][0]
            )
        proposed = _PROPOSED.search(prompt)
        if proposed is not None:
            ok = _int(proposed.group(1)) == self._solve(prompt, rng)
            return "Checked it.", "accept" if ok else "reject"
        parts = _PARTS.search(prompt)
        if parts is not None:
            values = [_int(x) for x in parts.group(1).split(";")]
            return "Added the parts.", sum(v for v in values if v is not None)
        solved = self._solve(prompt, rng)
        if solved is not None:
            return "Each term reduced and added.", solved
        return "A guess.", rng.randrange(10)

    def __call__(self, body: dict[str, Any]) -> str:
        """The completion text for one ``/chat/completions`` request body."""
        messages = body.get("messages") or []
        prompt = ""
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "user":
                prompt = str(m.get("content", ""))
        why, value = self.answer(prompt, self._draws(body))
        return f"{why} ANSWER: {json.dumps(value)}"


class ChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, in a daemon thread.

    Args:
        respond: ``f(request body) -> completion text`` (default: a
            :class:`SeededArithmeticModel`).
        model: The model name it reports.

    Attributes:
        url: The base URL to pass as ``base_url`` (ends in ``/v1``).
        requests: The request bodies answered, in order (their count is :attr:`calls`).

    Example:
        >>> import httpx
        >>> with ChatServer(lambda body: "ANSWER: 4") as srv:
        ...     r = httpx.post(srv.url + "/chat/completions",
        ...                    json={"messages": [{"role": "user", "content": "2+2?"}]})
        ...     r.json()["choices"][0]["message"]["content"], srv.calls
        ('ANSWER: 4', 1)
    """

    def __init__(
        self, respond: Callable[[dict[str, Any]], str] | None = None, *, model: str = "local"
    ) -> None:
        self.respond = respond or SeededArithmeticModel()
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30  # a stuck client cannot hold a server thread for long

            def log_message(self, *args: Any) -> None:
                pass

            def handle(self) -> None:
                # a client that goes away mid-request (a run that ends with calls in flight)
                # is expected; anything else still reaches the server's error report
                try:
                    super().handle()
                except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
                    self.close_connection = True

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length))
                    if not isinstance(body, dict):
                        raise ValueError("the body is not a JSON object")
                except ValueError as err:
                    self._send(400, {"error": f"bad request: {err}"})
                    return
                with outer._lock:
                    outer.requests.append(body)
                text = outer.respond(body)
                chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
                self._send(
                    200,
                    {
                        "id": f"cmpl-{len(outer.requests)}",
                        "object": "chat.completion",
                        "model": outer.model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": max(1, chars // 4),
                            "completion_tokens": max(1, len(text) // 4),
                        },
                    },
                )

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        """Requests answered so far."""
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
