// Small helpers: safe DOM building (text only, never HTML), formatting, colours.

/** Characters shown as visible escapes: C0/C1 controls (ANSI escapes start with ESC), bidi
 * overrides and other invisible formatting characters. Newlines and tabs are kept. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

// Text lengths and offsets from the server count characters (code points, as Python does);
// a JavaScript string's length counts UTF-16 units, two for a character beyond U+FFFF.
export function cpLength(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export function visible(text) {
  if (text == null) return "";
  return String(text).replace(CONTROL, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** One line of at most `limit` characters, control characters escaped. */
export function short(text, limit = 80) {
  const s = visible(text).replace(/[\n\t]/g, " ");
  return s.length > limit ? s.slice(0, limit - 1) + "\u2026" : s;
}

/** Build an element: el("div", {class: "x", title: "t"}, child, "text", ...). Attribute values and
 * strings become attributes and text nodes; nothing is ever parsed as HTML. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export function fmtTime(s) {
  if (s == null || !isFinite(s)) return "-";
  const a = Math.abs(s);
  if (a === 0) return "0 s";
  if (a < 1e-3) return (s * 1e6).toFixed(1) + " \u00b5s";
  if (a < 1) return (s * 1e3).toFixed(1) + " ms";
  if (a < 100) return s.toFixed(3) + " s";
  return s.toFixed(1) + " s";
}

export function fmtNum(x, digits = 4) {
  if (x == null) return "-";
  if (typeof x !== "number") return String(x);
  if (!isFinite(x)) return String(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  return Number(x.toPrecision(digits)).toString();
}

export const TYPE_COLOURS = {
  orchestrator_decision: "#7b61ff",
  spawn: "#2f9e44",
  despawn: "#8d9b8f",
  message: "#1c7ed6",
  tool_call: "#e8590c",
  tool_result: "#f59f00",
  return: "#0ca678",
  aggregate: "#ae3ec9",
  human_intervention: "#d6336c",
  safety_event: "#c92a2a",
  llm_call: "#5c7cfa",
};

export const EDGE_COLOURS = {
  temporal: "#adb5bd",
  causal: "#868e96",
  spawn: "#2f9e44",
  message: "#1c7ed6",
  tool_dependency: "#e8590c",
  return: "#0ca678",
  aggregate: "#ae3ec9",
  safety_flow: "#c92a2a",
};

export const DIFF_COLOURS = {
  changed: "#f08c00",
  appeared: "#2b8a3e",
  disappeared: "#e03131",
  retimed: "#74c0fc",
};

/** Diverging colour scale for overlays: red (low) - grey (zero) - blue (high). */
export function overlayColour(v, lo, hi) {
  if (v == null || !isFinite(v)) return "#dee2e6";
  let x;
  if (!(hi > lo)) x = 0.5; // one value for every event: no scale to show
  else if (lo < 0 && hi > 0) x = v >= 0 ? 0.5 + 0.5 * (v / hi) : 0.5 - 0.5 * (v / lo);
  else x = (v - lo) / (hi - lo);
  x = Math.max(0, Math.min(1, x));
  // red (0) -> light grey (0.5) -> blue (1)
  const a = [201, 42, 42], m = [222, 226, 230], b = [25, 113, 194];
  const [p, q, f] = x < 0.5 ? [a, m, x * 2] : [m, b, (x - 0.5) * 2];
  const c = p.map((pv, i) => Math.round(pv + (q[i] - pv) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
