// Where the page gets its data: the local server's JSON API, or the data embedded in a
// self-contained HTML file. Both answer the same questions with the same shapes.

export class ApiError extends Error {}

/** How long one request to the viewer's server may take (a large trace's analyses included). */
export const REQUEST_LIMIT_MS = 300_000;

export class ServerSource {
  constructor(base = "") {
    this.base = base;
    this.embedded = false;
  }
  async get(path, params = {}) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v == null) continue;
      qs.set(k, Array.isArray(v) ? v.join(",") : String(v));
    }
    const url = this.base + path + (qs.toString() ? "?" + qs.toString() : "");
    // a request that never settles (a stalled connection) would hold up what waits for it,
    // such as the next check of a live recording: each ends within REQUEST_LIMIT_MS
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), REQUEST_LIMIT_MS);
    let res, body;
    try {
      try {
        res = await fetch(url, { cache: "no-store", signal: abort.signal });
      } catch (err) {
        if (abort.signal.aborted) throw new ApiError(`error: the viewer's server did not answer ${path} within ${REQUEST_LIMIT_MS / 1000} s`);
        throw new ApiError("error: the viewer's server does not answer (was `orchestrace view` stopped?)");
      }
      try {
        body = await res.json();
      } catch (err) {
        if (abort.signal.aborted) throw new ApiError(`error: the viewer's server did not answer ${path} within ${REQUEST_LIMIT_MS / 1000} s`);
        throw new ApiError(`error: the server sent an unreadable answer to ${path} (HTTP ${res.status})`);
      }
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || (body && body.error && res.status >= 400)) throw new ApiError(body.error || `error: HTTP ${res.status}`);
    return body;
  }
  meta() { return this.get("/api/meta"); }
  version() { return this.get("/api/version"); }
  window(v, p) { return this.get("/api/window", { v, ...p }); }
  event(v, i, offset = 0) { return this.get("/api/event", { v, i, offset }); }
  critical(v) { return this.get("/api/critical", { v }); }
  markers(v) { return this.get("/api/markers", { v }); }
  overlay(v, kind, unit) { return this.get("/api/overlay", { v, kind, unit }); }
  graph(v, p) { return this.get("/api/graph", { v, ...p }); }
  diff() { return this.get("/api/diff"); }
}

const CONTENT_PAGE = 65536;

