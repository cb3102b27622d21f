// The timeline: one swimlane row per agent (or collapsed group), events as bars by t/dur, drawn
// on a canvas; d3-zoom gives wheel zoom and drag pan along time; rows scroll vertically and only
// the rows on screen are asked for and drawn.
import { select } from "d3-selection";
import { zoom, zoomIdentity } from "d3-zoom";
import { scaleLinear } from "d3-scale";
import { TYPE_COLOURS, EDGE_COLOURS, DIFF_COLOURS, overlayColour, fmtTime, short } from "./util.js";

export const ROW_H = 22;
const LABEL_W = 230;
const AXIS_H = 26;

export class Timeline {
  constructor(root, hooks) {
    this.hooks = hooks;
    this.root = root;
    this.rows = [];
    this.layers = [];
    this.critical = null; // {points: [{t, dur, row}]}
    this.markers = [];
    this.selected = null;
    this.diffStatus = {};
    this.overlay = null;
    this.showEdges = true;
    this.showCritical = true;
    this.types = [];
    this.edgeTypes = [];
    this.domain = [0, 1];
    this.drawn = [];

    this.axis = document.createElement("canvas");
    this.axis.className = "tl-axis";
    this.scroller = document.createElement("div");
    this.scroller.className = "tl-scroller";
    this.spacer = document.createElement("div");
    this.spacer.className = "tl-spacer";
    this.stage = document.createElement("div");
    this.stage.className = "tl-stage";
    this.labels = document.createElement("canvas");
    this.labels.className = "tl-labels";
    this.canvas = document.createElement("canvas");
    this.canvas.className = "tl-canvas";
    this.canvas.setAttribute("aria-label", "timeline");
    this.stage.append(this.labels, this.canvas);
    this.scroller.append(this.stage, this.spacer);
    root.append(this.axis, this.scroller);

    this.transform = zoomIdentity;
    this.zoom = zoom()
      .scaleExtent([1, 1e9])
      .filter((ev) => (ev.type === "wheel" ? !ev.shiftKey : !ev.button))
      .on("zoom", (ev) => {
        this.transform = ev.transform;
        this.clampTransform();
        this.draw();
        this.hooks.onView();
      });
    select(this.canvas).call(this.zoom).on("dblclick.zoom", null);
    this.canvas.addEventListener("click", (ev) => this.onClick(ev));
    this.canvas.addEventListener("mousemove", (ev) => this.onHover(ev));
    this.labels.addEventListener("click", (ev) => this.onLabelClick(ev));
    this.labels.addEventListener("wheel", (ev) => { this.scroller.scrollTop += ev.deltaY; ev.preventDefault(); }, { passive: false });
    this.canvas.addEventListener("wheel", (ev) => { if (ev.shiftKey) { this.scroller.scrollTop += ev.deltaY || ev.deltaX; ev.preventDefault(); } }, { passive: false });
    this.scroller.addEventListener("scroll", () => { this.draw(); this.hooks.onView(); });
    new ResizeObserver(() => { this.resize(); this.hooks.onView(); }).observe(root);
    this.resize();
  }

  resize() {
    const w = Math.max(200, this.root.clientWidth);
    const h = Math.max(80, this.root.clientHeight - AXIS_H);
    this.width = w - LABEL_W;
    this.height = h;
    const dpr = window.devicePixelRatio || 1;
    for (const [c, cw, ch] of [[this.axis, w, AXIS_H], [this.labels, LABEL_W, h], [this.canvas, this.width, h]]) {
      c.width = Math.round(cw * dpr);
      c.height = Math.round(ch * dpr);
      c.style.width = cw + "px";
      c.style.height = ch + "px";
    }
    this.scroller.style.height = h + "px";
    this.stage.style.height = h + "px";
    this.zoom.extent([[0, 0], [this.width, h]]).translateExtent([[0, -Infinity], [this.width, Infinity]]);
    this.draw();
  }

  setDomain(t0, t1) {
    const pad = (t1 - t0) * 0.01 || 1;
    this.domain = [t0 - pad, t1 + pad];
  }

  base() {
    return scaleLinear().domain(this.domain).range([0, this.width]);
  }

  x() {
    return this.transform.rescaleX(this.base());
  }

