// The inspector: every field of the selected event, its content (as text, control characters
// made visible, paged), attrs and edges. Nothing from the trace is ever parsed as HTML.
import { el, clear, visible, short, fmtTime, fmtNum, cpLength, DIFF_COLOURS } from "./util.js";

export function renderInspector(root, ev, { onJump, onMore, overlayValue, overlayLabel }) {
  clear(root);
  if (!ev) {
    root.append(el("p", { class: "muted" }, "Click an event on the timeline or the graph to inspect it."));
    return;
  }
  const rows = [
    ["type", ev.type], ["id", ev.id], ["agent", ev.agent], ["role", ev.role],
    ["start", fmtTime(ev.t)], ["duration", fmtTime(ev.dur)], ["end", fmtTime(ev.end)],
    ["from", ev.from], ["to", ev.to], ["tool", ev.tool], ["decision", ev.decision], ["step", ev.step],
    ["trusted", ev.trusted == null ? null : String(ev.trusted)],
    ["tokens", `${fmtNum(ev.tokens_in)} in / ${fmtNum(ev.tokens_out)} out`], ["cost", fmtNum(ev.cost)],
    ["error", ev.error], ["content_ref", ev.content_ref],
    ["critical path", ev.on_critical_path ? "on the critical path" : "no"],
  ];
  if (overlayLabel) rows.push([overlayLabel, overlayValue == null ? "-" : fmtNum(overlayValue)]);
  const table = el("table", { class: "fields" });
  for (const [k, v] of rows) {
    if (v == null || v === "") continue;
    table.append(el("tr", null, el("th", null, k), el("td", { class: k === "error" ? "err" : null }, short(v, 400))));
  }
  root.append(el("h3", { class: "insp-title" }, el("span", { class: "badge", "data-type": ev.type }, ev.type), " ", short(ev.id, 60)));
  if (ev.diff && ev.diff.status !== "same") {
    const d = ev.diff;
    const box = el("div", { class: "diff-box diff-" + d.status },
      el("strong", null, d.status), d.fields && d.fields.length ? ": " + d.fields.map((f) => short(f, 30)).join(", ") : "");
    box.style.borderColor = DIFF_COLOURS[d.status] || "#999";
    if (d.other != null && d.other >= 0) box.append(" ", el("button", { class: "link", onclick: () => onJump(null, d.other, true) }, "show its counterpart"));
    root.append(box);
  }
  root.append(table);
  root.append(el("h4", null, "content", ev.has_content ? ` (${fmtNum(ev.content_length)} characters)` : ""));
  if (ev.has_content) {
    const pre = el("pre", { class: "content" }, visible(ev.content));
    root.append(pre);
    const shownTo = ev.content_offset + cpLength(ev.content);
    const cut = ev.content_cut != null ? Math.min(ev.content_cut, ev.content_length) : ev.content_length;
    if (shownTo < cut) {
      root.append(el("button", { class: "more", onclick: () => onMore(shownTo, pre) },
        `show more (${fmtNum(shownTo)} of ${fmtNum(ev.content_length)} characters shown)`));
    } else if (cut < ev.content_length) {
      root.append(el("p", { class: "muted" }, `this file keeps the first ${fmtNum(cut)} characters; open the trace with orchestrace view for all`));
    }
  } else root.append(el("p", { class: "muted" }, "none"));
  if (ev.attrs != null) {
    root.append(el("h4", null, "attrs"));
    root.append(el("pre", { class: "content attrs" }, visible(ev.attrs)));
    if (ev.attrs_length > ev.attrs.length) root.append(el("p", { class: "muted" }, `first ${fmtNum(ev.attrs.length)} of ${fmtNum(ev.attrs_length)} characters`));
  }
  for (const [name, list, total] of [["incoming edges", ev.in, ev.n_in], ["outgoing edges", ev.out, ev.n_out]]) {
    root.append(el("h4", null, `${name} (${total})`));
    if (!list.length) { root.append(el("p", { class: "muted" }, "none")); continue; }
    const ul = el("ul", { class: "edges" });
    for (const e of list) {
      ul.append(el("li", null, el("span", { class: "etype" }, e.type), " ",
        e.idx >= 0 ? el("button", { class: "link", onclick: () => onJump(null, e.idx) }, short(e.id, 40)) : short(e.id, 40),
        e.agent ? ` \u00b7 ${short(e.agent, 30)}` : "", e.event_type ? ` \u00b7 ${e.event_type}` : ""));
    }
    if (total > list.length) ul.append(el("li", { class: "muted" }, `\u2026 ${total - list.length} more`));
    root.append(ul);
  }
}
