// The viewer page: wires the data source, the timeline, the graph, the inspector and the
// controls together, and exposes its state as window.__orchestrace for tests and scripts.
import { ServerSource, EmbeddedSource } from "./api.js";
import { Timeline } from "./timeline.js";
import { GraphView } from "./graph.js";
import { renderInspector } from "./inspector.js";
import { el, append, clear, short, fmtTime, fmtNum, cpLength, debounce, overlayColour, TYPE_COLOURS, DIFF_COLOURS } from "./util.js";

const exposed = {
  ready: false, error: null, embedded: false, summary: null, lanes: [], rows: [],
  visibleEvents: 0, visibleIdx: [], windowTotal: 0, criticalPath: null, selected: null,
  diff: null, graph: null, markers: null, overlay: null, firstRenderMs: null, paints: 0,
  filters: null, version: 0,
};
window.__orchestrace = exposed;

const S = {
  src: null, meta: null, diff: null, diffMode: "merged", groupBy: "tree", collapsed: new Set(),
  filters: { agent: "", role: "", types: null, q: "" }, overlay: null, graphMode: "auto",
  critical: {}, markers: {}, selected: null, displayLanes: [], rows: [], laneRow: {},
  windows: {}, diffStatus: {}, started: performance.now(),
};

const $ = (id) => document.getElementById(id);

function banner(text, kind = "error") {
  const b = $("banner");
  if (!text) { b.hidden = true; clear(b); return; }
  b.hidden = false;
  b.className = "banner " + kind;
  clear(b).append(text);
  if (kind === "error") exposed.error = text;
}

function views() { return S.meta.views; }
function view(v) { return views().find((x) => x.key === v); }
function primary() { return S.diff ? (S.diffMode === "a" ? "a" : "b") : "a"; }
function layers() {
  if (!S.diff) return [{ v: "a" }];
  if (S.diffMode === "merged") return [{ v: "b" }, { v: "a", subset: "disappeared", ghost: true }];
  return [{ v: S.diffMode }];
}

// ------------------------------------------------------------------ lanes and rows
function buildDisplayLanes() {
  const byName = (lanes) => new Map(lanes.map((l) => [l.name, l]));
  let out;
  if (!S.diff || S.diffMode !== "merged") {
    const v = S.diff ? S.diffMode : "a";
    out = view(v).lanes.map((l) => ({ name: l.name, role: l.role, depth: l.depth, parentName: l.parent >= 0 ? view(v).lanes[l.parent].name : null, a: v === "a" ? l.i : -1, b: v === "b" ? l.i : -1, n: l.n }));
  } else {
    const la = view("a").lanes, lb = view("b").lanes;
    const ma = byName(la), mb = byName(lb);
    out = lb.map((l) => ({ name: l.name, role: l.role, depth: l.depth, parentName: l.parent >= 0 ? lb[l.parent].name : null, a: ma.has(l.name) ? ma.get(l.name).i : -1, b: l.i, n: l.n }));
    for (const l of la) if (!mb.has(l.name)) out.push({ name: l.name, role: l.role, depth: l.depth, parentName: l.parent >= 0 ? la[l.parent].name : null, a: l.i, b: -1, n: l.n });
  }
  S.displayLanes = out;
}

function laneVisible(l) {
  const f = S.filters;
  if (f.agent && !l.name.toLowerCase().includes(f.agent.toLowerCase())) return false;
  if (f.role && l.role !== f.role) return false;
  return true;
}

