"""Signing keys of a run: per-agent HMAC keys and the run secret they derive from.

:mod:`orchestrace.runtime.security` (the defenses the runtime enforces) re-exports
:class:`Keyring`, :class:`RunSecret`, :data:`SECRET_ENV` and :func:`run_secret_from_env`.

Example:
    >>> s = RunSecret(bytes(range(32)))
    >>> k = s.keyring(0)
    >>> k.verify("w1", "orchestrator", "42", 3, k.sign("w1", "orchestrator", "42", 3))
    True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.io._common import read_bytes
from orchestrace.io._output import atomic_write

__all__ = ["SECRET_ENV", "Keyring", "RunSecret", "run_secret_from_env"]


def as_path(path: Any, what: str, fix: str) -> Path:
    """``path`` as a Path; anything else (an int would be taken for an open file) is refused.

    Raises:
        ConfigError: ``path`` is not a string or path.
    """
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"{what} takes a path, not a {type(path).__name__}; {fix}")
    return Path(path)


def _read_text(path: Path, what: str, fix: str, head: str | None = None) -> str:
    """A small UTF-8 config file's text; a FIFO nobody writes, a device or a directory fails.

    Raises:
        ConfigError: One line naming ``what``, why it cannot be read, and ``fix``.
    """
    where = head or str(path)
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{where}: cannot read {what}: it is a directory; {fix}")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise ConfigError(f"{where}: cannot read {what}: not a regular file; {fix}")
        data = read_bytes(path, json=False)  # (text, not a trace)
        text = bytes(data).decode("utf-8")
        if not text.strip():
            raise ConfigError(f"{where}: cannot read {what}: it holds no text; {fix}")
        return text
    except ConfigError:
        raise
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{where}: cannot read {what}: not UTF-8 text ({err.reason}); {fix}"
        ) from None
    except OrchestraceError as err:
        why = str(err)
        for lead in (f"{path}: ", "file: "):  # the path is named once, at the start
            if why.startswith(lead):
                why = why[len(lead) :]
        raise ConfigError(f"{where}: cannot read {what}: {why.rstrip('.')}; {fix}") from None
    except OSError as err:
        raise ConfigError(f"{where}: cannot read {what} ({err.strerror or err}); {fix}") from None


class Keyring:
    """Per-agent signing keys of one run; they never leave the runtime (never recorded).

    Example:
        >>> k = Keyring.from_seed(0)
        >>> mac = k.sign("w1", "orchestrator", "42", 3)
        >>> k.verify("w1", "orchestrator", "42", 3, mac), k.verify("w2", "orchestrator", "42", 3, mac)
        (True, False)
    """

    __slots__ = ("_keys", "_master")

    def __init__(self, master: bytes) -> None:
        if not isinstance(master, bytes) or len(master) < 16:
            raise ConfigError("a signing master key must be at least 16 bytes")
        self._master = master
        self._keys: dict[str, bytes] = {}

    @classmethod
    def from_seed(cls, seed: int) -> Keyring:
        """Keys derived from the run seed: the same seed signs the same way (reproducible)."""
        return cls(hashlib.blake2b(f"orchestrace-keys:{seed}".encode(), digest_size=32).digest())

    @classmethod
    def random(cls) -> Keyring:
        """Keys from ``os.urandom`` (a trace cannot be re-verified offline)."""
        return cls(os.urandom(32))

    def __repr__(self) -> str:
        return "Keyring(<keys hidden>)"

    def key(self, agent: str) -> bytes:
        """The key of ``agent``."""
        k = self._keys.get(agent)
        if k is None:
            k = hmac.new(self._master, agent.encode(), hashlib.sha256).digest()
            self._keys[agent] = k
        return k

    @staticmethod
    def _body(sender: str, recipient: str, content: str, step: int, data: Any = None) -> bytes:
        parts = (sender, recipient, content, str(step))
        body = b"\x1f".join(p.encode("utf-8", "surrogatepass") for p in parts)
        if data is None:
            return body
        # the structured payload receivers act on (``attrs.data``), canonically encoded
        enc = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str
        )
        return b"data\x1e" + body + b"\x1e" + enc.encode("ascii")

    def sign(self, sender: str, recipient: str, content: str, step: int, data: Any = None) -> str:
        """The hex MAC of a message sent by ``sender`` (covers ``data`` when given)."""
        body = self._body(sender, recipient, content, step, data)
        return hmac.digest(self.key(sender), body, "sha256").hex()

    def verify(
        self,
        sender: str,
        recipient: str,
        content: str,
        step: int,
        mac: str | None,
        data: Any = None,
    ) -> bool:
        """Whether ``mac`` is ``sender``'s signature of the message (and its ``data``)."""
        if not isinstance(mac, str):
            return False
        return hmac.compare_digest(self.sign(sender, recipient, content, step, data), mac)