  clampTransform() {
    const t = this.transform;
    const minX = this.width * (1 - t.k);
    if (t.x > 0 || t.x < minX) {
      this.transform = zoomIdentity.translate(Math.min(0, Math.max(minX, t.x)), 0).scale(t.k);
    }
  }

  /** Show [t0, t1]. */
  zoomTo(t0, t1) {
    const b = this.base();
    const span = Math.max(b(t1) - b(t0), 1e-9);
    const k = Math.max(1, this.width / span);
    const t = zoomIdentity.translate(-b(t0) * k, 0).scale(k);
    select(this.canvas).call(this.zoom.transform, t);
  }

  /** Show the whole domain. */
  resetZoom() {
    select(this.canvas).call(this.zoom.transform, zoomIdentity);
  }

  visibleTime() {
    const d = this.x().domain();
    return [d[0], d[1]];
  }

  visibleRows() {
    const top = this.scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_H) - 2);
    const last = Math.min(this.rows.length - 1, Math.ceil((top + this.height) / ROW_H) + 2);
    return [first, last];
  }

  setRows(rows) {
    this.rows = rows;
    this.spacer.style.height = rows.length * ROW_H + "px";
    this.draw();
  }

  scrollToRow(row) {
    const top = row * ROW_H;
    if (top < this.scroller.scrollTop || top > this.scroller.scrollTop + this.height - ROW_H) {
      this.scroller.scrollTop = Math.max(0, top - this.height / 3);
    }
  }

  rowY(row) {
    return row * ROW_H - this.scroller.scrollTop;
  }

  colourOf(layer, k) {
    const d = layer.data;
    if (this.overlay && d.value) return overlayColour(d.value[k], this.overlay.min, this.overlay.max);
    return TYPE_COLOURS[this.types[d.type[k]]] || "#868e96";
  }

  draw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.paint(); });
  }

  paint() {
    const dpr = window.devicePixelRatio || 1;
    const x = this.x();
    const [r0, r1] = this.visibleRows();
    // ---- labels
    const lc = this.labels.getContext("2d");
    lc.setTransform(dpr, 0, 0, dpr, 0, 0);
    lc.clearRect(0, 0, LABEL_W, this.height);
    lc.font = "12px system-ui, sans-serif";
    lc.textBaseline = "middle";
    for (let r = r0; r <= r1; r++) {
      const row = this.rows[r];
      if (!row) continue;
      const y = this.rowY(r);
      lc.fillStyle = row.kind === "group" ? "#e9ecef" : r % 2 ? "#f8f9fa" : "#ffffff";
      lc.fillRect(0, y, LABEL_W, ROW_H);
      const indent = 6 + row.depth * 12;
      lc.fillStyle = "#495057";
      if (row.collapsible) lc.fillText(row.collapsed ? "\u25b8" : "\u25be", indent, y + ROW_H / 2);
      lc.fillStyle = row.kind === "group" ? "#212529" : "#343a40";
      lc.font = row.kind === "group" ? "bold 12px system-ui, sans-serif" : "12px system-ui, sans-serif";
      const extra = row.collapsed && row.hidden ? ` (+${row.hidden})` : "";
      lc.fillText(short(row.label, 28) + extra, indent + 12, y + ROW_H / 2, LABEL_W - indent - 16);
      if (row.role && row.kind !== "group") {
        lc.fillStyle = "#868e96";
        lc.font = "10px system-ui, sans-serif";
        lc.textAlign = "right";
        lc.fillText(short(row.role, 12), LABEL_W - 4, y + ROW_H / 2);
        lc.textAlign = "left";
      }
    }
    // ---- axis
    const ac = this.axis.getContext("2d");
    const aw = this.width + LABEL_W;
    ac.setTransform(dpr, 0, 0, dpr, 0, 0);
    ac.clearRect(0, 0, aw, AXIS_H);
    ac.fillStyle = "#f1f3f5";
    ac.fillRect(0, 0, aw, AXIS_H);
    ac.fillStyle = "#495057";
    ac.font = "11px system-ui, sans-serif";
    ac.textBaseline = "top";
    ac.fillText("time (s)", 6, 7);
    const ticks = x.ticks(Math.max(2, Math.floor(this.width / 110)));
    const fmt = x.tickFormat(ticks.length);
    for (const t of ticks) {
      const px = LABEL_W + x(t);
      ac.fillRect(px, AXIS_H - 6, 1, 6);
      ac.fillText(fmt(t), px + 3, 7);
    }
    // ---- events
    const c = this.canvas.getContext("2d");
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, this.width, this.height);
    for (let r = r0; r <= r1; r++) {
      const row = this.rows[r];
      if (!row) continue;
      c.fillStyle = row.kind === "group" ? "#f1f3f5" : r % 2 ? "#f8f9fa" : "#ffffff";
      c.fillRect(0, this.rowY(r), this.width, ROW_H);
    }
    c.strokeStyle = "#dee2e6";
    c.beginPath();
    for (const t of ticks) { const px = Math.round(x(t)) + 0.5; c.moveTo(px, 0); c.lineTo(px, this.height); }
    c.stroke();
    const drawn = [];
    const outlines = [];
    for (const layer of this.layers) {
      const d = layer.data;
      if (!d) continue;
      const status = this.diffStatus[layer.v] || null;
      for (let k = 0; k < d.idx.length; k++) {
        const row = d.row[k];
        if (row < r0 || row > r1 || row < 0) continue;
        const x0 = x(d.t[k]);
        let w = x(d.t[k] + d.dur[k]) - x0;
        if (x0 > this.width || x0 + w < 0) continue;
        w = Math.max(w, 2);
        const y = this.rowY(row) + 4;
        const h = ROW_H - 8;
        if (layer.ghost) {
          c.fillStyle = "rgba(224,49,49,0.18)";
          c.fillRect(x0, y, w, h);
          c.setLineDash([4, 2]);
          c.strokeStyle = DIFF_COLOURS.disappeared;
          c.lineWidth = 2.5;
          c.strokeRect(x0 - 1, y - 2, w + 2, h + 4);
          c.setLineDash([]);
        } else {
          c.fillStyle = this.colourOf(layer, k);
          c.fillRect(x0, y, w, h);
          const st = status && status.get(d.idx[k]);
          if (st && st !== "same") outlines.push([st, x0, y, w, h]);
        }
        if (d.count[k] > 1 && w > 14) {
          c.fillStyle = "rgba(255,255,255,0.85)";
          c.font = "9px system-ui, sans-serif";
          c.fillText(String(d.count[k]), x0 + 2, y + h - 2, w - 3);
        }
        drawn.push([layer.v, d.idx[k], x0, y, w, h, layer.ghost ? 1 : 0]);
      }
    }
    // diff outlines last, so that no neighbouring bar covers them (retimed below the others)
    outlines.sort((p, q) => (p[0] === "retimed" ? 0 : 1) - (q[0] === "retimed" ? 0 : 1));
    for (const [st, x0, y, w, h] of outlines) {
      // a white rim under the coloured frame keeps it apart from a bar of a similar colour
      c.strokeStyle = "#ffffff";
      c.lineWidth = 4.5;
      c.strokeRect(x0 - 1, y - 2, w + 2, h + 4);
      c.strokeStyle = DIFF_COLOURS[st] || "#000";
      c.lineWidth = st === "retimed" ? 2 : 2.5;
      c.strokeRect(x0 - 1, y - 2, w + 2, h + 4);
    }
    this.drawn = drawn;
    // ---- edges among shown events
    if (this.showEdges) {
      for (const layer of this.layers) {
        const e = layer.data && layer.data.edges;
        if (!e || !e.ends || !e.ends.idx || layer.ghost) continue;
        const pos = new Map();
        e.ends.idx.forEach((i, k) => pos.set(i, [e.ends.t[k], e.ends.dur[k], this.hooks.rowOf(layer.v, e.ends.lane[k])]));
        c.lineWidth = 1;
        for (let k = 0; k < e.src.length; k++) {
          const a = pos.get(e.src[k]), b = pos.get(e.dst[k]);
          if (!a || !b || a[2] < 0 || b[2] < 0) continue;
          const et = this.edgeTypes[e.type[k]];
          if (et === "temporal") continue;
          const xa = x(a[0] + a[1]), ya = this.rowY(a[2]) + ROW_H / 2;
          const xb = x(b[0]), yb = this.rowY(b[2]) + ROW_H / 2;
          if ((ya < 0 && yb < 0) || (ya > this.height && yb > this.height)) continue;
          c.strokeStyle = EDGE_COLOURS[et] || "#adb5bd";
          c.globalAlpha = 0.55;
          c.beginPath();
          c.moveTo(xa, ya);
          const mx = (xa + xb) / 2;
          c.bezierCurveTo(mx, ya, mx, yb, xb, yb);
          c.stroke();
          c.globalAlpha = 1;
        }
      }
    }
    // ---- critical path
    if (this.showCritical && this.critical) {
      const pts = this.critical.points;
      c.strokeStyle = "#d9480f";
      c.lineWidth = 2.5;
      c.beginPath();
      let prev = null;
      let shown = 0;
      for (const p of pts) {
        if (p.row < 0) { prev = null; continue; }
        const y = this.rowY(p.row) + ROW_H / 2;
        const xa = x(p.t), xb = x(p.t + p.dur);
        if (xb < -50 && prev && prev[0] < -50) { prev = [xb, y]; continue; }
        if (prev) { c.moveTo(prev[0], prev[1]); c.lineTo(xa, y); }
        c.moveTo(xa, y);
        c.lineTo(Math.max(xb, xa + 2), y);
        prev = [Math.max(xb, xa + 2), y];
        if (xb >= 0 && xa <= this.width && y >= 0 && y <= this.height) shown++;
      }
      c.stroke();
      this.criticalShown = shown;
    } else this.criticalShown = 0;
    // ---- markers
    const glyph = { failure: ["\u25bc", "#c92a2a"], safety: ["\u25c6", "#862e9c"], error: ["\u2715", "#e03131"] };
    c.font = "11px system-ui, sans-serif";
    c.textBaseline = "top";
    let markersShown = 0;
    const taken = new Set();
    for (const m of this.markers) {
      if (m.row < r0 || m.row > r1 || m.row < 0) continue;
      const px = x(m.t);
      if (px < -10 || px > this.width + 10) continue;
      const slot = `${m.row}:${m.kind}:${Math.round(px / 8)}`; // one glyph per 8 px of a row
      if (taken.has(slot)) continue;
      taken.add(slot);
      const [g, col] = glyph[m.kind] || ["\u25cf", "#000"];
      c.fillStyle = col;
      c.fillText(g, px - 4, this.rowY(m.row) - 2);
      markersShown++;
    }
    this.markersShown = markersShown;
    // ---- selection
    if (this.selected) {
      for (const r of drawn) {
        if (r[0] === this.selected.v && r[1] === this.selected.idx) {
          c.strokeStyle = "#000";
          c.lineWidth = 2;
          c.strokeRect(r[2] - 2, r[3] - 3, r[4] + 4, r[5] + 6);
        }
      }
    }
    this.hooks.onPaint(drawn);
  }

  hit(ev) {
    const rect = this.canvas.getBoundingClientRect();
    const px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    let best = null;
    for (const r of this.drawn) {
      if (px >= r[2] - 2 && px <= r[2] + r[4] + 2 && py >= r[3] && py <= r[3] + r[5]) {
        if (!best || r[6] < best[6]) best = r;
      }
    }
    return best;
  }

  onClick(ev) {
    const r = this.hit(ev);
    if (r) this.hooks.onSelect(r[0], r[1]);
  }

  onHover(ev) {
    const r = this.hit(ev);
    this.canvas.style.cursor = r ? "pointer" : "grab";
    this.hooks.onHover(r ? { v: r[0], idx: r[1] } : null);
  }

  onLabelClick(ev) {
    const rect = this.labels.getBoundingClientRect();
    const r = Math.floor((ev.clientY - rect.top + this.scroller.scrollTop) / ROW_H);
    if (this.rows[r]) this.hooks.onRowClick(this.rows[r], r);
  }

  /** Page coordinates of the centre of a drawn event, or null. */
  locate(v, idx) {
    const rect = this.canvas.getBoundingClientRect();
    for (const r of this.drawn) {
      if (r[0] === v && r[1] === idx) return { x: rect.left + r[2] + Math.min(r[4], 20) / 2, y: rect.top + r[3] + r[5] / 2 };
    }
    return null;
  }
}

export { fmtTime };