function buildRows() {
  const rows = [];
  const rowOfDisplay = new Array(S.displayLanes.length).fill(-1);
  const index = new Map(S.displayLanes.map((l, i) => [l.name, i]));
  if (S.groupBy === "role") {
    const groups = new Map();
    S.displayLanes.forEach((l, i) => { if (laneVisible(l)) { if (!groups.has(l.role)) groups.set(l.role, []); groups.get(l.role).push(i); } });
    for (const [role, members] of groups) {
      const key = "role:" + role;
      const collapsed = S.collapsed.has(key);
      const gr = rows.length;
      rows.push({ key, kind: "group", label: `${role} (${members.length})`, depth: 0, collapsible: true, collapsed, hidden: members.length });
      for (const i of members) {
        if (collapsed) rowOfDisplay[i] = gr;
        else { rowOfDisplay[i] = rows.length; rows.push({ key: "lane:" + S.displayLanes[i].name, kind: "lane", label: S.displayLanes[i].name, role: S.displayLanes[i].role, depth: 1, lane: i }); }
      }
    }
  } else {
    const children = new Map();
    S.displayLanes.forEach((l, i) => { const p = l.parentName != null && index.has(l.parentName) ? index.get(l.parentName) : -1; if (!children.has(p)) children.set(p, []); children.get(p).push(i); });
    const countBelow = (i) => (children.get(i) || []).reduce((s, c) => s + 1 + countBelow(c), 0);
    const walk = (i, depth, collapsedRow) => {
      const l = S.displayLanes[i];
      let myRow = collapsedRow;
      if (collapsedRow < 0 && laneVisible(l)) {
        const key = "lane:" + l.name;
        const kids = children.get(i) || [];
        const collapsed = kids.length > 0 && S.collapsed.has(key);
        myRow = rows.length;
        rows.push({ key, kind: "lane", label: l.name, role: l.role, depth, lane: i, collapsible: kids.length > 0, collapsed, hidden: collapsed ? countBelow(i) : 0 });
        rowOfDisplay[i] = myRow;
        for (const c of kids) walk(c, depth + 1, collapsed ? myRow : -1);
        return;
      }
      if (collapsedRow >= 0) rowOfDisplay[i] = collapsedRow;
      for (const c of children.get(i) || []) walk(c, collapsedRow >= 0 ? depth : depth, collapsedRow);
    };
    const seen = new Set();
    for (const r of children.get(-1) || []) { walk(r, 0, -1); seen.add(r); }
  }
  S.rows = rows;
  S.laneRow = { a: new Map(), b: new Map() };
  S.displayLanes.forEach((l, i) => {
    if (l.a >= 0) S.laneRow.a.set(l.a, rowOfDisplay[i]);
    if (l.b >= 0) S.laneRow.b.set(l.b, rowOfDisplay[i]);
  });
  timeline.setRows(rows);
  exposed.rows = rows.map((r) => ({ label: r.label, kind: r.kind, collapsed: !!r.collapsed, depth: r.depth }));
  exposed.lanes = S.displayLanes.map((l, i) => ({ name: l.name, role: l.role, row: rowOfDisplay[i], n: l.n }));
  placeCritical();
  placeMarkers();
}

function rowOf(v, lane) {
  const m = S.laneRow[v];
  const r = m ? m.get(lane) : undefined;
  return r == null ? -1 : r;
}

// ------------------------------------------------------------------ analyses
function placeCritical() {
  const cp = S.critical[primary()];
  if (!cp) { timeline.critical = null; return; }
  timeline.critical = { points: cp.idx.map((i, k) => ({ t: cp.t[k], dur: cp.dur[k], row: rowOf(primary(), cp.lane[k]) })) };
}

function placeMarkers() {
  const out = [];
  for (const v of new Set(layers().map((l) => l.v))) {
    const m = S.markers[v];
    if (!m) continue;
    for (const it of m.items) out.push({ ...it, row: rowOf(v, it.lane) });
  }
  timeline.markers = out;
}

async function loadAnalyses() {
  const keys = views().map((v) => v.key);
  const [crit, marks] = await Promise.all([
    Promise.all(keys.map((k) => S.src.critical(k))),
    Promise.all(keys.map((k) => S.src.markers(k))),
  ]);
  keys.forEach((k, i) => { S.critical[k] = crit[i]; S.markers[k] = marks[i]; });
  if (S.meta.diff) {
    S.diff = await S.src.diff();
    S.diffStatus = {};
    for (const [v, side] of [["a", S.diff.side_a], ["b", S.diff.side_b]]) {
      const m = new Map();
      side.idx.forEach((i, k) => m.set(i, S.diff.statuses[side.status[k]]));
      S.diffStatus[v] = m;
    }
  } else S.diffStatus = {};
  // the timeline outlines what changed, appeared or was retimed from this map
  timeline.diffStatus = S.diffStatus;
}