#: Environment variable naming a run-secret file a run with ``keys="secret"`` reads when its
#: defenses carry no secret (how a replay or fork of a recorded run gets its secret).
SECRET_ENV = "ORCHESTRACE_RUN_SECRET_FILE"


class RunSecret:
    """The secret a run's signing keys derive from, together with the run seed.

    The master key is ``HMAC-SHA256(nonce, "orchestrace-run-keys" | seed)`` and each agent's key
    ``HMAC-SHA256(master, agent)``. The seed is recorded in the trace; the nonce (32 random
    bytes) is not, so the keys cannot be derived from a trace, while whoever holds the secret
    (a replay, a fork, an offline audit) derives the same keys and verifies or reproduces
    every MAC. The nonce never appears in a ``repr``, a trace or a log; :meth:`save` writes it
    to a file readable by its owner only.

    Example:
        >>> s = RunSecret(bytes(range(32)))
        >>> s.keyring(7).sign("w1", "orchestrator", "42", 3) == s.keyring(7).sign(
        ...     "w1", "orchestrator", "42", 3)
        True
        >>> s.keyring(7).sign("w1", "o", "42", 3) != s.keyring(8).sign("w1", "o", "42", 3)
        True
        >>> repr(s)
        'RunSecret(<hidden>)'
    """

    __slots__ = ("_nonce",)

    def __init__(self, nonce: bytes) -> None:
        if not isinstance(nonce, bytes) or len(nonce) < 16:
            raise ConfigError(
                "a run secret must be at least 16 bytes; use RunSecret.new() or "
                "RunSecret.from_file(path)"
            )
        self._nonce = bytes(nonce)

    @classmethod
    def new(cls) -> RunSecret:
        """A fresh secret (32 bytes of ``os.urandom``)."""
        return cls(os.urandom(32))

    @classmethod
    def from_hex(cls, text: str, *, source: str = "run secret text") -> RunSecret:
        """Read the hex form :meth:`hex` writes.

        Raises:
            ConfigError: Not hex, or too short (the message never shows the text).
        """
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raise ConfigError(
                f"{source}: not a run secret (expected hex digits, as RunSecret.save writes)"
            ) from None
        if len(raw) < 16:
            raise ConfigError(f"{source}: a run secret needs at least 32 hex digits")
        return cls(raw)

    @classmethod
    def from_file(cls, path: str | Path) -> RunSecret:
        """Read a secret file written by :meth:`save`.

        Raises:
            ConfigError: Missing, unreadable or malformed file (one line; never the content).
        """
        p = as_path(path, "RunSecret.from_file", "pass the file RunSecret.save wrote")
        where = f"{p} (run secret file)"  # never "secret:" (error output redacts what follows)
        text = _read_text(p, "it", "pass the file RunSecret.save wrote", where)
        return cls.from_hex(text, source=where)

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the secret (hex) to ``path``, readable by its owner only.

        Raises:
            OutputError: The file exists (without ``force``) or cannot be written.
        """
        with atomic_write(path, "w", force=force) as fh:
            os.chmod(fh.name, 0o600)
            fh.write(self.hex() + "\n")
        return Path(path)

    def hex(self) -> str:
        """The secret as hex digits (what :meth:`save` writes; keep it out of traces)."""
        return self._nonce.hex()

    def keyring(self, seed: int) -> Keyring:
        """The run's per-agent keys for ``seed``."""
        master = hmac.new(self._nonce, f"orchestrace-run-keys\x1f{seed}".encode(), "sha256")
        return Keyring(master.digest())

    def __repr__(self) -> str:
        return "RunSecret(<hidden>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSecret) and hmac.compare_digest(self._nonce, other._nonce)

    def __hash__(self) -> int:
        return hash(hashlib.sha256(self._nonce).digest())

    def __reduce__(self) -> Any:
        # process pools pickle a run's defenses; the secret travels as it is, never as text
        return (RunSecret, (self._nonce,))


def run_secret_from_env() -> RunSecret | None:
    """The secret named by :data:`SECRET_ENV` (``None`` when unset).

    Raises:
        ConfigError: The file named cannot be read or is not a run secret.
    """
    path = os.environ.get(SECRET_ENV)
    if not path:
        return None
    try:
        return RunSecret.from_file(path)
    except ConfigError as err:
        raise ConfigError(f"{SECRET_ENV}: {err}") from None