/** The same API over a bundle embedded in the page (orchestrace view --html). */
export class EmbeddedSource {
  constructor(bundle) {
    this.bundle = bundle;
    this.embedded = true;
    this._text = {};
    this._adj = {};
  }
  async meta() { return this.bundle.meta; }
  async version() { return { version: this.bundle.meta.version, error: null }; }
  _view(v) {
    const view = this.bundle.views[v || "a"];
    if (!view) throw new ApiError(`error: no trace ${v}`);
    return view;
  }
  _types(view, types) {
    if (types == null) return null;
    const names = this.bundle.meta.views[0].summary.types;
    const set = new Set();
    for (const t of types) { const k = names.indexOf(t); if (k >= 0) set.add(k); }
    return set;
  }
  _textOf(v) {
    if (!this._text[v]) {
      const ev = this._view(v).events;
      const names = this.bundle.meta.views[0].summary.types;
      this._text[v] = ev.id.map((id, i) =>
        [id, ev.agent[i], names[ev.type[i]], ev.tool[i] || "", ev.role[i] || "", ev.content[i] || ""].join("\u001f").toLowerCase());
    }
    return this._text[v];
  }
  _match(v, p) {
    const view = this._view(v);
    const ev = view.events;
    const n = ev.t.length;
    const laneSet = p.lanes == null ? null : new Set(p.lanes);
    const typeSet = this._types(view, p.types);
    const q = p.q ? p.q.toLowerCase() : null;
    const text = q ? this._textOf(v) : null;
    const t0 = p.t0 ?? -Infinity, t1 = p.t1 ?? Infinity;
    let statusOf = null;
    if (p.subset) {
      const diff = this.bundle.diff;
      const side = diff && (v === "b" ? diff.side_b : diff.side_a);
      const want = diff ? diff.statuses.indexOf(p.subset) : -1;
      statusOf = new Set();
      if (side) side.idx.forEach((i, k) => { if (side.status[k] === want) statusOf.add(i); });
    }
    const out = [];
    for (let i = 0; i < n; i++) {
      const t = ev.t[i];
      if (t > t1 || t + ev.dur[i] < t0) continue;
      if (laneSet && !laneSet.has(ev.lane[i])) continue;
      if (typeSet && !typeSet.has(ev.type[i])) continue;
      if (q && !text[i].includes(q)) continue;
      if (statusOf && !statusOf.has(i)) continue;
      out.push(i);
    }
    return out;
  }
  async window(v, p) {
    const view = this._view(v);
    const ev = view.events;
    const px = Math.max(1, Math.min(p.px || 1000, 20000));
    const hit = this._match(v, p);
    const rowOf = new Map();
    if (p.lanes && p.rows) p.lanes.forEach((l, k) => rowOf.set(l, p.rows[k]));
    const span = Math.max(p.t1 - p.t0, 1e-12);
    const best = new Map();
    for (const i of hit) {
      const row = rowOf.size ? rowOf.get(ev.lane[i]) : ev.lane[i];
      const col = Math.min(px - 1, Math.max(0, Math.floor(((ev.t[i] - p.t0) / span) * px)));
      const key = row * px + col;
      const cur = best.get(key);
      if (!cur) best.set(key, { i, row, count: 1 });
      else {
        cur.count += 1;
        if (ev.dur[i] > ev.dur[cur.i]) cur.i = i;
      }
    }
    const kept = [...best.values()].sort((x, y) => x.i - y.i);
    const idx = kept.map((k) => k.i);
    const out = {
      t0: p.t0, t1: p.t1, px, total: hit.length, idx,
      t: idx.map((i) => ev.t[i]), dur: idx.map((i) => ev.dur[i]), type: idx.map((i) => ev.type[i]),
      lane: idx.map((i) => ev.lane[i]), row: kept.map((k) => k.row), count: kept.map((k) => k.count),
      edges: idx.length <= 4000 ? this._edgesAmong(v, idx) : null,
    };
    if (p.overlay) {
      const ov = view.overlays[overlayKey(p.overlay, p.unit)];
      out.value = idx.map((i) => (ov ? ov.values[i] : null));
    }
    return out;
  }
  _edgesAmong(v, idx) {
    const view = this._view(v);
    const e = view.edges, ev = view.events;
    const chosen = new Set(idx);
    const src = [], dst = [], type = [], ends = new Set();
    for (let k = 0; k < e.src.length; k++) {
      const s = e.src[k], d = e.dst[k];
      if (s < 0 || d < 0) continue;
      if (chosen.has(s) || chosen.has(d)) { src.push(s); dst.push(d); type.push(e.type[k]); ends.add(s); ends.add(d); }
    }
    const endIdx = [...ends].sort((a, b) => a - b);
    return { src, dst, type, ends: { idx: endIdx, t: endIdx.map((i) => ev.t[i]), dur: endIdx.map((i) => ev.dur[i]), lane: endIdx.map((i) => ev.lane[i]) } };
  }
  _adjacency(v) {
    if (!this._adj[v]) {
      const e = this._view(v).edges;
      const ins = new Map(), outs = new Map();
      for (let k = 0; k < e.src.length; k++) {
        if (!ins.has(e.dst[k])) ins.set(e.dst[k], []);
        ins.get(e.dst[k]).push(k);
        if (!outs.has(e.src[k])) outs.set(e.src[k], []);
        outs.get(e.src[k]).push(k);
      }
      this._adj[v] = { ins, outs };
    }
    return this._adj[v];
  }
  async event(v, i, offset = 0) {
    const view = this._view(v);
    const ev = view.events;
    i = Number(i);
    if (!(i >= 0 && i < ev.t.length)) throw new ApiError(`error: no event at index ${i}`);
    const names = this.bundle.meta.views[0].summary.types;
    const edgeNames = this.bundle.meta.views[0].summary.edge_types;
    const { ins, outs } = this._adjacency(v);
    const e = view.edges;
    const edge = (k, other) => ({
      type: edgeNames[e.type[k]], idx: other, id: other >= 0 ? ev.id[other] : "?",
      agent: other >= 0 ? ev.agent[other] : null, event_type: other >= 0 ? names[ev.type[other]] : null,
    });
    // offsets and lengths in characters, as the server gives them (not UTF-16 units)
    const content = Array.from(ev.content[i] || "");
    const inK = ins.get(i) || [], outK = outs.get(i) || [];
    const diff = this.bundle.diff;
    let d = null;
    if (diff) {
      const side = v === "b" ? diff.side_b : diff.side_a;
      const k = side.idx.indexOf(i);
      d = k >= 0 ? { status: diff.statuses[side.status[k]], other: side.other[k], fields: side.fields[k] } : { status: "same", other: null, fields: null };
    }
    const crit = view.critical.idx;
    return {
      idx: i, id: ev.id[i], type: names[ev.type[i]], agent: ev.agent[i], role: ev.role[i], lane: ev.lane[i],
      t: ev.t[i], dur: ev.dur[i], end: ev.t[i] + ev.dur[i], from: ev.from[i], to: ev.to[i], tool: ev.tool[i],
      decision: ev.decision[i], step: ev.step[i], trusted: ev.trusted[i], tokens_in: ev.tokens_in[i],
      tokens_out: ev.tokens_out[i], cost: ev.cost[i], error: ev.error[i], content_ref: ev.content_ref[i],
      content: content.slice(offset, offset + CONTENT_PAGE).join(""), content_offset: offset,
      content_length: ev.content_length[i], content_cut: content.length, has_content: ev.content[i] != null,
      attrs: ev.attrs[i], attrs_length: ev.attrs_length[i],
      in: inK.slice(0, 200).map((k) => edge(k, e.src[k])), out: outK.slice(0, 200).map((k) => edge(k, e.dst[k])),
      n_in: inK.length, n_out: outK.length, on_critical_path: crit.includes(i), diff: d,
    };
  }
  async critical(v) { return this._view(v).critical; }
  async markers(v) { return this._view(v).markers; }
  async overlay(v, kind, unit) {
    const ov = this._view(v).overlays[overlayKey(kind, unit)];
    if (!ov) throw new ApiError(`error: the overlay ${kind} at unit ${unit || "agent"} is not in this file; open the trace with \`orchestrace view\` to compute it`);
    return ov.meta;
  }
  async graph(v, p) {
    const view = this._view(v);
    if (p.mode !== "events") return view.graph_agents;
    const ev = view.events;
    const names = this.bundle.meta.views[0].summary.types;
    const edgeNames = this.bundle.meta.views[0].summary.edge_types;
    const hit = this._match(v, p);
    const idx = hit.slice(0, p.limit || 300);
    const chosen = new Set(idx);
    const crit = new Set(view.critical.idx);
    const e = view.edges;
    const edges = [];
    for (let k = 0; k < e.src.length; k++) {
      if (chosen.has(e.src[k]) && chosen.has(e.dst[k])) edges.push({ src: e.src[k], dst: e.dst[k], type: edgeNames[e.type[k]], critical: false });
    }
    const c = view.critical.idx;
    return {
      mode: "events", total: hit.length,
      nodes: idx.map((i) => ({ idx: i, label: ev.id[i], type: names[ev.type[i]], lane: ev.lane[i], critical: crit.has(i) })),
      edges, critical_pairs: c.slice(1).map((b, k) => [c[k], b]),
    };
  }
  async diff() {
    if (!this.bundle.diff) throw new ApiError("error: no second trace to compare");
    return this.bundle.diff;
  }
}

export function overlayKey(kind, unit) {
  return `${kind}|${unit || ""}`;
}