// ------------------------------------------------------------------ summary header
function renderSummary() {
  const s = view(primary()).summary;
  const cp = S.critical[primary()] || { idx: [], pending: true };
  const box = clear($("summary"));
  const item = (k, v, id) => el("span", { class: "stat", id }, el("span", { class: "k" }, k), " ", el("span", { class: "v" }, v));
  append(box, [
    el("span", { class: "trace-id", title: s.source }, short(s.trace_id, 48)),
    item("task", short(s.task_id, 30)),
    s.system ? item("system", short(s.system, 20)) : null,
    s.topology ? item("topology", s.topology) : null,
    item("events", fmtNum(s.n_events)),
    item("agents", fmtNum(s.n_agents ?? s.n_lanes)),
    item("makespan", fmtTime(s.t_end - s.t_start)),
    item("tokens", fmtNum(s.tokens)),
    s.cost ? item("cost", fmtNum(s.cost)) : null,
    ...Object.entries(s.rewards || {}).slice(0, 4).map(([k, v]) => item("reward " + short(k, 16), fmtNum(v))),
    s.partial ? el("span", { class: "stat partial" }, "recording (partial)") : null,
  ]);
  const cbox = clear($("critical-stats"));
  if (cp.pending) cbox.append(el("span", { class: "cp-title" }, "critical path"), " ", el("span", { class: "muted" }, "computing\u2026"));
  else if (cp.error) cbox.append(el("span", { class: "muted" }, short(cp.error, 200)));
  else append(cbox, [
    el("span", { class: "cp-title" }, "critical path"),
    item("length", fmtTime(cp.length), "cp-length"),
    item("work", fmtTime(cp.work), "cp-work"),
    item("speedup", cp.speedup == null ? "-" : cp.speedup.toFixed(2) + "\u00d7", "cp-speedup"),
    item("Critical Steps", cp.critical_steps == null ? "-" : `${fmtNum(cp.critical_steps)} of ${fmtNum(cp.total_steps)} steps`, "cp-steps"),
    item("events on path", fmtNum(cp.idx.length)),
  ]);
  const notes = [];
  for (const v of views()) {
    if (v.summary.note) notes.push(v.summary.note);
    if (v.summary.n_problems) notes.push(`${v.summary.trace_id}: ${v.summary.n_problems} problem(s) found by the checks, e.g. ${v.summary.problems[0]}`);
  }
  const nb = clear($("notes"));
  nb.hidden = !notes.length;
  for (const n of notes.slice(0, 3)) nb.append(el("div", null, short(n, 400)));
  exposed.summary = s;
  exposed.criticalPath = { n: cp.idx ? cp.idx.length : 0, idx: cp.idx ? cp.idx.slice(0, 5000) : [], length: cp.length, work: cp.work, speedup: cp.speedup, critical_steps: cp.critical_steps, total_steps: cp.total_steps, error: cp.error, shown: 0 };
}

function renderDiffBar() {
  const box = clear($("diff-bar"));
  if (!S.diff) { box.hidden = true; exposed.diff = null; return; }
  box.hidden = false;
  const c = S.diff.counts;
  const sw = (k) => el("span", { class: "swatch", "data-status": k });
  box.append(
    el("strong", null, "fork diff"), " ",
    el("span", { class: "muted" }, `${short(S.diff.a.trace_id, 30)} \u2192 ${short(S.diff.b.trace_id, 30)}`), " ",
    sw("changed"), `changed ${c.changed}`, " ", sw("appeared"), `appeared ${c.appeared}`, " ",
    sw("disappeared"), `disappeared ${c.disappeared}`, " ", sw("retimed"), `retimed ${c.retimed}`, " ",
    el("span", { class: "muted" }, `(matched by ${S.diff.matched_by})`),
  );
  for (const el_ of box.querySelectorAll(".swatch")) el_.style.background = DIFF_COLOURS[el_.dataset.status];
  exposed.diff = { counts: c, mode: S.diffMode, marked: 0, ghosts: 0 };
}

