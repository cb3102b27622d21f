"""LangGraph values: JSON for LangChain/LangGraph objects, recognising the accepted shapes, run records.

:func:`to_json` writes messages, ``Send``, ``Command`` and ``Interrupt`` as JSON; :func:`sniff`
and the ``_is_*`` tests recognise run trees, stream chunks, stream events and state snapshots;
:func:`run_record` normalises a LangChain run into the record :class:`RunMapper` reads, and the
small readers below take tokens, models, ``Send`` fan-out and ``Command`` gotos out of a run.

Example:
    >>> rec = run_record({"id": 1, "run_type": "llm", "name": "m", "start_time": 0})
    >>> rec["id"], rec["started_at"], sniff([{"id": 1, "run_type": "llm", "name": "m"}])
    ('1', 0, True)
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import datetime as _dt
import math
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from orchestrace.io._foreign import count as _int
from orchestrace.io._foreign import text as _text

#: ``Trace.system`` of imported and live-captured traces.
SYSTEM = "langgraph"


_MODES = frozenset(
    {"values", "updates", "debug", "tasks", "checkpoints", "messages", "custom", "events"}
)


_LLM = ("llm", "chat_model")


_TOOLS = ("tool", "retriever")


_INTERRUPT = ("GraphInterrupt", "NodeInterrupt", "Interrupt(")


# ---------------------------------------------------------------------- JSON of LangGraph objects
def to_json(obj: Any, _depth: int = 0) -> Any:
    """A JSON-compatible copy of ``obj`` (LangChain/LangGraph objects included).

    LangChain serialisable objects (messages) are written as ``langchain_core.load.dumpd``
    writes them; ``Send``, ``Command`` and ``Interrupt`` as constructor records
    ``{"lc": 2, "type": "constructor", "id": ["langgraph", "types", NAME], "kwargs": {...}}``;
    pydantic models, dataclasses and named tuples as objects; anything else as its ``repr``.

    Example:
        >>> to_json({"a": (1, 2), "b": {3}})
        {'a': [1, 2], 'b': [3]}
    """
    if _depth > 64:
        return repr(obj)
    d = _depth + 1
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_json(v, d) for k, v in obj.items()}
    cls = type(obj)
    mod = getattr(cls, "__module__", "") or ""
    name = cls.__name__
    if mod.startswith("langgraph") and name in ("Send", "Command", "Interrupt"):
        fields = {
            "Send": ("node", "arg"),
            "Command": ("graph", "update", "resume", "goto"),
            "Interrupt": ("value", "id"),
        }[name]
        kwargs = {f: to_json(getattr(obj, f, None), d) for f in fields}
        return {
            "lc": 2,
            "type": "constructor",
            "id": ["langgraph", "types", name],
            "kwargs": kwargs,
        }
    if hasattr(obj, "_asdict") and isinstance(obj, tuple):
        fields_of: dict[str, Any] = getattr(obj, "_asdict")()  # noqa: B009 - a named tuple
        return {str(k): to_json(v, d) for k, v in fields_of.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_json(v, d) for v in obj]
    if mod.startswith("langchain") and hasattr(obj, "to_json"):
        try:
            from langchain_core.load import dumpd  # noqa: PLC0415  optional extra [langgraph]

            return to_json(dumpd(obj), d)
        except Exception:
            pass
    if isinstance(obj, BaseException):
        return f"{name}({obj})"
    if isinstance(obj, _dt.datetime | _dt.date):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return to_json(dump(), d)
        except Exception:
            pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name, None), d) for f in dataclasses.fields(obj)}
    return repr(obj)


def _lg_type(value: object) -> str | None:
    """``Send`` / ``Command`` / ``Interrupt`` / a message class name of a serialised object."""
    if isinstance(value, dict) and value.get("type") == "constructor":
        ident = value.get("id")
        if isinstance(ident, list) and ident and isinstance(ident[-1], str):
            return ident[-1]
    return None


def _kwargs(value: object) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
        kw: dict[str, Any] = value["kwargs"]
        return kw
    return {}


def _walk(value: object, depth: int = 0) -> Iterator[object]:
    if depth > 32:
        return
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, depth + 1)


# ---------------------------------------------------------------------- recognising the input
def _is_run(v: object) -> bool:
    return isinstance(v, dict) and isinstance(v.get("run_type"), str) and "id" in v


def _is_chunk(v: object) -> bool:
    if isinstance(v, dict):
        if isinstance(v.get("mode"), str) and v["mode"] in _MODES and "data" in v:
            return True
        return (
            v.get("type") in ("task", "task_result", "checkpoint")
            and "payload" in v
            and "step" in v
        )
    if isinstance(v, list) and len(v) in (2, 3):
        mode = v[-2]
        return isinstance(mode, str) and mode in _MODES
    return False


def _is_stream_event(v: object) -> bool:
    return (
        isinstance(v, dict)
        and isinstance(v.get("event"), str)
        and v["event"].startswith("on_")
        and "run_id" in v
    )


def _is_snapshot(v: object) -> bool:
    return (
        isinstance(v, dict)
        and "values" in v
        and "next" in v
        and ("config" in v or "checkpoint" in v)
    )


def _kind(v: object) -> str | None:
    for name, test in (
        ("runs", _is_run),
        ("chunks", _is_chunk),
        ("events", _is_stream_event),
        ("history", _is_snapshot),
    ):
        if test(v):
            return name
    return None


def _first(value: object) -> object:
    if _kind(value) is not None:
        return value
    if isinstance(value, list) and value:
        return value[0]
    if isinstance(value, dict):
        for key in ("runs", "history", "chunks", "events", "states"):
            inner = value.get(key)
            if isinstance(inner, list) and inner:
                return inner[0]
    return value


def sniff(value: object) -> bool:
    """Whether ``value`` (a file's first JSON value) is a LangGraph run, chunk, event or snapshot.

    Example:
        >>> sniff(["updates", {"node": {"x": 1}}])
        True
        >>> sniff({"object": "trace.span"})
        False
    """
    try:
        return _kind(_first(value)) is not None
    except Exception:
        return False


# ---------------------------------------------------------------------- run records
def run_record(run: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a LangChain run (``Run.dict()``, or a run built from a stream) that are used.

    Example:
        >>> run_record({"id": 1, "run_type": "chain", "name": "n",
        ...             "extra": {"metadata": {"langgraph_step": 2}}})["metadata"]
        {'langgraph_step': 2}
    """
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    assert isinstance(extra, dict)
    meta = run.get("metadata")
    if not isinstance(meta, dict):
        meta = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    tags = run.get("tags") if isinstance(run.get("tags"), list) else []
    parent = run.get("parent_run_id")
    return {
        "id": str(run.get("id")),
        "parent_id": str(parent) if parent is not None else None,
        "name": str(run.get("name") or run.get("run_type")),
        "run_type": str(run.get("run_type")),
        "started_at": run.get("start_time"),
        "ended_at": run.get("end_time"),
        "inputs": run.get("inputs"),
        "outputs": run.get("outputs"),
        "error": run.get("error"),
        "metadata": meta,
        "tags": tags,
        "invocation": extra.get("invocation_params")
        if isinstance(extra.get("invocation_params"), dict)
        else {},
    }


def _flatten(run: object, parent: str | None, out: list[tuple[str, object]], where: str) -> None:
    if not isinstance(run, dict):
        out.append((where, run))
        return
    children = run.get("child_runs")
    flat = {k: v for k, v in run.items() if k != "child_runs"}
    if flat.get("parent_run_id") is None and parent is not None:
        flat["parent_run_id"] = parent
    out.append((where, flat))
    if isinstance(children, list):
        for i, c in enumerate(children):
            _flatten(c, str(run.get("id")), out, f"{where}.child_runs[{i}]")


def _step(meta: Mapping[str, Any]) -> int | None:
    s = meta.get("langgraph_step")
    return _int(s) if isinstance(s, int) and not isinstance(s, bool) and s >= 0 else None


def _is_node(rec: Mapping[str, Any]) -> bool:
    meta = rec["metadata"]
    if rec["run_type"] != "chain" or meta.get("langgraph_node") != rec["name"]:
        return False
    step = meta.get("langgraph_step")
    return any(t == f"graph:step:{step}" for t in rec["tags"]) or "graph:step" not in str(
        rec["tags"]
    )


def _tokens(outputs: object) -> tuple[int, int]:
    """Prompt and completion tokens of an LLM run's outputs."""
    if not isinstance(outputs, dict):
        return 0, 0
    llm_output = outputs.get("llm_output")
    if isinstance(llm_output, dict):
        for key in ("token_usage", "usage"):
            u = llm_output.get(key)
            if isinstance(u, dict) and u:
                return (
                    _int(u.get("prompt_tokens", u.get("input_tokens"))),
                    _int(u.get("completion_tokens", u.get("output_tokens"))),
                )
    tin = tout = 0
    for v in _walk(outputs.get("generations", outputs)):
        if isinstance(v, dict) and isinstance(v.get("usage_metadata"), dict):
            u = v["usage_metadata"]
            tin += _int(u.get("input_tokens"))
            tout += _int(u.get("output_tokens"))
    return tin, tout


def _llm_text(outputs: object) -> str | None:
    if not isinstance(outputs, dict):
        return _text(outputs)
    gens = outputs.get("generations")
    texts: list[str] = []
    if isinstance(gens, list):
        for g in _walk(gens):
            if isinstance(g, dict) and isinstance(g.get("text"), str) and g["text"]:
                texts.append(g["text"])
    return "\n".join(texts) if texts else None


def _model(rec: Mapping[str, Any]) -> str:
    meta, inv = rec["metadata"], rec["invocation"]
    for v in (
        meta.get("ls_model_name"),
        inv.get("model"),
        inv.get("model_name"),
        inv.get("_type"),
    ):
        if isinstance(v, str) and v:
            return v
    return str(rec["name"])


def _tool_call_ids(value: object) -> list[str]:
    """Ids of the tool calls an AI message in ``value`` asks for."""
    ids: list[str] = []
    for v in _walk(value):
        if isinstance(v, dict) and isinstance(v.get("tool_calls"), list):
            for tc in v["tool_calls"]:
                if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                    ids.append(tc["id"])
    return ids


def _result_tool_call_id(outputs: object, inputs: object) -> str | None:
    for v in (*_walk(outputs), *_walk(inputs)):
        if isinstance(v, dict) and isinstance(v.get("tool_call_id"), str):
            return str(v["tool_call_id"])
    return None


_SEND_REPR = re.compile(r"\ASend\(node='([^']+)', arg=(.*)\)\Z", re.DOTALL)


_COMMAND_KEYS = frozenset({"graph", "update", "resume", "goto"})


def _as_send(v: object) -> tuple[str, Any] | None:
    """``(node, arg)`` of a serialised ``Send``.

    A constructor record, or the ``repr`` string LangSmith's serialiser writes (its argument
    is read as a Python literal, never run).
    """
    if _lg_type(v) == "Send":
        kw = _kwargs(v)
        return (kw["node"], kw.get("arg")) if isinstance(kw.get("node"), str) else None
    if isinstance(v, str) and v.startswith("Send("):
        m = _SEND_REPR.match(v)
        if m is None:
            return None
        try:
            arg: Any = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            arg = m.group(2)
        return m.group(1), arg
    return None


def _sends(value: object) -> list[tuple[str, Any]]:
    """The ``Send(node, arg)`` packets in a run's output (also inside ``Command.goto``)."""
    return [s for v in _walk(value) if (s := _as_send(v)) is not None]


def _gotos(value: object) -> tuple[list[str], Any]:
    """Node names a ``Command`` in a run's output goes to, and its state update.

    A ``Command`` is a constructor record, or the plain object (``graph``, ``update``,
    ``resume``, ``goto``) LangSmith's serialiser writes.
    """
    for v in _walk(value):
        if _lg_type(v) == "Command":
            kw = _kwargs(v)
        elif isinstance(v, dict) and set(v) == _COMMAND_KEYS:
            kw = v
        else:
            continue
        goto = kw.get("goto")
        names = [goto] if isinstance(goto, str) else goto if isinstance(goto, list) else []
        return [g for g in names if isinstance(g, str) and g], kw.get("update")
    return [], None


def _instance(base: str, k: int) -> str:
    return base if k == 1 else f"{base}#{k}"
