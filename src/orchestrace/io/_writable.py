"""What a writer accepts: traces whose values the file can hold exactly.

JSON has no NaN or infinity (an encoder writes ``null``, and the value is lost), and a field of
the wrong type or a negative duration makes a file no reader accepts. Every writer of
:mod:`orchestrace.io` refuses such a trace before it creates anything, naming each value and
its fix. A decoded trace (a loader checked every field) needs only its header checked; a trace
built in Python is checked in full once (the result is kept on the trace, which is immutable).

Orchestrace's own rules on the events' meaning (cycles, edges to missing events, spawns) are
not checked here: a file holding such a trace reads back exactly, and ``validate`` names them.

Example:
    >>> from orchestrace import TraceBuilder
    >>> b = TraceBuilder(task_id="t")
    >>> _ = b.llm("a", dur=1.0)
    >>> try:
    ...     require_writable([b.build().replace(rewards={"score": float("nan")})])
    ... except Exception as err:
    ...     print(type(err).__name__, "nothing was written" in str(err))
    TraceValidationError True
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import partial
from itertools import compress, count
from operator import attrgetter, is_not
from typing import Any

import msgspec
import numpy as np

from orchestrace._safe import strict_json
from orchestrace.errors import ConfigError, Problem, TraceValidationError, _short
from orchestrace.trace.model import Edge, Event, Trace

__all__ = ["check_record", "json_finite", "readable", "require_writable"]


def require_writable(items: Sequence[Any], first: int = 0) -> None:
    """Refuse anything but traces, and traces whose values a file cannot hold.

    Args:
        items: The traces.
        first: The position of ``items[0]`` among what the caller was given (in messages).

    Raises:
        ConfigError: An item is not a :class:`~orchestrace.trace.model.Trace`.
        TraceValidationError: A trace holds a value of the wrong type, or a number that is
            negative or not finite (the problems name each one; nothing was written).
    """
    for i, item in enumerate(items):
        if not isinstance(item, Trace):
            raise ConfigError(
                f"the writers take Trace objects; item {first + i} is a {type(item).__name__}: "
                "build traces with TraceBuilder, or read them with orchestrace.io.load"
            )
    several = first > 0 or len(items) > 1
    for i, trace in enumerate(items):
        tid = trace.trace_id if isinstance(trace.trace_id, str) else "?"
        _check(trace, f"#{first + i} ({_short(repr(tid), 60)})" if several else None)


def _check(trace: Trace, label: str | None = None) -> None:
    """Check ``trace`` (``label`` names it among several in the message)."""
    if trace._writable:
        return
    from orchestrace.trace.check import (  # noqa: PLC0415  io loads before the checks
        check_fields,
        check_header,
        check_nonempty,
        check_numbers,
        check_totals,
    )

    errors = (
        _errors(check_header, trace)
        or _errors(check_totals, trace, _VALUE_CODES)
        or _errors(check_nonempty, trace)  # (no reader takes a trace without events back)
    )
    if not errors and not trace.decoded:  # (a loader checked every event value already)
        errors = (
            _errors(check_fields, trace)
            # the numbers in C passes first; the slower check says which
            or (_errors(check_numbers, trace) if not _numbers_fine(trace) else [])
            or _nested(trace)
            or _unencodable(trace)
        )
    if errors:
        raise _not_written(TraceValidationError(errors, source=label))
    trace._mark_writable()


def _errors(check: Any, trace: Trace, codes: frozenset[str] | None = None) -> list[Problem]:
    """The errors ``check`` finds (only those of ``codes``, when given)."""
    return [
        p
        for p in check(trace, partial=True)
        if p.severity == "error" and (codes is None or p.code in codes)
    ]


def _nested(trace: Trace) -> list[Problem]:
    """NaN or infinity, then a value JSON has no form for, inside ``meta`` or ``attrs``."""
    with_attrs = _with_attrs(trace)
    return _nested_non_finite(trace, with_attrs) or _nested_not_json(trace, with_attrs)


def _nested_non_finite(trace: Trace, with_attrs: list[tuple[int, Event]]) -> list[Problem]:
    """NaN or infinity inside ``meta`` or an event's ``attrs`` (JSON would write ``null``)."""
    found = non_finite_paths(trace.meta)
    if found:
        return [_nested_problem(f"$.meta.{found[0]}", None)]
    if not non_finite_paths([e.attrs for _, e in with_attrs]):  # one C-level pass over all
        return []
    for i, e in with_attrs:
        found = non_finite_paths(e.attrs)
        if found:
            return [_nested_problem(f"$.events[{i}].attrs.{found[0]}", e.id)]
    return []


