"""The viewer's local web server: the page, its static files and a JSON API over loaded traces.

Built on Starlette and served by uvicorn on ``127.0.0.1`` (``pip install 'orchestrace[viewer]'``).
Every response carries a Content-Security-Policy that allows only the page's own scripts and
styles, so nothing read from a trace can run in the page; requests naming another host are
refused (a web page elsewhere cannot read the traces through DNS rebinding).

A file that changes while it is shown (a JSONL recording still being written) is read again
when the page polls ``/api/version``; if it cannot be read at that moment, the last good
version stays on screen and the page shows the error line.

Example:
    >>> import tempfile, os
    >>> from orchestrace.io import dump
    >>> from orchestrace.trace.generate import generate_trace
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> dump(generate_trace(agents=3, steps=30, seed=0), path)
    >>> from starlette.testclient import TestClient
    >>> client = TestClient(create_app(ViewerState(path)), base_url="http://127.0.0.1")
    >>> client.get("/api/meta").json()["views"][0]["summary"]["n_events"]
    30
"""

from __future__ import annotations

import math
import os
import socket
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from orchestrace._safe import bounded, redact
from orchestrace.errors import ConfigError, OrchestraceError
from orchestrace.viewer.data import OVERLAYS, TraceView
from orchestrace.viewer.diff import diff_traces
from orchestrace.viewer.load import load_credit_file, load_views

__all__ = ["CSP", "ViewerState", "create_app", "error_line", "serve", "static_dir"]

#: Content-Security-Policy of every response: the page's own scripts and styles only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_LOCAL_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]
_INSTALL_HINT = "the viewer needs starlette and uvicorn: pip install 'orchestrace[viewer]'"


def static_dir() -> Path:
    """The directory of the built front-end shipped with the package.

    Example:
        >>> sorted(p.name for p in static_dir().iterdir())
        ['index.html', 'viewer.css', 'viewer.js']
    """
    return Path(str(resources.files("orchestrace.viewer") / "static"))


def error_line(err: BaseException) -> str:
    """The one line the command line prints for ``err`` (``error: ...``).

    Example:
        >>> error_line(ConfigError("--port 1: cannot listen"))
        'error: --port 1: cannot listen'
    """
    return f"error: {bounded(redact(str(err)))}"