// ------------------------------------------------------------------ controls
function renderControls() {
  const box = clear($("controls"));
  const s = view(primary()).summary;
  const opt = (value, label, sel) => el("option", { value, selected: sel }, label);
  const group = el("select", { id: "group-by", title: "group lanes", onchange: (e) => { S.groupBy = e.target.value; buildRows(); refresh(); } },
    opt("tree", "spawn tree", S.groupBy === "tree"), opt("role", "by role", S.groupBy === "role"));
  const agent = el("input", { id: "filter-agent", type: "search", placeholder: "agent\u2026", value: S.filters.agent, size: 10 });
  agent.addEventListener("input", debounce(() => { S.filters.agent = agent.value; exposeFilters(); buildRows(); refresh(); }, 200));
  const roles = el("select", { id: "filter-role", onchange: (e) => { S.filters.role = e.target.value; exposeFilters(); buildRows(); refresh(); } },
    opt("", "all roles", !S.filters.role), ...s.roles.map((r) => opt(r, short(r, 24), S.filters.role === r)));
  const typesBox = el("details", { class: "types" }, el("summary", null, "event types"));
  s.types.forEach((t, k) => {
    if (!s.type_counts[k] && !(S.diff && view("a").summary.type_counts[k])) return;
    const cb = el("input", { type: "checkbox", value: t, checked: !S.filters.types || S.filters.types.has(t) });
    cb.addEventListener("change", () => {
      const all = [...typesBox.querySelectorAll("input")];
      const on = all.filter((x) => x.checked).map((x) => x.value);
      S.filters.types = on.length === all.length ? null : new Set(on);
      exposeFilters();
      refresh();
    });
    const sw = el("span", { class: "swatch" });
    sw.style.background = TYPE_COLOURS[t] || "#888";
    typesBox.append(el("label", null, cb, sw, `${t} (${fmtNum(s.type_counts[k])})`));
  });
  const search = el("input", { id: "search", type: "search", placeholder: "search text\u2026", value: S.filters.q, size: 14 });
  search.addEventListener("input", debounce(() => { S.filters.q = search.value; exposeFilters(); refresh(); updateGraphSoon(); }, 250));
  const overlays = el("select", { id: "overlay", onchange: (e) => setOverlay(e.target.value, $("unit").value) },
    opt("", "colour: event type", !S.overlay),
    ...S.meta.overlays.map((k) => opt(k, overlayName(k), S.overlay && S.overlay.kind === k)));
  const unit = el("select", { id: "unit", title: "credit unit", onchange: (e) => S.overlay && setOverlay(S.overlay.kind, e.target.value) },
    ...S.meta.units.map((u) => opt(u, "unit: " + u, (S.overlay ? S.overlay.unit : "agent") === u)));
  const graphMode = el("select", { id: "graph-mode", onchange: (e) => { S.graphMode = e.target.value; updateGraph(); } },
    opt("auto", "graph: auto", S.graphMode === "auto"), opt("agents", "graph: agents", S.graphMode === "agents"), opt("events", "graph: events in view", S.graphMode === "events"));
  const edges = el("label", null, el("input", { type: "checkbox", id: "show-edges", checked: timeline.showEdges, onchange: (e) => { timeline.showEdges = e.target.checked; timeline.draw(); } }), "edges");
  const crit = el("label", null, el("input", { type: "checkbox", id: "show-critical", checked: timeline.showCritical, onchange: (e) => { timeline.showCritical = e.target.checked; timeline.draw(); } }), "critical path");
  const fit = el("button", { id: "fit", onclick: () => fitView() }, "fit");
  const parts = [group, agent, roles, typesBox, search, overlays, unit, graphMode, edges, crit, fit];
  if (S.diff) {
    parts.unshift(el("select", { id: "diff-mode", onchange: (e) => { S.diffMode = e.target.value; fitView(); rebuild(); } },
      opt("merged", "diff: merged (fork + what disappeared)", S.diffMode === "merged"), opt("a", "diff: original only", S.diffMode === "a"), opt("b", "diff: fork only", S.diffMode === "b")));
  }
  box.append(...parts);
  exposeFilters();
}

