"""One self-contained HTML file of the viewer: the page, its script and style, and the data.

``orchestrace view TRACE --html out.html`` writes it. The file needs no server and no network:
the front-end reads the trace from a JSON block embedded in the page (``<`` and ``>`` escaped,
so no string of the trace can close it) and answers the same questions it asks the server
(windows, events, graph) from it. A Content-Security-Policy in the page allows only its own
inline script and style (by hash), so nothing read from the trace can run. Each event keeps at
most :data:`HTML_CONTENT_CHARS` characters of content and attrs; the page says when it cut one.

Example:
    >>> import tempfile, os
    >>> from orchestrace.io import dump
    >>> from orchestrace.trace.generate import generate_trace
    >>> d = tempfile.mkdtemp()
    >>> dump(generate_trace(agents=3, steps=30, seed=0), os.path.join(d, "t.json"))
    >>> from orchestrace.viewer.server import ViewerState
    >>> page = render_html(ViewerState(os.path.join(d, "t.json"), live=False))
    >>> page.startswith("<!doctype html>") and "orchestrace-data" in page
    True
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from orchestrace.errors import ConfigError
from orchestrace.io._output import atomic_write
from orchestrace.viewer.data import OVERLAYS, TraceView
from orchestrace.viewer.server import static_dir

__all__ = ["HTML_CONTENT_CHARS", "build_bundle", "render_html", "write_html"]

#: Characters of content (and of attrs as JSON) an event keeps in the HTML file.
HTML_CONTENT_CHARS = 20_000


def _view_bundle(v: TraceView, credit: bool) -> dict[str, Any]:
    ev = v.trace.events
    g = v.graph
    cut = HTML_CONTENT_CHARS

    def attrs_text(a: Any) -> str | None:
        return None if a is None else json.dumps(a, indent=1, ensure_ascii=False, default=str)

    attrs = [attrs_text(e.attrs) for e in ev]
    events = {
        "id": [e.id for e in ev],
        "t": v.t.tolist(),
        "dur": v.dur.tolist(),
        "type": v.type_code.tolist(),
        "lane": v.event_lane.tolist(),
        "agent": [e.agent for e in ev],
        "role": [e.role or v.lanes[int(v.event_lane[i])]["role"] for i, e in enumerate(ev)],
        "from": [e.from_ for e in ev],
        "to": [e.to for e in ev],
        "tool": [e.tool for e in ev],
        "decision": [e.decision for e in ev],
        "step": [e.step for e in ev],
        "trusted": [e.trusted for e in ev],
        "tokens_in": [e.tokens_in for e in ev],
        "tokens_out": [e.tokens_out for e in ev],
        "cost": [e.cost for e in ev],
        "error": [e.error for e in ev],
        "content_ref": [e.content_ref for e in ev],
        "content": [None if e.content is None else e.content[:cut] for e in ev],
        "content_length": [len(e.content or "") for e in ev],
        "attrs": [None if a is None else a[:cut] for a in attrs],
        "attrs_length": [len(a or "") for a in attrs],
    }
    ok = (g.src >= 0) & (g.dst >= 0)
    overlays: dict[str, Any] = {}
    kinds: list[tuple[str, str | None]] = [("credit:file", None)] if credit else []
    kinds += [(k, "agent" if k.startswith("credit:") else None) for k in OVERLAYS]
    for kind, unit in kinds:
        try:
            meta = v.overlay(kind, unit=unit)
        except ConfigError:
            continue
        values = v.overlay_values(kind, unit)
        overlays[f"{kind}|{unit or ''}"] = {
            "meta": meta,
            "values": [None if np.isnan(x) else x for x in values.tolist()],
        }
    return {
        "events": events,
        "edges": {
            "src": g.src[ok].tolist(),
            "dst": g.dst[ok].tolist(),
            "type": g.edge_code[ok].tolist(),
        },
        "critical": v.critical(),
        "markers": v.markers(),
        "overlays": overlays,
        "graph_agents": v.interaction_graph(mode="agents"),
    }


def build_bundle(state: Any) -> dict[str, Any]:
    """Everything the page shows, for a :class:`~orchestrace.viewer.server.ViewerState`."""
    meta = state.meta()
    meta["live"] = False
    meta["units"] = ["agent"]
    views = {}
    for key, src in zip("ab", state.sources, strict=False):
        views[key] = _view_bundle(src.view, credit=bool(src.view.credit_rows))
    return {
        "meta": meta,
        "views": views,
        "diff": state.diff() if len(state.sources) == 2 else None,
    }


def _safe_json(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # nothing in the block may end it or start markup: escape the characters that could
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def render_html(state: Any) -> str:
    """The self-contained page for ``state`` (a string of HTML).

    Raises:
        ConfigError: The package's built front-end is missing (reinstall orchestrace).
    """
    d = static_dir()
    try:
        page = (d / "index.html").read_text(encoding="utf-8")
        script = (d / "viewer.js").read_text(encoding="utf-8")
        style = (d / "viewer.css").read_text(encoding="utf-8")
    except OSError:
        raise ConfigError(
            "the viewer's page is missing from this installation; reinstall orchestrace"
        ) from None
    script = script.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    style = style.replace("</style", "<\\/style")
    data = _safe_json(_clean_bundle(build_bundle(state)))
    csp = (
        f"default-src 'none'; script-src '{_sha(script)}'; style-src '{_sha(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head = f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n<style>{style}</style>'
    page = page.replace('<link rel="stylesheet" href="static/viewer.css">', head)
    page = page.replace(
        '<script src="static/viewer.js"></script>',
        f'<script id="orchestrace-data" type="application/json">{data}</script>\n'
        f"<script>{script}</script>",
    )
    return page


def _clean_bundle(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean_bundle(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean_bundle(v) for v in obj]
    return obj


def write_html(
    state: Any, path: str | os.PathLike[str], *, force: bool = False, inputs: Sequence[str] = ()
) -> int:
    """Write the page for ``state`` to ``path`` atomically; return its size in bytes.

    Raises:
        OutputError: ``path`` exists (without ``force``), is an input, or cannot be written.
    """
    data = render_html(state).encode("utf-8")
    with atomic_write(path, force=force, inputs=inputs) as fh:
        fh.write(data)
    return len(data)
