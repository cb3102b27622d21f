r"""Text that is safe to show or record: terminal-safe display and secret redaction.

:func:`display` makes any value safe to print on a terminal: control characters (C0, C1,
``ESC``, ``BEL``, ``CR``, ``LF``, bidi and other invisible format characters) are escaped, and
long text is clipped with its full length stated. :func:`redact` removes secrets (API keys,
``Authorization``/``Bearer`` values, ``api_key=``-style parameters, passwords in URLs) from text
before it is recorded in a trace, logged or printed.

Example:
    >>> display("\x1b[31mRED\x1b[0m\r\nFAKE: ok")
    '\\x1b[31mRED\\x1b[0m\\r\\nFAKE: ok'
    >>> display("x" * 100, limit=20)
    'xxxxxxxxxxxxxxxxxxx… (100 chars)'
    >>> redact("GET http://bob:hunter2@host/v1?api_key=sk-abc123XYZ failed")
    'GET http://***@host/v1?api_key=*** failed'
    >>> redact('{"error": "bad header Authorization: Bearer tok.en-123"}')
    '{"error": "bad header Authorization: ***"}'
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "RedactingFilter",
    "StreamWriteError",
    "bounded",
    "decimal",
    "display",
    "forget_secret",
    "guarded_output",
    "redact",
    "redact_url",
    "remember_secret",
    "strict_json",
]

#: Shown in place of a removed secret.
MASK = "***"

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def display(value: object, limit: int = 80) -> str:
    r"""``value`` as one terminal-safe line of at most about ``limit`` characters.

    Every character that is not printable (``str.isprintable``: control characters, escape
    sequences, line and paragraph separators, invisible format characters, lone surrogates) is
    written as a Python escape (``\x1b``, ``\n``, ``\u202e``). Text longer than ``limit``
    is cut and ends with ``… (N chars)``, N being the full length of the original.

    Args:
        value: Any value (non-strings are converted with ``str``).
        limit: Most characters to keep before the ellipsis (at least 8).

    Returns:
        The safe text.
    """
    text = value if isinstance(value, str) else str(value)
    limit = max(8, limit)
    head = text[: limit + 1]  # never escape more than can be shown
    out: list[str] = []
    size = 0
    for ch in head:
        piece = ch if ch.isprintable() else _escape_char(ch)
        out.append(piece)
        size += len(piece)
        if size > limit:
            break
    safe = "".join(out)
    if len(text) <= limit and size <= limit:
        return safe
    return f"{safe[: limit - 1]}… ({len(text)} chars)"


def bounded(text: str, width: int = 1000, lines: int = 60) -> str:
    r"""``text`` with every line clipped to ``width`` characters and at most ``lines`` lines.

    For multi-line messages (errors, problem lists) that may quote hostile values: control
    characters other than newline and tab are escaped (as :func:`display` does), and clipped
    lines end with ``… (N chars)``.

    Example:
        >>> bounded("short\n" + "y" * 50, width=20)
        'short\nyyyyyyyyyyyyyyyyyyy… (50 chars)'
    """
    parts = text.split("\n", lines)
    more = len(parts) > lines
    if more:
        extra = parts.pop().count("\n") + 1
    out = [
        _CONTROL.sub(
            lambda m: _escape_char(m.group()),
            p if len(p) <= width else f"{p[: width - 1]}… ({len(p)} chars)",
        )
        for p in parts
    ]
    if more:
        out.append(f"... and {extra} more line(s)")
    return "\n".join(out)


# control characters a terminal acts on (everything but newline and tab), DEL, C1 controls
# (0x9b is a one-byte CSI), and the bidi/format characters that reorder or hide text
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_CR = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


class StreamWriteError(OSError):
    """Standard output or standard error cannot be written (closed, full, gone).

    Example:
        >>> str(StreamWriteError(28, "cannot write to standard output: No space left on device"))
        '[Errno 28] cannot write to standard output: No space left on device'
    """


class _Guard:
    """A text stream that escapes terminal control characters before passing text on."""

    def __init__(self, stream: Any, keep_cr: bool, name: str = "output") -> None:
        self._stream = stream
        self._pattern = _CONTROL_KEEP_CR if keep_cr else _CONTROL
        self._name = name

    def _failed(self, err: OSError | None) -> StreamWriteError:
        if err is None:
            return StreamWriteError(errno.EBADF, f"standard {self._name} is closed")
        why = err.strerror or str(err)
        return StreamWriteError(err.errno, f"cannot write to standard {self._name}: {why}")

    @contextlib.contextmanager
    def _reported(self) -> Iterator[None]:
        """Turn a failed write or flush into :class:`StreamWriteError`."""
        try:
            yield
        except BrokenPipeError:
            raise  # a reader that stopped early (``| head``): not an error
        except OSError as err:
            raise self._failed(err) from None
        except ValueError:
            if getattr(self._stream, "closed", False):  # closed by the program itself
                raise self._failed(None) from None
            raise

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._failed(None)
        with self._reported():
            self._stream.write(self._pattern.sub(lambda m: _escape_char(m.group()), text))
        return len(text)

    def flush(self) -> None:
        if self._stream is None:
            return
        with self._reported():
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """Escape terminal control characters in everything printed to stdout and stderr.

    A last line of defence for human-readable output: ``ESC``, ``BEL``, ``CR`` and the other
    C0/C1 controls (but not newline and tab) are written as escapes, so text taken from a
    trace cannot move the cursor, recolour or rewrite the terminal. Carriage returns pass on a
    terminal's stderr, where progress bars redraw their line. JSON output is unaffected (JSON
    escapes control characters itself).
    """
    out, err = sys.stdout, sys.stderr
    keep_cr = bool(getattr(err, "isatty", lambda: False)())
    sys.stdout = _Guard(out, keep_cr=False, name="output")
    sys.stderr = _Guard(err, keep_cr=keep_cr, name="error")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


# ---------------------------------------------------------------------------- redaction
_SECRETS: set[str] = set()
_LOCK = threading.Lock()

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@'\"<>?#]+@")
#: User info at the start of a URL written without a scheme (``user:password@host``).
_BARE_USERINFO = re.compile(r"^[^\s/@'\"<>?#]+@")
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|openai-api-key)(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"(?:(?:bearer|basic|token|digest)\s+)?[^\s\"'\\,;}&]+"
)
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}")
_PARAM = re.compile(  # not the last part of a path (`/etc/passwd: ...`)
    r"(?i)(?<![/\\])\b(api[_\-]?key|apikey|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|"
    r"client[_\-]?secret|secret[_\-]?key|secret|token|password|passwd|pwd)"
    r"(\\?[\"']?\s*[:=]\s*\\?[\"']?)(?!\*\*\*)[^\s\"'\\&,;}]+"
)
_QUERY_KEY = re.compile(r"(?i)([?&](?:key|sig|signature|code)=)[^&\s\"'#]+")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{16,}|gsk_[A-Za-z0-9]{16,}|"
    r"xai-[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,})"
)


def remember_secret(secret: str | None) -> None:
    """Redact ``secret`` verbatim from every later :func:`redact` (e.g. a configured API key).

    Values shorter than 4 characters are ignored (they would mask ordinary text).
    """
    if secret and len(secret) >= 4:
        with _LOCK:
            _SECRETS.add(secret)


def forget_secret(secret: str | None) -> None:
    """Stop redacting ``secret`` verbatim (patterns still apply)."""
    with _LOCK:
        _SECRETS.discard(secret or "")


def scrub_known(value: Any) -> Any:
    """``value`` with every secret given to :func:`remember_secret` replaced by ``***``.

    Only those literal values are replaced (no patterns), in strings and, recursively, in the
    keys and values of dicts, lists and tuples; everything else is returned as it is. With no
    secret remembered this returns ``value`` itself at once, so recording pays nothing.

    Example:
        >>> remember_secret("sk-example-0001")
        >>> scrub_known({"content": "key sk-example-0001", "n": 3})
        {'content': 'key ***', 'n': 3}
        >>> forget_secret("sk-example-0001")
    """
    if not _SECRETS:
        return value
    with _LOCK:
        known = sorted(_SECRETS, key=len, reverse=True)
    return _scrub(value, known)


def _scrub(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        for s in known:
            if s in value:
                value = value.replace(s, MASK)
        return value
    if isinstance(value, dict):
        return {_scrub(k, known): _scrub(v, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, known) for v in value)
    return value


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """``text`` with every secret replaced by ``***``.

    Removed: the values passed in ``secrets`` and those given to :func:`remember_secret`;
    passwords and user names in URLs (``scheme://user:pw@host``); ``Authorization`` and
    ``X-Api-Key`` header values; ``Bearer``/``Basic`` tokens; ``api_key=``, ``token:``,
    ``password=`` and similar parameters (query strings, JSON, headers); strings shaped like
    well-known API keys (``sk-...``, ``hf_...``).

    Args:
        text: Text about to be recorded, logged or printed.
        secrets: Extra literal values to remove.

    Returns:
        The redacted text.
    """
    with _LOCK:
        known = sorted({s for s in (*_SECRETS, *secrets) if s and len(s) >= 4}, key=len)
    for s in reversed(known):  # longest first, so a key containing another is removed whole
        if s in text:
            text = text.replace(s, MASK)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _QUERY_KEY.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _KEY_SHAPES.sub(MASK, text)


def redact_url(url: str) -> str:
    """``url`` without credentials: user info and secret-looking query parameters removed.

    Example:
        >>> redact_url("https://u:p@example.org/v1?api_key=k1234&x=1")
        'https://example.org/v1?api_key=***&x=1'
        >>> redact_url("u:p@example.org/v1")  # no scheme: still user info
        'example.org/v1'
    """
    url = _URL_USERINFO.sub(lambda m: m.group(1), url)
    if "://" not in url:
        url = _BARE_USERINFO.sub("", url)
    return redact(url)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from messages and tracebacks of its records."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always let it through."""
        try:
            record.msg = redact(record.getMessage())
            record.args = None
            if record.exc_info and not record.exc_text:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        except Exception:  # never let logging itself fail
            record.msg, record.args = "(unprintable log message)", None
        return True


#: Loggers whose records are redacted (every logger orchestrace writes to).
LOGGERS = ("orchestrace", "orchestrace.runtime")
for _name in LOGGERS:
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, RedactingFilter) for f in _logger.filters):
        _logger.addFilter(RedactingFilter())