function exposeFilters() {
  exposed.filters = { ...S.filters, types: S.filters.types ? [...S.filters.types] : null };
}

/** Show the whole of the trace(s) on screen: the time range of what the diff mode shows. */
function fitView() {
  timeline.setDomain(...fullRange());
  timeline.resetZoom();
}

function overlayName(k) {
  return { "credit:file": "colour: credit (file)", "credit:uniform": "colour: credit (uniform)", "credit:discounted": "colour: credit (discounted)", "reward:process": "colour: process reward", "reward:message": "colour: message signal" }[k] || k;
}

async function setOverlay(kind, unit) {
  const sel = $("overlay");
  if (sel) sel.value = kind || "";
  const current = overlayRequest();
  if (!kind) { S.overlay = null; timeline.overlay = null; renderLegend(); refresh(); exposed.overlay = null; return; }
  try {
    const u = kind === "credit:uniform" || kind === "credit:discounted" ? unit : null;
    const meta = await S.src.overlay(primary(), kind, u);
    if (!current()) return;
    S.overlay = { kind, unit: u, meta };
    timeline.overlay = { min: meta.min, max: meta.max };
    exposed.overlay = { kind, unit: meta.unit, n: meta.n, min: meta.min, max: meta.max, label: meta.label };
    banner(null);
  } catch (err) {
    if (!current()) return;
    banner(err.message);
    S.overlay = null; timeline.overlay = null;
  }
  renderLegend();
  refresh();
}

function renderLegend() {
  const box = clear($("legend"));
  if (S.overlay) {
    const m = S.overlay.meta;
    const bar = el("span", { class: "scale" });
    for (let k = 0; k <= 10; k++) { const c = el("span", { class: "cell" }); c.style.background = overlayColour(m.min + (m.max - m.min) * k / 10, m.min, m.max); bar.append(c); }
    box.append(el("strong", null, short(m.label, 60)), " ", fmtNum(m.min), bar, fmtNum(m.max), el("span", { class: "muted" }, ` ${fmtNum(m.n)} events scored${m.max > m.min ? "" : ", all " + fmtNum(m.min)}; grey: none`));
  } else {
    for (const [t, c] of Object.entries(TYPE_COLOURS)) { const sw = el("span", { class: "swatch" }); sw.style.background = c; box.append(el("span", { class: "leg" }, sw, t)); }
  }
  box.append(el("span", { class: "leg" }, el("span", { class: "cp-line" }), "critical path"), el("span", { class: "leg mk-failure" }, "\u25bc failure mode"), el("span", { class: "leg mk-safety" }, "\u25c6 safety event"), el("span", { class: "leg mk-error" }, "\u2715 failed"));
}

// ------------------------------------------------------------------ windows
function fullRange() {
  let t0 = Infinity, t1 = -Infinity;
  // the traces on screen: both in the merged diff, one in "original only" / "fork only"
  const shown = S.diff && S.diffMode !== "merged" ? [view(S.diffMode)] : views();
  for (const v of shown) { t0 = Math.min(t0, v.summary.t_start); t1 = Math.max(t1, v.summary.t_end); }
  if (!isFinite(t0)) return [0, 1];
  return [t0, t1 > t0 ? t1 : t0 + 1];
}