def _with_attrs(trace: Trace) -> list[tuple[int, Event]]:
    """The events that hold ``attrs``, with their positions (found in C-level passes)."""
    events = trace.events
    at = list(compress(count(), map(_is_not_none, map(_get_attrs, events))))
    return [(i, events[i]) for i in at]


_get_attrs = attrgetter("attrs")
_is_not_none = partial(is_not, None)
_ENCODER = msgspec.json.Encoder()


_SLICE = 1 << 16


def _unencodable(trace: Trace) -> list[Problem]:
    """The first value the writers' encoder refuses, anywhere in the trace, named by path.

    One C-level encoding pass over the header and the records (a slice at a time into one
    buffer); only when it fails are the records read one by one to say where. It finds what
    the type checks cannot see: a lone surrogate in a string, nesting too deep or a cycle, an
    object JSON has no form for inside ``meta`` or ``attrs``.
    """
    buf = bytearray()
    header = {k: getattr(trace, k) for k in _HEADER}
    if not _encodes_into(header, buf):
        return [_where(v, f"$.{k}", None) for k, v in header.items() if not encodable(v)][:1]
    for name, records in (("events", trace.events), ("edges", trace.edges)):
        for lo in range(0, len(records), _SLICE):
            part = records[lo : lo + _SLICE]
            if _encodes_into(part, buf):
                continue
            for i, rec in enumerate(part, start=lo):
                if not encodable(rec):
                    for f in msgspec.structs.fields(rec):
                        value = getattr(rec, f.name)
                        if not encodable(value):
                            path = f"$.{name}[{i}].{f.encode_name}"
                            return [_where(value, path, getattr(rec, "id", None))]
    return []


_HEADER = (
    *("trace_id", "task_id", "system", "topology", "schema_version"),
    *("meta", "rewards", "costs", "metrics"),
)


def _encodes_into(value: Any, buf: bytearray) -> bool:
    try:
        _ENCODER.encode_into(value, buf)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _where(value: Any, path: str, event_id: Any) -> Problem:
    """The problem of ``value`` at ``path``, which the encoder refuses (inside it, maybe)."""
    inner, bad = _locate(value)
    if isinstance(bad, _Key):
        return _value_problem(*_key_problem(bad), path + inner, event_id)
    if type(bad) is str:  # (a plain string the encoder refuses: a lone surrogate)
        what = "a string with a lone surrogate, which UTF-8 (and so no file) cannot hold"
        fix = "replace it (text.encode('utf-8', 'replace').decode() keeps the rest)"
    elif isinstance(bad, dict | list | tuple):
        what = "nesting too deep for JSON, or a reference cycle"
        fix = "flatten it, or keep it elsewhere and record a reference to it"
    else:
        kind = type(bad)
        what = f"a {kind.__module__}.{kind.__qualname__}, which JSON cannot write"
        fix = "convert it to a plain Python value (float(x), int(x), str(x)) or a list or dict"
    return _value_problem(f"holds {what}", fix, path + inner, event_id)


def encodable(value: Any) -> bool:
    """Whether the writers' JSON encoder takes ``value`` (plain JSON values only).

    Example:
        >>> import numpy as np
        >>> encodable({"a": [1.0, "x"]}), encodable({"a": np.float64(1.0)})
        (True, False)
    """
    try:
        _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _locate(
    value: Any,
    ok: Callable[[Any], bool] = encodable,
    depth: int = 0,
    seen: frozenset[int] = frozenset(),
) -> tuple[str, Any]:
    """``(path, value there)`` of the first value inside ``value`` that is not ``ok``.

    Goes down at most 64 levels, and not into a container it came through (a cycle).
    """
    if depth < 64 and id(value) not in seen:
        seen = seen | {id(value)}
        if isinstance(value, dict):
            for k, v in value.items():
                if type(k) is not str and not (ok is encodable and encodable({k: None})):
                    return "", _Key(k)  # the key itself
                if not ok(v):
                    inner, bad = _locate(v, ok, depth + 1, seen)
                    return f".{k}{inner}", bad
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                if not ok(v):
                    inner, bad = _locate(v, ok, depth + 1, seen)
                    return f"[{i}]{inner}", bad
    return "", value


class _Key:
    """A dict key :func:`_locate` found at fault (not a value)."""

    def __init__(self, key: Any) -> None:
        self.key = key