#: Longest decimal :func:`decimal` reads (Python refuses to convert over 4,300 digits).
MAX_DECIMAL_DIGITS = 1000


def decimal(text: str) -> int | None:
    """The value of ``text`` when it is a plain decimal of ASCII digits, else ``None``.

    ``str.isdigit`` is also true of ``"²"`` (which ``int`` refuses) and of other scripts'
    digits (which ``int`` reads): numbers in files, ids and positions are ASCII. Over
    :data:`MAX_DECIMAL_DIGITS` digits is no count, step or position either: ``None``.

    Example:
        >>> decimal("042"), decimal("²"), decimal("\u0663"), decimal("-1"), decimal("")
        (42, None, None, None, None)
        >>> decimal("1" * 5000) is None
        True
    """
    if len(text) > MAX_DECIMAL_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def strict_json(
    obj: Any,
    *,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> tuple[str, list[str]]:
    """``json.dumps`` that every JSON parser reads, and where it had to write ``null``.

    Python's ``json`` writes a NaN or an infinity as ``NaN`` / ``Infinity``, which strict
    parsers refuse. Here each becomes ``null``; the second value lists them as
    ``"path = value"``, so that the caller says so (a warning, a key of the document).

    Example:
        >>> strict_json({"a": [1.5, float("nan")], "b": {"c": float("-inf")}})
        ('{"a": [1.5, null], "b": {"c": null}}', ['a[1] = nan', 'b.c = -inf'])
    """
    kw: dict[str, Any] = {"indent": indent, "separators": separators, "default": default}
    try:
        return json.dumps(obj, allow_nan=False, **kw), []
    except ValueError as err:
        if "not JSON compliant" not in str(err):
            raise
    found: list[str] = []
    return json.dumps(_finite(obj, "", found), allow_nan=False, **kw), found


def _finite(obj: Any, path: str, found: list[str]) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        found.append(f"{path or 'value'} = {obj}")
        return None
    if isinstance(obj, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), found) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(obj)]
    return obj
