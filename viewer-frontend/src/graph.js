// The interaction graph: agents (spawn tree and the edges between their events) or the events
// of the current window, laid out in layers by dagre and drawn as SVG (text nodes only).
import dagre from "@dagrejs/dagre";
import { DIFF_COLOURS, EDGE_COLOURS, TYPE_COLOURS, clear, short } from "./util.js";

const NS = "http://www.w3.org/2000/svg";
// Below this scale the labels are too small to read: a larger graph is zoomed and panned instead.
const MIN_SCALE = 0.8;

function svg(tag, attrs) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) n.setAttribute(k, String(v));
  return n;
}

export class GraphView {
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.svg = svg("svg", { class: "graph-svg", role: "img", "aria-label": "interaction graph" });
    root.append(this.svg);
    this.data = null;
    this.scale = 1;
    this.offset = [0, 0];
    this.drag = null;
    // the pan and zoom the user chose are kept while the graph drawn stays the same one
    // (a refresh of the same window draws it again); a different graph is fitted anew
    this.key = null;
    this.moved = false;
    this.svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const f = Math.exp(-ev.deltaY * 0.0015);
      const r = this.svg.getBoundingClientRect();
      const mx = ev.clientX - r.left, my = ev.clientY - r.top;
      this.offset = [mx - (mx - this.offset[0]) * f, my - (my - this.offset[1]) * f];
      this.scale = Math.min(8, Math.max(0.05, this.scale * f));
      this.moved = true;
      this.applyTransform();
    }, { passive: false });
    this.svg.addEventListener("mousedown", (ev) => { this.drag = [ev.clientX, ev.clientY, ...this.offset]; });
    window.addEventListener("mouseup", () => { this.drag = null; });
    window.addEventListener("mousemove", (ev) => {
      if (!this.drag) return;
      this.offset = [this.drag[2] + ev.clientX - this.drag[0], this.drag[3] + ev.clientY - this.drag[1]];
      this.moved = true;
      this.applyTransform();
    });
  }

  applyTransform() {
    if (!isFinite(this.scale) || !isFinite(this.offset[0]) || !isFinite(this.offset[1])) return;
    if (this.g) this.g.setAttribute("transform", `translate(${this.offset[0]},${this.offset[1]}) scale(${this.scale})`);
  }

  render(data, { selected, diffStatus, ghosts } = {}) {
    this.data = data;
    clear(this.svg);
    const defs = svg("defs");
    for (const [name, colour] of Object.entries({ ...EDGE_COLOURS, critical: "#d9480f" })) {
      const m = svg("marker", { id: `arrow-${name}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
      m.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: colour }));
      defs.append(m);
    }
    this.svg.append(defs);
    const g = new dagre.graphlib.Graph({ multigraph: true });
    const agents = data.mode === "agents";
    g.setGraph({ rankdir: agents ? "TB" : "LR", nodesep: agents ? 18 : 14, ranksep: agents ? 40 : 28, marginx: 12, marginy: 12 });
    g.setDefaultEdgeLabel(() => ({}));
    // tools answer every agent that calls them: drawn as nodes they would tie the whole graph
    // together, so the agent graph leaves them out (their calls are on the timeline)
    const hidden = new Set(agents ? data.nodes.filter((n) => n.type === "tool").map((n) => n.idx) : []);
    this.hiddenTools = hidden.size;
    // event nodes are named by type and agent (ids, often long hashes, are in the tooltip and
    // the inspector); ghosts are the original's events that the fork lost
    const key = (n, ghost) => (ghost ? "g" : "") + String(n.idx);
    const addNode = (n, ghost) => {
      const label = agents ? short(n.label, 22) : short(`${n.type} \u00b7 ${n.agent || n.label}`, 26);
      g.setNode(key(n, ghost), { width: Math.max(44, label.length * 6.2 + 14), height: agents ? 34 : 22, label, n, ghost });
    };
    for (const n of data.nodes) if (!hidden.has(n.idx)) addNode(n, false);
    if (ghosts && !agents) for (const n of ghosts.nodes) addNode(n, true);
    const critPairs = new Set((data.critical_pairs || []).map(([a, b]) => `${a}-${b}`));
    let edges = data.edges.filter((e) => e.type !== "temporal");
    if (agents) {
      // one arrow per pair of agents: the most frequent edge type names its colour
      const merged = new Map();
      for (const e of edges) {
        const key = `${e.src}-${e.dst}`;
        const m = merged.get(key) || { src: e.src, dst: e.dst, count: 0, critical: false, byType: {} };
        m.count += e.count || 1;
        m.critical = m.critical || e.critical;
        m.byType[e.type] = (m.byType[e.type] || 0) + (e.count || 1);
        merged.set(key, m);
      }
      edges = [...merged.values()].map((m) => {
        const types = Object.entries(m.byType).sort((a, b) => b[1] - a[1]);
        return { ...m, type: types[0][0], label: types.map(([t, n]) => `${t} \u00d7${n}`).join(", ") };
      });
    }
    edges.forEach((e, k) => {
      if (!g.hasNode(String(e.src)) || !g.hasNode(String(e.dst)) || e.src === e.dst) return;
      g.setEdge(String(e.src), String(e.dst), { e, critical: e.critical || critPairs.has(`${e.src}-${e.dst}`) }, String(k));
    });
    if (ghosts && !agents) {
      ghosts.edges.forEach((e, k) => {
        if (e.src !== e.dst) g.setEdge("g" + e.src, "g" + e.dst, { e, critical: false, ghost: true }, "g" + k);
      });
    }
    this.empty = g.nodeCount() === 0;
    if (this.empty) {
      // nothing matches (a search, a filter, an empty time range): say so, lay out nothing
      const msg = svg("text", { x: 12, y: 22, class: "g-empty" });
      msg.textContent = data.mode === "events" ? "no events in view match" : "no agents to draw";
      this.g = null;
      this.scale = 1;
      this.offset = [0, 0];
      this.svg.append(msg);
      return { nodes: 0, edges: 0, criticalNodes: 0, criticalEdges: 0, ghosts: 0, diffMarked: {} };
    }
    dagre.layout(g);
    const root = svg("g");
    this.g = root;
    let criticalNodes = 0, criticalEdges = 0;
    for (const ed of g.edges()) {
      const info = g.edge(ed);
      const pts = info.points || [];
      if (!pts.length) continue;
      const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
      const colour = info.critical ? "#d9480f" : EDGE_COLOURS[info.e.type] || "#adb5bd";
      const path = svg("path", {
        d, fill: "none", stroke: colour, "stroke-width": info.critical ? 3 : Math.min(1 + Math.log2(info.e.count || 1) * 0.6, 4),
        "stroke-opacity": info.critical ? 0.95 : 0.6, "marker-end": `url(#arrow-${info.critical ? "critical" : info.e.type})`,
        class: "g-edge" + (info.critical ? " critical" : "") + (info.ghost ? " ghost" : ""), "data-type": info.e.type,
        "stroke-dasharray": info.ghost ? "4 3" : null,
      });
      const title = svg("title");
      title.textContent = info.e.label || `${info.e.type}${info.e.count ? " \u00d7" + info.e.count : ""}`;
      path.append(title);
      root.append(path);
      if (info.critical) criticalEdges++;
    }
    const diffMarked = {};
    let ghostCount = 0;
    for (const id of g.nodes()) {
      const nd = g.node(id);
      const n = nd.n;
      const status = nd.ghost ? "disappeared" : diffStatus && !agents ? diffStatus.get(n.idx) : null;
      const marked = status && status !== "same" ? status : null;
      if (marked) diffMarked[marked] = (diffMarked[marked] || 0) + 1;
      if (nd.ghost) ghostCount++;
      const grp = svg("g", { class: "g-node" + (n.critical && !nd.ghost ? " critical" : "") + (marked ? " diff-" + marked : "") + (nd.ghost ? " ghost" : ""), transform: `translate(${nd.x - nd.width / 2},${nd.y - nd.height / 2})`, "data-idx": n.idx });
      const fill = agents ? "#ffffff" : nd.ghost ? "#fff5f5" : TYPE_COLOURS[n.type] || "#ced4da";
      const isSel = selected && (agents ? selected.lane === n.lane : selected.idx === n.idx && (selected.v || "") === (n.v || selected.v || ""));
      // the box's own outline tells the critical path; the diff status (changed, appeared,
      // retimed, disappeared) is a coloured ring around it, the selection a black frame outside
      if (isSel) grp.append(svg("rect", { x: -7, y: -7, width: nd.width + 14, height: nd.height + 14, rx: 8, fill: "none", stroke: "#000", "stroke-width": 2, class: "g-sel" }));
      if (marked) grp.append(svg("rect", { x: -3.5, y: -3.5, width: nd.width + 7, height: nd.height + 7, rx: 6, fill: "none", stroke: DIFF_COLOURS[marked], "stroke-width": 3, "stroke-dasharray": nd.ghost ? "5 3" : null, class: "g-diff" }));
      grp.append(svg("rect", { width: nd.width, height: nd.height, rx: 4, fill, "fill-opacity": agents || nd.ghost ? 1 : 0.9,
        stroke: nd.ghost ? "#ffc9c9" : n.critical ? "#d9480f" : "#868e96", "stroke-width": n.critical && !nd.ghost ? 2.5 : 1, class: "g-box" }));
      const text = svg("text", { x: nd.width / 2, y: agents ? 14 : nd.height / 2 + 4, "text-anchor": "middle", class: agents ? "g-label" : nd.ghost ? "g-label small ghost" : "g-label small" });
      text.textContent = nd.label;
      grp.append(text);
      if (agents) {
        const sub = svg("text", { x: nd.width / 2, y: 27, "text-anchor": "middle", class: "g-sub" });
        sub.textContent = `${short(n.type, 14)} \u00b7 ${n.n}`;
        grp.append(sub);
      }
      const title = svg("title");
      title.textContent = agents ? `${n.label} (${n.type}), ${n.n} events` : `${n.id || n.label}: ${n.type} by ${n.agent || "?"}` + (marked ? ` (${marked}${nd.ghost ? " in the fork" : ""})` : "");
      grp.append(title);
      grp.addEventListener("click", (ev) => { ev.stopPropagation(); this.hooks.onNode(n, agents); });
      root.append(grp);
      if (n.critical) criticalNodes++;
    }
    this.svg.append(root);
    const gg = g.graph();
    const r = this.svg.getBoundingClientRect();
    const w = r.width || 600, h = r.height || 300;
    const gw = isFinite(gg.width) && gg.width > 0 ? gg.width : 1;
    const gh = isFinite(gg.height) && gg.height > 0 ? gg.height : 1;
    // fit the graph, but never shrink it below a readable size: the rest is reached by
    // dragging (pan) and the wheel (zoom); a graph that does not fit starts at its top left
    const drawn = `${data.mode}|${gw}x${gh}|` + data.nodes.map((n) => n.idx).join(",");
    if (drawn !== this.key || !this.moved) {
      this.scale = Math.max(MIN_SCALE, Math.min(1.2, w / gw, h / gh));
      const ox = gw * this.scale <= w ? (w - gw * this.scale) / 2 : 0;
      const oy = gh * this.scale <= h ? (h - gh * this.scale) / 2 : 0;
      this.offset = [ox, oy];
      this.moved = false;
    }
    this.key = drawn;
    this.fits = gw * this.scale <= w + 0.5 && gh * this.scale <= h + 0.5;
    this.applyTransform();
    return { nodes: g.nodeCount(), edges: g.edgeCount(), criticalNodes, criticalEdges, ghosts: ghostCount, diffMarked, scale: this.scale, fits: this.fits };
  }
}
