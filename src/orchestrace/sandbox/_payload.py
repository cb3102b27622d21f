"""What runs inside a sandbox: the value format and the three roles (script, tests, candidate).

This module uses the standard library only and imports nothing of orchestrace when it runs: the
parent compiles it together with :mod:`orchestrace.sandbox._launcher` and sends both to
the launcher (``python -I -S``), which executes them in one namespace. The parent side
(:mod:`orchestrace.sandbox`) re-exports :func:`encode_value` and :func:`decode_value`.

Example:
    >>> decode_value(encode_value({"a": (1, 2.5, None)}))
    {'a': (1, 2.5, None)}
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False  # imported by the launcher before every sandbox: as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["decode_value", "encode_value"]

# -- the value format shared by both sides ------------------------------------------------------

_MAX_DEPTH = 100
_MAX_FRAME = 16 << 20
_MAX_INT_BYTES = 1 << 16
_SEQ: dict[type, bytes] = {list: b"L", tuple: b"U", set: b"E", frozenset: b"Z"}
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")


class _Unsupported(TypeError):
    """A value outside the exact builtin types the sandbox protocol carries."""


def encode_value(value: Any) -> bytes:
    r"""Encode ``value`` (exact builtin types only) as bytes.

    Args:
        value: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, or a ``list``,
            ``tuple``, ``dict``, ``set`` or ``frozenset`` of such values, nested at most 100
            deep. Subclasses of these types are refused.

    Returns:
        The encoding that :func:`decode_value` turns back into an equal value.

    Raises:
        TypeError: A value of another type (or of a subclass of a builtin), or nested too deep.

    Example:
        >>> encode_value([1, None])
        b'L\x00\x00\x00\x02I\x00\x00\x00\x01\x01N'
        >>> decode_value(encode_value({"a": {1, 2}, "b": (float("inf"), b"x")}))
        {'a': {1, 2}, 'b': (inf, b'x')}
    """
    out = bytearray()
    _enc(value, out, 0)
    return bytes(out)


def _enc(value: Any, out: bytearray, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _Unsupported("value nested too deep")
    t = type(value)
    if value is None:
        out += b"N"
    elif t is bool:
        out += b"T" if value else b"F"
    elif t is int:
        raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
        if len(raw) > _MAX_INT_BYTES:
            raise _Unsupported("integer too large")
        out += b"I" + _U32.pack(len(raw)) + raw
    elif t is float:
        out += b"D" + _F64.pack(value)
    elif t is str or t is bytes:
        raw = value.encode("utf-8", "surrogatepass") if t is str else value
        out += (b"S" if t is str else b"Y") + _U32.pack(len(raw)) + raw
    elif t in _SEQ:
        out += _SEQ[t] + _U32.pack(len(value))
        for v in value:
            _enc(v, out, depth + 1)
    elif t is dict:
        out += b"M" + _U32.pack(len(value))
        for k, v in value.items():
            _enc(k, out, depth + 1)
            _enc(v, out, depth + 1)
    else:
        raise _Unsupported(f"type {t.__module__}.{t.__qualname__} cannot be transferred")


def decode_value(data: bytes) -> Any:
    r"""Decode what :func:`encode_value` produced into genuine builtin objects.

    Args:
        data: The encoding, exactly (no trailing bytes).

    Returns:
        The value, built only from exact builtin types.

    Raises:
        ValueError: ``data`` is not a well-formed encoding.

    Example:
        >>> decode_value(b"U\x00\x00\x00\x02I\x00\x00\x00\x02\xff\x01N")
        (-255, None)
    """
    try:
        value, end = _dec(memoryview(data), 0, 0)
    except (IndexError, struct.error, UnicodeDecodeError, TypeError, RecursionError) as e:
        raise ValueError(f"malformed value: {e}") from None
    if end != len(data):
        raise ValueError("malformed value: trailing bytes")
    return value


def _dec(buf: memoryview, i: int, depth: int) -> tuple[Any, int]:
    if depth > _MAX_DEPTH:
        raise ValueError("malformed value: nested too deep")
    tag = bytes(buf[i : i + 1])
    i += 1
    if tag == b"N":
        return None, i
    if tag in (b"T", b"F"):
        return tag == b"T", i
    if tag == b"D":
        return _F64.unpack_from(buf, i)[0], i + 8
    (n,) = _U32.unpack_from(buf, i)
    i += 4
    if tag in (b"I", b"S", b"Y"):
        if i + n > len(buf) or (tag == b"I" and not 0 < n <= _MAX_INT_BYTES):
            raise ValueError("malformed value: bad length")
        raw = bytes(buf[i : i + n])
        if tag == b"I":
            return int.from_bytes(raw, "big", signed=True), i + n
        return (raw.decode("utf-8", "surrogatepass") if tag == b"S" else raw), i + n
    if n > len(buf) - i:  # every item takes at least one byte
        raise ValueError("malformed value: bad length")
    if tag == b"M":
        out: dict[Any, Any] = {}
        for _ in range(n):
            k, i = _dec(buf, i, depth + 1)
            v, i = _dec(buf, i, depth + 1)
            out[k] = v
        return out, i
    items = []
    for _ in range(n):
        v, i = _dec(buf, i, depth + 1)
        items.append(v)
    if tag == b"L":
        return items, i
    if tag == b"U":
        return tuple(items), i
    if tag == b"E":
        return set(items), i
    if tag == b"Z":
        return frozenset(items), i
    raise ValueError(f"malformed value: unknown tag {tag!r}")


def _write_frame(fd: int, payload: bytes) -> None:
    data = struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > _MAX_FRAME:
        raise ValueError(f"message of {n} bytes exceeds {_MAX_FRAME}")
    return _read_exact(fd, n)


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # a hostile __str__
        text = "exception"
    return text[:300]


# -- the payloads (run inside a sandbox) --------------------------------------------------------


def _serve_candidate(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    """Load the candidate program and answer calls on fds 3 (requests) and 4 (results)."""
    import builtins  # noqa: PLC0415  the sandbox launcher imports only what this path needs

    entry = str(cfg["entry"])
    g: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    fn: Any = None
    load_error = ""
    try:
        exec(compile(str(cfg["source"]), "candidate.py", "exec"), g)
        fn = g.get(entry)
        if not callable(fn):
            load_error = f"the program defines no function {entry!r}"
    except BaseException as e:
        load_error = f"loading failed: {_describe(e)}"
    while True:
        msg = _read_frame(3)
        if msg is None:
            return 0
        try:
            if load_error:
                raise RuntimeError(load_error)
            args, kwargs = decode_value(msg)
            result = fn(*args, **kwargs)
            data = b"o" + encode_value(result)
        except _Unsupported as e:
            data = b"b" + f"result not transferable: {e}".encode()
        except BaseException as e:
            data = b"e" + _describe(e).encode("utf-8", "replace")
        if len(data) > _MAX_FRAME:
            data = b"b" + f"result of {len(data)} bytes exceeds {_MAX_FRAME}".encode()
        _write_frame(4, data)


class CandidateError(Exception):
    """Raised in the tests where a forwarded call of the candidate failed."""


def _run_tests(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    """Run the tests; ``candidate`` forwards to fds 4 (requests) and 3 (results); verdict on 5."""
    import builtins  # noqa: PLC0415  the sandbox launcher imports only what this path needs

    state: dict[str, Any] = {"calls": 0, "broken": ""}

    def candidate(*args: Any, **kwargs: Any) -> Any:
        state["calls"] += 1
        if state["broken"]:
            raise CandidateError(state["broken"])
        try:
            req = encode_value((args, kwargs))
        except _Unsupported as e:
            state["broken"] = f"the tests pass a value the sandbox cannot transfer ({e})"
            raise CandidateError(state["broken"]) from None
        try:
            _write_frame(4, req)
            resp = _read_frame(3)
        except (OSError, ValueError) as e:
            resp, state["broken"] = None, f"candidate channel failed: {_describe(e)}"
        if resp is None:
            state["broken"] = state["broken"] or "the candidate process ended"
            raise CandidateError(state["broken"])
        kind, body = resp[:1], resp[1:]
        if kind == b"o":
            try:
                return decode_value(body)
            except ValueError as e:
                state["broken"] = f"malformed answer from the candidate ({_describe(e)[:100]})"
                raise CandidateError(state["broken"]) from None
        text = body[:300].decode("utf-8", "replace")
        if kind == b"e":
            raise CandidateError(f"the candidate raised {text}")
        state["broken"] = text if kind == b"b" else "malformed answer from the candidate"
        raise CandidateError(state["broken"])

    entry = str(cfg["entry"])
    candidate.__name__ = candidate.__qualname__ = entry
    g: dict[str, Any] = {"__name__": "__tests__", "__builtins__": builtins}
    passed, reason = False, ""
    try:
        exec(compile(str(cfg["helpers"]), "helpers.py", "exec"), g)
        g[entry] = candidate
        g["candidate"] = candidate
        exec(compile(str(cfg["tests"]), "tests.py", "exec"), g)
        eval(compile(str(cfg["call"]), "call", "eval"), g)
        if state["broken"]:
            reason = str(state["broken"])
        elif not state["calls"]:
            reason = "the tests never called the candidate"
        else:
            passed, reason = True, "all tests passed"
    except BaseException as e:
        reason = state["broken"] or _where(e)
    verdict = {"passed": passed, "reason": reason[:500], "calls": state["calls"]}
    _write_frame(5, encode_value(verdict))
    return 0


def _where(exc: BaseException) -> str:  # pragma: no cover - runs in the sandbox
    tb = exc.__traceback__
    line = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "tests.py":
            line = f" at tests.py line {tb.tb_lineno}"
        tb = tb.tb_next
    if isinstance(exc, CandidateError):
        return f"{exc}{line}"[:500]
    if isinstance(exc, AssertionError):
        return f"assertion failed{line}"
    return f"tests raised {_describe(exc)}{line}"


def _run_script(cfg: Mapping[str, Any]) -> int:  # pragma: no cover - runs in the sandbox
    import builtins  # noqa: PLC0415  the sandbox launcher imports only what this path needs

    g: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(str(cfg["source"]), "script.py", "exec"), g)
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:
        import traceback  # noqa: PLC0415  the sandbox launcher imports only what this path needs

        traceback.print_exc()
        return 1
    return 0


_ROLES: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "script": _run_script,
    "candidate": _serve_candidate,
    "tests": _run_tests,
}