def _value_problem(what: str, fix: str, path: str, event_id: Any) -> Problem:
    """A wrong-type problem of a value at ``path`` (in the event ``event_id``, when a string)."""
    return Problem(
        "wrong-type",
        what,
        fix,
        path=path,
        event_id=event_id if isinstance(event_id, str) else None,
    )


def _key_problem(bad: _Key) -> tuple[str, str]:
    kind = type(bad.key)
    return (
        f"has the key {_short(repr(bad.key), 40)}, a {kind.__module__}.{kind.__qualname__}:"
        " JSON's keys are strings (it would read back changed, or not be written)",
        "use string keys (str(key))",
    )


def _nested_not_json(trace: Trace, with_attrs: list[tuple[int, Event]]) -> list[Problem]:
    """A value inside ``meta`` or an event's ``attrs`` that JSON has no form for.

    ``bytes``, dates and times, ``Decimal``, sets, UUIDs, objects: the encoder would write
    each as a string or a list, and it would read back changed.
    """
    if not plain_json(trace.meta):
        return [_not_json_problem(trace.meta, "$.meta", None)]
    if plain_json([e.attrs for _, e in with_attrs]):  # one C-level pass over all
        return []
    for i, e in with_attrs:
        if not plain_json(e.attrs):
            return [_not_json_problem(e.attrs, f"$.events[{i}].attrs", e.id)]
    return []


class _NotPlain(Exception):
    pass


def _refuse(_value: Any) -> Any:
    raise _NotPlain


def plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own values only, so that it reads back as written.

    Dicts, lists (tuples too), strings, numbers, booleans and None.

    Example:
        >>> import datetime
        >>> plain_json({"a": [1, "x", None]}), plain_json({"a": datetime.date(2020, 1, 1)})
        (True, False)
    """
    try:
        json.dumps(value, default=_refuse)
    except _NotPlain:
        return False
    except TypeError:  # a key of a kind JSON has none for
        return False
    except (ValueError, RecursionError):  # a cycle or deep nesting: the encoder's check says
        return True
    return _string_keys(value)


def _string_keys(value: Any) -> bool:
    """Every dict key inside ``value`` is a plain ``str`` (JSON would write 1 as ``"1"``).

    Runs only on what ``json.dumps`` wrote: no cycles, and no deeper than it goes.
    """
    if isinstance(value, dict):
        return all(type(k) is str for k in value) and all(map(_string_keys, value.values()))
    if isinstance(value, list | tuple):
        return all(map(_string_keys, value))
    return True


def _not_json_problem(value: Any, path: str, event_id: Any) -> Problem:
    inner, bad = _locate(value, plain_json)
    if isinstance(bad, _Key):
        return _value_problem(*_key_problem(bad), path + inner, event_id)
    kind = type(bad)
    return _value_problem(
        f"holds a {kind.__module__}.{kind.__qualname__}, which JSON has no form for (it "
        "would be written as a string or a list and read back changed)",
        "convert it to a JSON value (float(x) or int(x) for a numpy number, str(x) for a date "
        "or a Decimal, a list for a set)",
        path + inner,
        event_id,
    )


def _nested_problem(path: str, event_id: Any) -> Problem:
    return Problem(
        "non-finite",
        "holds NaN or infinity, which JSON cannot hold (it would be written as null)",
        "record a finite number there, or None or a string for a missing or infinite value",
        path=path,
        event_id=event_id if isinstance(event_id, str) else None,
    )


def non_finite_paths(value: Any) -> list[str]:
    """Where ``value`` holds NaN or infinity, at any depth (``_safe.strict_json``'s paths).

    Values JSON has no form for are skipped here (the encoder that writes them decides).

    Example:
        >>> non_finite_paths({"a": [1.0, {"b": 2}]}), non_finite_paths({"a": [float("nan")]})
        ([], ['a[0]'])
    """
    try:
        found = strict_json(value, default=_skip)[1]
    except (ValueError, TypeError, RecursionError):  # (a circular or odd value: not ours)
        return []
    return [f.split(" = ")[0] for f in found]


def json_finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity at any depth (see :func:`non_finite_paths`).

    Example:
        >>> json_finite({"a": [1.0, {"b": 2}]}), json_finite({"a": [float("nan")]})
        (True, False)
    """
    return not non_finite_paths(value)


def _skip(_value: Any) -> None:
    return None


def _numbers_fine(trace: Trace) -> bool:
    """Every time, duration and cost finite and >= 0, every token count >= 0 (C passes).

    Runs after ``check_fields``, so every such field holds a number of its type.
    """
    events = trace.events
    n = len(events)
    for name in ("t", "dur", "cost"):
        col = np.fromiter(map(attrgetter(name), events), dtype=np.float64, count=n)
        if not (np.isfinite(col).all() and (col >= 0).all()):
            return False
    for name in ("tokens_in", "tokens_out"):
        if min(map(attrgetter(name), events), default=0) < 0:
            return False
    return True


#: What ``check_totals`` says of a value a file cannot hold (a negative cost is a rule of the
#: trace's meaning: imported traces may hold one, and every format writes it exactly).
_VALUE_CODES = frozenset({"non-finite", "wrong-type", "out-of-range"})


def _not_written(err: TraceValidationError) -> TraceValidationError:
    err.args = (f"{err.args[0]}\nnothing was written: fix these values and write again",)
    return err


_isfinite = math.isfinite


def check_record(event: Any, who: str) -> None:
    """Refuse, on a streaming writer's path, what is not an event or holds a non-finite time.

    Three ``isfinite`` calls per event: streamed records are not checked in full (see
    :func:`require_writable` for what ``dump`` checks).

    Raises:
        ConfigError: ``event`` is not an Event, or its ``t``, ``dur`` or ``cost`` is not a
            finite number.
    """
    if type(event) is not Event and not isinstance(event, Event):
        raise ConfigError(f"{who} takes an Event, not a {type(event).__name__}")
    try:
        finite = _isfinite(event.t) and _isfinite(event.dur) and _isfinite(event.cost)
    except (TypeError, OverflowError):
        finite = False
    if not finite or not {type(event.t), type(event.dur), type(event.cost)} <= _NUMBERS:
        raise _bad_numbers(event)


_NUMBERS = frozenset({float, int})


_READ_BACK: dict[Any, Any] = {Event: msgspec.json.Decoder(Event), Edge: msgspec.json.Decoder(Edge)}


def readable(record: Any, who: str) -> tuple[Any, bytes]:
    """``(the record as its reader reads it, its JSON)``, or a refusal naming the field.

    A stream writer's check of each record: it is encoded, then read back with the reader's
    own decoder (an unknown type, a negative number, an empty id or agent, a field of the
    wrong type are refused as the reader would refuse them), and its ``attrs`` must read back
    as they are (no NaN, no object JSON has no form for, string keys). What comes back is what
    the writer keeps, so a recording always loads back.

    Raises:
        ConfigError: One line naming the field; nothing of the record was kept.
    """
    kind = type(record)
    name = "event" if kind is Event else "edge"
    try:
        data = _ENCODER.encode(record)
    except (TypeError, ValueError, RecursionError):
        problem = next(
            _where(getattr(record, f.name), f"$.{f.encode_name}", None)
            for f in msgspec.structs.fields(record)
            if not encodable(getattr(record, f.name))
        )
        raise _refused(who, name, str(problem)) from None
    try:
        back = _READ_BACK[kind].decode(data)
    except msgspec.ValidationError as err:
        raise _refused(who, name, str(err)) from None
    attrs = getattr(record, "attrs", None)
    if attrs is not None:
        found = non_finite_paths(attrs)
        if found:
            raise _refused(who, name, str(_nested_problem(f"$.attrs.{found[0]}", None)))
        if not plain_json(attrs):
            raise _refused(who, name, str(_not_json_problem(attrs, "$.attrs", None)))
    return back, data


def _refused(who: str, name: str, why: str) -> ConfigError:
    return ConfigError(
        f"{who}: cannot record this {name}: {_short(why, 240)}; nothing of it was kept"
    )


def _bad_numbers(event: Event) -> ConfigError:
    """The error for an event whose time, duration or cost JSON cannot hold."""
    for name in ("t", "dur", "cost"):
        value = getattr(event, name)
        try:
            finite = math.isfinite(value)
        except (TypeError, OverflowError):
            finite = False
        if type(value) not in _NUMBERS or not finite:
            kind = type(value)
            what = (
                f"a {kind.__module__}.{kind.__qualname__}, not a plain Python number; record it "
                "as float(value)"
                if finite and kind is not bool
                else "record a finite number (JSON cannot hold this one)"
            )
            return ConfigError(f"event {str(event.id)[:80]!r}: {name} is {str(value)[:40]}; {what}")
    return ConfigError(f"event {str(event.id)[:80]!r}: a number JSON cannot hold")