def _signature(path: str) -> tuple[float, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if os.path.isdir(path):  # a Parquet dataset: its tables decide
        total, newest = 0, st.st_mtime
        try:
            for entry in os.scandir(path):
                s = entry.stat()
                total += s.st_size
                newest = max(newest, s.st_mtime)
        except OSError:
            return None
        return (newest, total)
    return (st.st_mtime, st.st_size)


class _Source:
    """A trace file and the view of its trace, read again when the file changes."""

    def __init__(
        self, path: str, trace_id: str | None, credit: str | None, fmt: str | None = None
    ) -> None:
        self.path = path
        self.trace_id = trace_id
        self.fmt = fmt
        self.credit = credit
        self.signature = _signature(path)
        self.view = self._load()
        self.error: str | None = None

    def _load(self) -> TraceView:
        view = load_views(self.path, trace_id=self.trace_id, format=self.fmt)
        if self.credit is not None:
            view.credit_rows = load_credit_file(self.credit, view)
        return view

    def refresh(self) -> bool:
        """Read the file again if it changed; ``True`` when the view was replaced."""
        sig = _signature(self.path)
        if sig == self.signature:
            return False
        try:
            view = self._load()
        except OrchestraceError as err:
            self.error = error_line(err)
            return False
        self.signature = sig
        self.view = view
        self.error = None
        return True


class ViewerState:
    """The traces a viewer shows: one, or an original and its fork for the diff.

    Args:
        path: The trace file.
        other: A second trace (e.g. a fork of the first): the page shows their diff.
        trace_id: Which trace of a file holding several (default: the first).
        credit: ``orchestrace credit --json`` output for the first trace.
        live: Read files again when they change (a recording still being written).
        format: The files' format (default: from the name and structure), e.g. ``otel``.

    Raises:
        OrchestraceError: A file cannot be read (the message is the command line's error).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        other: str | os.PathLike[str] | None = None,
        *,
        trace_id: str | None = None,
        credit: str | os.PathLike[str] | None = None,
        live: bool = True,
        format: str | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self.sources = [
            _Source(
                os.fspath(path), trace_id, None if credit is None else os.fspath(credit), format
            )
        ]
        if other is not None:
            self.sources.append(_Source(os.fspath(other), None, None, format))
        self.live = live
        self.version = 1
        self._diff: dict[str, Any] | None = None
        self._rediff()

    def _rediff(self) -> None:
        if len(self.sources) == 2:
            self._diff = diff_traces(self.sources[0].view, self.sources[1].view)

    def view(self, key: str | None) -> TraceView:
        """The view ``a`` (first trace, default) or ``b`` (second).

        Raises:
            ConfigError: ``b`` without a second trace, or another key.
        """
        k = key or "a"
        with self.lock:
            if k == "a":
                return self.sources[0].view
            if k == "b" and len(self.sources) == 2:
                return self.sources[1].view
        raise ConfigError(
            f"no trace {k[:10]!r}; use v=a" + (" or v=b" if len(self.sources) == 2 else "")
        )

    def refresh(self) -> dict[str, Any]:
        """Read changed files again; return the version and any read error."""
        with self.lock:
            if self.live and any([s.refresh() for s in self.sources]):
                self.version += 1
                self._rediff()
            errors = [s.error for s in self.sources if s.error]
            return {"version": self.version, "error": errors[0] if errors else None}

    def meta(self) -> dict[str, Any]:
        """Everything the page needs first: each trace's summary and lanes, and what exists."""
        with self.lock:
            views = []
            for key, src in zip("ab", self.sources, strict=False):
                v = src.view
                views.append({"key": key, "summary": v.summary(), "lanes": v.lanes})
            return {
                "version": self.version,
                "views": views,
                "diff": self._diff is not None,
                "overlays": (["credit:file"] if self.sources[0].view.credit_rows else [])
                + list(OVERLAYS),
                "units": ["agent", "role", "turn", "message", "action", "orchestrator", "team"],
                "live": self.live,
                "error": next((s.error for s in self.sources if s.error), None),
            }

    def diff(self) -> dict[str, Any]:
        """The diff of the two traces.

        Raises:
            ConfigError: Only one trace is shown.
        """
        with self.lock:
            if self._diff is None:
                raise ConfigError(
                    "no second trace to compare; start the viewer with two: "
                    "`orchestrace view ORIGINAL FORK`"
                )
            return self._diff


# ---------------------------------------------------------------------- parameters
def _float(params: Any, name: str, default: float | None = None) -> float:
    raw = params.get(name)
    if raw is None:
        if default is None:
            raise ConfigError(f"parameter {name} is missing; give a number, e.g. {name}=0")
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ConfigError(f"parameter {name} must be a finite number (got {raw[:40]!r})")
    return value


def _int(params: Any, name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"parameter {name} must be an integer (got {raw[:40]!r})") from None


def _ints(params: Any, name: str) -> list[int] | None:
    raw = params.get(name)
    if raw is None:
        return None
    if raw == "":
        return []
    try:
        return [int(x) for x in raw.split(",")]
    except ValueError:
        raise ConfigError(f"parameter {name} must be integers separated by commas") from None


def _strs(params: Any, name: str) -> list[str] | None:
    raw = params.get(name)
    if raw is None:
        return None
    return [x for x in raw.split(",") if x]


# ---------------------------------------------------------------------- the app
def create_app(state: ViewerState, *, allowed_hosts: list[str] | None = None) -> Any:
    """The Starlette application serving ``state`` (the page, static files, ``/api/*``).

    Args:
        state: The traces to show.
        allowed_hosts: Host names requests may name (default: the loopback names).

    Raises:
        ImportError: Starlette is not installed (the message says what to install).
    """
    try:
        from starlette.applications import Starlette  # noqa: PLC0415  optional extra [viewer]
        from starlette.middleware import Middleware  # noqa: PLC0415  optional extra [viewer]
        from starlette.middleware.trustedhost import TrustedHostMiddleware  # noqa: PLC0415  optional extra [viewer]
        from starlette.requests import Request  # noqa: PLC0415  optional extra [viewer]
        from starlette.responses import FileResponse, JSONResponse, Response  # noqa: PLC0415  optional extra [viewer]
        from starlette.routing import Mount, Route  # noqa: PLC0415  optional extra [viewer]
        from starlette.staticfiles import StaticFiles  # noqa: PLC0415  optional extra [viewer]
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None

    static = static_dir()

    def api(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:  # views are computed outside the lock: a slow analysis holds up no window
                body = fn(request)
            except OrchestraceError as err:
                return JSONResponse({"error": error_line(err)}, status_code=400, headers=_HEADERS)
            except Exception as err:  # one line on the page, as the command line gives
                line = (
                    f"error: unexpected {type(err).__name__}: {redact(str(err)[:300])}; "
                    "this is a bug in orchestrace; please report it"
                )
                return JSONResponse({"error": bounded(line)}, status_code=500, headers=_HEADERS)
            return JSONResponse(body, headers=_HEADERS)

        return endpoint

    def index(request: Request) -> Response:
        page = static / "index.html"
        if not page.is_file():
            return Response(
                "the viewer's page is missing from this installation; reinstall orchestrace",
                status_code=500,
                media_type="text/plain",
                headers=_HEADERS,
            )
        return FileResponse(page, headers=_HEADERS)

    def meta(request: Request) -> Any:
        return state.meta()

    def version(request: Request) -> Any:
        return state.refresh()

    def window(request: Request) -> Any:
        p = request.query_params
        v = state.view(p.get("v"))
        s = v.summary()
        return v.window(
            _float(p, "t0", s["t_start"]),
            _float(p, "t1", s["t_end"]),
            px=_int(p, "px", 1000),
            lanes=_ints(p, "lanes"),
            rows=_ints(p, "rows"),
            types=_strs(p, "types"),
            q=p.get("q") or None,
            subset=p.get("subset") or None,
            overlay=p.get("overlay") or None,
            unit=p.get("unit") or None,
        )

    def event(request: Request) -> Any:
        p = request.query_params
        v = state.view(p.get("v"))
        ref = p.get("i") or p.get("id")
        if not ref:
            raise ConfigError("parameter i (event index) or id is missing")
        return v.event(v.index(ref), offset=max(0, _int(p, "offset", 0)))

    def critical(request: Request) -> Any:
        return state.view(request.query_params.get("v")).critical()

    def markers(request: Request) -> Any:
        return state.view(request.query_params.get("v")).markers()

    def overlay(request: Request) -> Any:
        p = request.query_params
        kind = p.get("kind") or ""
        return state.view(p.get("v")).overlay(kind, unit=p.get("unit") or None)

    def graph(request: Request) -> Any:
        p = request.query_params
        v = state.view(p.get("v"))
        return v.interaction_graph(
            mode=p.get("mode") or "agents",
            t0=_float(p, "t0") if p.get("t0") is not None else None,
            t1=_float(p, "t1") if p.get("t1") is not None else None,
            lanes=_ints(p, "lanes"),
            types=_strs(p, "types"),
            q=p.get("q") or None,
            limit=max(1, min(_int(p, "limit", 300), 2000)),
        )

    def diff(request: Request) -> Any:
        return state.diff()

    def search(request: Request) -> Any:
        p = request.query_params
        return state.view(p.get("v")).search(p.get("q") or "")

    routes = [
        Route("/", index),
        Route("/index.html", index),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/meta", api(meta)),
        Route("/api/version", api(version)),
        Route("/api/window", api(window)),
        Route("/api/event", api(event)),
        Route("/api/critical", api(critical)),
        Route("/api/markers", api(markers)),
        Route("/api/overlay", api(overlay)),
        Route("/api/graph", api(graph)),
        Route("/api/diff", api(diff)),
        Route("/api/search", api(search)),
        Mount("/static", app=StaticFiles(directory=str(static), check_dir=False), name="static"),
    ]
    hosts = allowed_hosts if allowed_hosts is not None else _LOCAL_HOSTS
    app = Starlette(
        routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    )

    return _SecurityHeaders(app)


class _SecurityHeaders:
    """ASGI wrapper: every HTTP response gets the security headers (CSP first of all)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._raw = [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message.get("type") == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self._raw if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, sending)


def serve(
    state: ViewerState,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``state`` until interrupted; ``on_ready(url)`` runs once the port is bound.

    Args:
        state: The traces.
        host: The address to listen on (loopback by default).
        port: The port (0: a free one).
        on_ready: Called with the page's URL when the server listens.

    Raises:
        ImportError: uvicorn is not installed (the message says what to install).
        ConfigError: The port cannot be bound.
    """
    try:
        import uvicorn  # noqa: PLC0415  optional extra [viewer]
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    app = create_app(state)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ConfigError(
            f"--port {port}: cannot listen on {host}:{port} ({err.strerror or err}); "
            "choose another port, or leave --port out to use a free one"
        ) from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(url)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