// ------------------------------------------------------------------ latest request wins
// Each kind of request (the window of events, the graph, the overlay, the selected event) is
// asked for again as the user acts; answers can arrive in any order. ``latest()`` gives a
// function that starts a request and returns a test of whether it is still the latest of its
// kind: an answer to an older one is dropped instead of replacing what was asked for since.
function latest() {
  let n = 0;
  return () => { const k = ++n; return () => k === n; };
}
const windowRequest = latest(), graphRequest = latest(), overlayRequest = latest(), selectRequest = latest();

async function fetchWindow() {
  if (!S.meta || !S.laneRow.a) return;
  const current = windowRequest();
  const [t0, t1] = timeline.visibleTime();
  const [r0, r1] = timeline.visibleRows();
  const px = Math.max(50, Math.round(timeline.width / 2));
  const ls = layers();
  try {
    const results = await Promise.all(ls.map((layer) => {
      const lanes = [], rows = [];
      for (const [lane, row] of S.laneRow[layer.v]) if (row >= r0 && row <= r1) { lanes.push(lane); rows.push(row); }
      return S.src.window(layer.v, {
        t0, t1, px, lanes, rows, types: S.filters.types ? [...S.filters.types] : null, q: S.filters.q || null,
        subset: layer.subset || null, overlay: S.overlay && !layer.ghost ? S.overlay.kind : null, unit: S.overlay ? S.overlay.unit : null,
      });
    }));
    if (!current()) return;
    timeline.layers = ls.map((layer, k) => ({ ...layer, data: results[k] }));
    S.windowArrived = true;
    timeline.draw();
    exposed.windowTotal = results.reduce((s, r) => s + (r.total || 0), 0);
    S.lastTotal = results[0].total;
    if (S.graphMode === "auto" || S.graphMode === "events") updateGraphSoon();
  } catch (err) {
    if (current()) banner(err.message);
  }
}
const refresh = debounce(fetchWindow, 40);

function onPaint(drawn) {
  exposed.paints++;
  let real = 0, marked = 0, ghosts = 0;
  const idx = [];
  for (const r of drawn) {
    if (r[6]) { ghosts++; continue; }
    real++;
    if (idx.length < 2000) idx.push(r[1]);
    const st = S.diffStatus[r[0]] && S.diffStatus[r[0]].get(r[1]);
    if (st && st !== "same" && st !== "retimed") marked++;
  }
  exposed.visibleEvents = real;
  exposed.visibleIdx = idx;
  if (exposed.criticalPath) exposed.criticalPath.shown = timeline.criticalShown;
  exposed.markers = { total: timeline.markers.length, shown: timeline.markersShown };
  if (exposed.diff) { exposed.diff.marked = marked; exposed.diff.ghosts = ghosts; }
  exposed.window = timeline.visibleTime();
  if (S.windowArrived && !exposed.ready) {
    // the first view: the first window of events the server sent, drawn
    exposed.firstRenderMs = performance.now();
    exposed.ready = true;
    document.body.dataset.ready = "1";
  }
}


