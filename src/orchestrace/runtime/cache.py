"""The replay cache: every nondeterministic input of a run, by replay key.

A run's nondeterministic inputs are its LLM answers and tool outputs. Each call gets a
:class:`CallKey`: its kind (``llm`` or ``tool``), the agent, a hash of the call's inputs, and
how many times the agent made that exact call before (the occurrence). The key's ``id`` is the
string recorded in the trace (``attrs.key`` of the ``llm_call`` or ``tool_call`` event).

A :class:`ReplayCache` holds answers by key. The runtime consults it before the backend (or
the tool) and stores what it gets; :meth:`ReplayCache.from_trace` rebuilds it from a trace, so
a replay answers every call from the trace alone, and a fork answers the calls whose inputs did
not change. :meth:`ReplayCache.redraw` forgets recorded LLM answers a fork must draw again.

Example:
    >>> from orchestrace.runtime.backends.base import LLMRequest, LLMResponse
    >>> req = LLMRequest("worker1", "worker", "solve", [{"role": "user", "content": "2+2"}], {})
    >>> key = CallKey.llm(req, 0)
    >>> key.kind, key.agent, key.occurrence, len(key.id)
    ('llm', 'worker1', 0, 32)
    >>> cache = ReplayCache()
    >>> cache.put(key, LLMResponse("ANSWER: 4", answer=4))
    >>> cache.llm(key).answer, len(cache)
    (4, 1)
    >>> cache.redraw([key.id])
    >>> cache.llm(key) is None
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

import msgspec

from orchestrace.runtime.backends.base import LLMRequest, LLMResponse, request_key
from orchestrace.runtime.backends.hf import HFResponse
from orchestrace.trace.model import Trace
from orchestrace.trace.tokens import token_table

__all__ = ["CallKey", "CallKind", "ReplayCache", "ToolOutcome", "encode_args"]

#: The two kinds of recorded calls.
CallKind = Literal["llm", "tool"]

_ENC = msgspec.json.Encoder(order="deterministic")


class CallKey(NamedTuple):
    """The replay key of one call.

    Attributes:
        kind: ``llm`` or ``tool``.
        agent: The calling agent.
        inputs: Hash of the call's inputs (the request; the tool's name and arguments).
        occurrence: How many times the agent made this exact call before (0 the first time).
        id: The key recorded in the trace (``attrs.key``).
    """

    kind: CallKind
    agent: str
    inputs: str
    occurrence: int
    id: str

    @staticmethod
    def llm_inputs(request: LLMRequest, *, fingerprint: bytes | None = None) -> str:
        """Hash of an LLM request's inputs (what its occurrences are counted by).

        ``fingerprint``, when given, must be ``request.fingerprint()`` (saves encoding again).
        """
        fp = request.fingerprint() if fingerprint is None else fingerprint
        return hashlib.blake2b(fp, digest_size=8).hexdigest()

    @staticmethod
    def tool_inputs(name: str, args: Any, *, encoded_args: bytes | None = None) -> str:
        """Hash of a tool call's inputs: the tool's name and arguments.

        ``encoded_args``, when given, must be the canonical JSON of ``args`` (as
        :func:`encode_args` gives it); the hash is the same either way.

        Example:
            >>> args = {"b": 1, "a": [2]}
            >>> CallKey.tool_inputs("f", args) == CallKey.tool_inputs(
            ...     "f", args, encoded_args=encode_args(args))
            True
        """
        if encoded_args is None:
            data = _ENC.encode([name, args])
        else:  # the same bytes as encoding [name, args]: a JSON array of the two, no spaces
            data = b"".join((b"[", _ENC.encode(name), b",", encoded_args, b"]"))
        return hashlib.blake2b(data, digest_size=8).hexdigest()

    @classmethod
    def llm(
        cls,
        request: LLMRequest,
        occurrence: int,
        *,
        fingerprint: bytes | None = None,
        inputs: str | None = None,
    ) -> CallKey:
        """The key of an LLM call (its id is :func:`~.backends.base.request_key`).

        ``fingerprint`` (``request.fingerprint()``) and ``inputs`` (:meth:`llm_inputs`), when
        the caller has them already, are used instead of being computed again.
        """
        fp = request.fingerprint() if fingerprint is None else fingerprint
        return cls(
            "llm",
            request.agent,
            cls.llm_inputs(request, fingerprint=fp) if inputs is None else inputs,
            occurrence,
            request_key(request, occurrence, fingerprint=fp),
        )

    @classmethod
    def tool(
        cls, agent: str, name: str, args: Any, occurrence: int, *, inputs: str | None = None
    ) -> CallKey:
        """The key of a tool call of ``agent`` (``inputs``: :meth:`tool_inputs`, if known)."""
        if inputs is None:
            inputs = cls.tool_inputs(name, args)
        digest = hashlib.blake2b(f"{agent}:{inputs}:{occurrence}".encode(), digest_size=16)
        return cls("tool", agent, inputs, occurrence, digest.hexdigest())


def encode_args(args: Any) -> bytes:
    """The canonical JSON of a tool call's arguments (sorted keys, no spaces).

    Raises:
        TypeError: ``args`` holds a value of a type JSON cannot carry.
        msgspec.EncodeError: ``args`` cannot be encoded otherwise (e.g. a cycle).

    Example:
        >>> encode_args({"b": 1, "a": "x"})
        b'{"a":"x","b":1}'
    """
    return _ENC.encode(args)


class ToolOutcome(NamedTuple):
    """What a tool call gave: its value, or its error, and how long it took (seconds)."""

    value: Any
    error: str | None
    latency: float


class ReplayCache:
    """Recorded answers of LLM and tool calls, by :class:`CallKey` (see the module docstring).

    Entries are indexed by kind and recorded id, so keys rebuilt from a trace (which records
    the id alone) and keys made by a running agent find the same entries.
    """

    __slots__ = ("_entries", "_release")

    def __init__(self) -> None:
        self._entries: dict[tuple[CallKind, str], LLMResponse | ToolOutcome] = {}
        # recorded end time of each LLM answer of a run on wall-clock time, by recorded id
        self._release: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, CallKey) and (key.kind, key.id) in self._entries

    def __repr__(self) -> str:
        llm = sum(k == "llm" for k, _ in self._entries)
        return f"ReplayCache({llm} LLM answers, {len(self._entries) - llm} tool outputs)"

    def llm(self, key: CallKey) -> LLMResponse | None:
        """The recorded answer of an LLM call (``None`` when there is none)."""
        entry = self._entries.get(("llm", key.id))
        return entry if isinstance(entry, LLMResponse) else None

    def tool(self, key: CallKey) -> ToolOutcome | None:
        """The recorded outcome of a tool call (``None`` when there is none)."""
        entry = self._entries.get(("tool", key.id))
        return entry if isinstance(entry, ToolOutcome) else None

    def put(self, key: CallKey, entry: LLMResponse | ToolOutcome) -> None:
        """Store an answer (an :class:`LLMResponse` for ``llm`` keys, else a ToolOutcome)."""
        want = LLMResponse if key.kind == "llm" else ToolOutcome
        if not isinstance(entry, want):
            raise TypeError(f"a {key.kind} call's entry is a {want.__name__}")
        self._entries[(key.kind, key.id)] = entry

    def redraw(self, ids: Iterable[str]) -> None:
        """Forget the recorded answers of the LLM calls with these recorded ids."""
        for i in ids:
            self._entries.pop(("llm", i), None)
            self._release.pop(i, None)

    def delay(self, key: CallKey, latency: float, now: float) -> float:
        """How long a cached LLM answer takes, starting at ``now`` (virtual seconds).

        On a trace recorded on virtual time (the simulator) it is the recorded latency. On a
        trace recorded on wall-clock time (a served model answering concurrent calls) the
        answer is released at its recorded end time, so concurrent calls complete, and their
        events are numbered, in the recorded order (never before ``now``).
        """
        end = self._release.get(key.id)
        if end is None:
            return latency
        return max(0.0, end - now)

    def copy(self) -> ReplayCache:
        """A copy (entries are immutable, so forks of one trace can share them)."""
        new = ReplayCache()
        new._entries = dict(self._entries)
        new._release = dict(self._release)
        return new

    @classmethod
    def from_trace(cls, trace: Trace) -> ReplayCache:
        """Every recorded nondeterministic input of ``trace``, by replay key."""
        cache = cls()
        results: dict[str, str] = {}
        for edge in trace.edges:
            if edge.type == "tool_dependency":
                results[edge.src] = edge.dst
        by_id = (
            {e.id: e for e in trace.events}
            if any(e.type == "tool_call" for e in trace.events)
            else {}
        )
        entries = cache._entries
        tokens = token_table(trace)
        backend = trace.meta.get("backend") if isinstance(trace.meta, dict) else None
        wall_clock = isinstance(backend, dict) and backend.get("virtual") is False
        for e in trace.events:
            attrs = e.attrs or {}
            key = attrs.get("key")
            if not key or not isinstance(key, str):
                continue
            if e.type == "llm_call":
                entries[("llm", key)] = HFResponse(
                    text=e.content or "",
                    answer=attrs.get("answer"),
                    tokens_in=e.tokens_in,
                    tokens_out=e.tokens_out,
                    latency=e.dur,
                    cost=e.cost,
                    model=e.tool or "",
                    error=e.error,
                    confidence=attrs.get("confidence"),
                    token_record=tokens.get(e.id),  # token ids replay with their call
                )
                if wall_clock and e.error is None:
                    cache._release[key] = e.t + e.dur
            elif e.type == "tool_call":
                res = by_id.get(results.get(e.id, ""))
                if res is None:
                    continue
                value = None
                if res.error is None and res.content is not None:
                    try:
                        value = json.loads(res.content)
                    except ValueError:
                        value = res.content
                entries[("tool", key)] = ToolOutcome(value, res.error, e.dur)
        return cache