// ------------------------------------------------------------------ graph
let graphTimer = null;
function updateGraphSoon() { clearTimeout(graphTimer); graphTimer = setTimeout(updateGraph, 250); }
async function updateGraph() {
  if (!S.meta) return;
  // e.g. a window's events graph asked for before the user chose the agents graph
  const current = graphRequest();
  const [t0, t1] = timeline.visibleTime();
  const mode = S.graphMode === "auto" ? ((S.lastTotal ?? Infinity) <= 250 ? "events" : "agents") : S.graphMode;
  try {
    const ask = { mode, t0, t1, types: S.filters.types ? [...S.filters.types] : null, q: S.filters.q || null, limit: 300 };
    const data = await S.src.graph(primary(), ask);
    if (!current()) return;
    const named = (d, v) => { if (d.mode === "events") for (const n of d.nodes) { n.id = n.label; n.agent = (view(v).lanes[n.lane] || {}).name || ""; n.v = v; } return d; };
    named(data, primary());
    let ghosts = null;
    if (mode === "events" && S.diff && S.diffMode === "merged" && S.diffStatus.a) {
      // what the fork lost: the original's disappeared events of this window, drawn as ghosts
      const orig = named(await S.src.graph("a", ask), "a");
      if (!current()) return;
      const gone = new Set(orig.nodes.filter((n) => S.diffStatus.a.get(n.idx) === "disappeared").map((n) => n.idx));
      ghosts = { nodes: orig.nodes.filter((n) => gone.has(n.idx)), edges: orig.edges.filter((e) => gone.has(e.src) && gone.has(e.dst)) };
    }
    const sel = S.selected ? { v: S.selected.v, idx: S.selected.idx, lane: S.selected.v === primary() && S.selected.detail ? S.selected.detail.lane : -1 } : null;
    const stats = graphView.render(data, { selected: sel, diffStatus: S.diffStatus[primary()], ghosts });
    $("graph-title").textContent = mode === "agents" ? `interaction graph: ${fmtNum(stats.nodes)} agents` + (graphView.hiddenTools ? ` (${graphView.hiddenTools} tools not drawn)` : "") : `interaction graph: ${fmtNum(data.nodes.length)} of ${fmtNum(data.total)} events in view` + (stats.ghosts ? `, ${fmtNum(stats.ghosts)} disappeared (dashed)` : "") + (stats.fits ? "" : " \u2014 drag to pan, wheel to zoom");
    exposed.graph = { mode, ...stats };
  } catch (err) {
    if (current()) banner(err.message);
  }
}

// ------------------------------------------------------------------ selection
async function select(v, idx, fromCounterpart = false) {
  if (v == null) v = S.selected ? S.selected.v : primary();
  if (fromCounterpart) v = v === "a" ? "b" : "a";
  const current = selectRequest();
  try {
    const detail = await S.src.event(v, idx);
    if (!current()) return;
    S.selected = { v, idx, detail };
    timeline.selected = { v, idx };
    const ov = S.overlay && v === primary() ? await overlayValueOf(v, idx) : null;
    const hooks = {
      onJump: (vv, i, cp) => select(vv, i, cp),
      onMore: async (offset) => {
        let more;
        try {
          more = await S.src.event(v, idx, offset);
        } catch (err) {
          banner(err.message);
          return;
        }
        if (!S.selected || S.selected.detail !== detail) return;  // another event was selected since
        // a second click before the first answer: only the answer that continues the text
        if (offset !== detail.content_offset + cpLength(detail.content)) return;
        detail.content += more.content;
        renderInspector($("inspector"), detail, hooks);
      },
      overlayValue: ov,
      overlayLabel: S.overlay ? S.overlay.meta.label : null,
    };
    renderInspector($("inspector"), detail, hooks);
    const row = rowOf(v, detail.lane);
    if (row >= 0) timeline.scrollToRow(row);
    const [t0, t1] = timeline.visibleTime();
    if (detail.t > t1 || detail.end < t0) {
      const span = t1 - t0;
      timeline.zoomTo(detail.t - span / 2, detail.t + span / 2);
    }
    timeline.draw();
    exposed.selected = { v, idx, id: detail.id, type: detail.type, agent: detail.agent, role: detail.role, t: detail.t, dur: detail.dur, content_length: detail.content_length, diff: detail.diff, n_in: detail.n_in, n_out: detail.n_out };
    if (S.graphMode !== "agents") updateGraphSoon();
  } catch (err) {
    if (current()) banner(err.message);
  }
}

async function overlayValueOf(v, idx) {
  const w = timeline.layers.find((l) => l.v === v && !l.ghost);
  if (w && w.data && w.data.value) { const k = w.data.idx.indexOf(idx); if (k >= 0) return w.data.value[k]; }
  return null;
}

// ------------------------------------------------------------------ boot
const timeline = new Timeline($("timeline"), {
  onView: () => refresh(),
  onPaint,
  rowOf,
  onSelect: (v, idx) => select(v, idx),
  onHover: (h) => { $("hover").textContent = h ? `${h.v === "a" && S.diff ? "original" : S.diff ? "fork" : ""} event #${h.idx}` : ""; },
  onRowClick: (row) => { if (row.collapsible) { if (S.collapsed.has(row.key)) S.collapsed.delete(row.key); else S.collapsed.add(row.key); buildRows(); refresh(); } },
});
const graphView = new GraphView($("graph"), {
  onNode: (n, agents) => {
    if (agents) { const row = rowOf(primary(), n.lane); if (row >= 0) { timeline.scrollToRow(row); timeline.draw(); } }
    else select(n.v || primary(), n.idx);
  },
});

async function rebuild() {
  buildDisplayLanes();
  buildRows();
  renderSummary();
  renderDiffBar();
  renderControls();
  renderLegend();
  refresh();
  updateGraphSoon();
}

async function load(keepZoom) {
  S.meta = await S.src.meta();
  exposed.version = S.meta.version;
  // the first window is asked for at once; the analyses (critical path, detections, diff)
  // arrive alongside and are drawn when they come
  S.critical = {};
  S.markers = {};
  const analyses = loadAnalyses();
  const [t0, t1] = fullRange();
  timeline.types = views()[0].summary.types;
  timeline.edgeTypes = views()[0].summary.edge_types;
  const before = timeline.visibleTime();
  const wasFit = !keepZoom || timeline.transform.k === 1;
  timeline.setDomain(t0, t1);
  if (!wasFit) timeline.zoomTo(before[0], before[1]);
  buildDisplayLanes();
  buildRows();
  renderSummary();
  renderControls();
  renderLegend();
  const first = fetchWindow();
  await analyses;
  await first;
  await rebuild();
  if (S.meta.error) banner(S.meta.error); else banner(null);
}

// one poll at a time: a poll that finds a new version reloads, and a reload can take longer
// than the poll interval (a large recording's analyses); a second reload started meanwhile
// would interleave with the first, whose late answers (an older version's critical path)
// would land in the newer view
// (every request of the server source ends within its time limit, so a poll always ends)
let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const v = await S.src.version();
    if (v.error) banner(v.error + " (showing the last version that could be read)");
    else if (exposed.error) { banner(null); exposed.error = null; }
    if (v.version !== exposed.version) await load(true);
  } catch (err) {
    banner(err.message);
  } finally {
    polling = false;
  }
}

async function main() {
  const data = document.getElementById("orchestrace-data");
  S.src = data ? new EmbeddedSource(JSON.parse(data.textContent)) : new ServerSource("");
  exposed.embedded = !!data;
  renderInspector($("inspector"), null, {});
  try {
    await load(false);
  } catch (err) {
    banner(err.message);
    exposed.ready = true;
    document.body.dataset.ready = "1";
    return;
  }
  if (!data && S.meta.live) setInterval(poll, 1500);
}

exposed.select = (v, idx) => select(v, idx);
exposed.zoomTo = (t0, t1) => timeline.zoomTo(t0, t1);
exposed.locate = (v, idx) => timeline.locate(v, idx);
exposed.setFilter = (f) => { Object.assign(S.filters, f); if (f.types) S.filters.types = new Set(f.types); buildRows(); renderControls(); refresh(); };
exposed.setDiffMode = (m) => { S.diffMode = m; fitView(); rebuild(); };
exposed.fit = () => fitView();
exposed.setOverlay = (kind, unit) => setOverlay(kind, unit || "agent");
exposed.setGroupBy = (g) => { S.groupBy = g; buildRows(); renderControls(); refresh(); };
exposed.toggleRow = (i) => { const row = S.rows[i]; if (row && row.collapsible) { if (S.collapsed.has(row.key)) S.collapsed.delete(row.key); else S.collapsed.add(row.key); buildRows(); refresh(); } };
exposed.setGraphMode = (m) => { S.graphMode = m; updateGraph(); };

main();
