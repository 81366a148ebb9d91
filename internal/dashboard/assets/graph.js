// The graph page: Stacks as boxes coloured by state, an arrow from each
// Stack to the one it waits for (dependsOn, solid) or reads the outputs of
// (stackOutputs, dotted); cross-namespace arrows dashed, cycles red. The
// layout is layered: a Stack sits one column right of everything it
// points at, so a chain reads left to right.
"use strict";

SP.pages.graph = {
  show(params) {
    $("g-namespace").value = params.get("namespace") || "";
    this.load();
  },
  change(c) { return c.kind === "Stack"; },
  resync() { this.load(); },

  async load() {
    const ns = $("g-namespace").value.trim();
    let g;
    try { g = await api("GET", "/api/graph" + (ns ? "?namespace=" + encodeURIComponent(ns) : "")); } catch (e) { showError($("g-error"), e); return; }
    showError($("g-error"), null);
    const info = [];
    if (g.truncated) info.push("Too many Stacks to draw: filter by namespace.");
    if (g.unlinked) info.push(g.unlinked + " Stacks with no edge are left off.");
    for (const c of g.cycles || []) info.push("Cycle: " + c.join(" → ") + " (none of them can become Ready).");
    text($("g-info"), info.join(" "));
    drawGraph($("g-canvas"), g);
  },
};

function drawGraph(box, g) {
  box.replaceChildren();
  if (!g.nodes.length) { box.append(make("p", "note", "No Stack depends on another here.")); return; }
  // Layer: a node's column is one more than the deepest node it points
  // at, ignoring the edges of cycles (which have no order).
  const out = {};
  for (const e of g.edges) if (!e.inCycle) (out[e.from] = out[e.from] || []).push(e.to);
  const layer = {};
  const depth = (id, seen) => {
    if (layer[id] !== undefined) return layer[id];
    if (seen.has(id)) return 0;
    seen.add(id);
    let d = 0;
    for (const t of out[id] || []) d = Math.max(d, depth(t, seen) + 1);
    layer[id] = d;
    return d;
  };
  for (const n of g.nodes) depth(n.id, new Set());
  const columns = [];
  for (const n of g.nodes) (columns[layer[n.id]] = columns[layer[n.id]] || []).push(n);
  const W = 200, H = 44, GX = 90, GY = 24;
  const pos = {};
  let rows = 0;
  columns.forEach((col, x) => col.forEach((n, y) => { pos[n.id] = { x: 20 + x * (W + GX), y: 20 + y * (H + GY) }; rows = Math.max(rows, y + 1); }));
  const canvas = svg("svg", { width: 40 + columns.length * (W + GX), height: 40 + rows * (H + GY), role: "img", "aria-label": "Stack dependency graph" });
  const defs = svg("defs");
  for (const kind of ["edge", "cycle"]) {
    const m = svg("marker", { id: "arrow-" + kind, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" });
    m.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead arrowhead-" + kind }));
    defs.append(m);
  }
  canvas.append(defs);
  for (const e of g.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    // From the dependent's left side to the upstream's right side.
    const x1 = a.x, y1 = a.y + H / 2, x2 = b.x + W, y2 = b.y + H / 2;
    const self = e.from === e.to;
    const d = self ? `M${x1},${y1} C${x1 - 60},${y1 - 60} ${x1 - 60},${y1 + 60} ${x1},${y1 + 10}`
      : `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2},${y2}`;
    const cls = ["edge", e.kind, e.crossNamespace ? "cross" : "", e.inCycle ? "cycle" : ""].join(" ").trim();
    const p = svg("path", { d, class: cls, "marker-end": "url(#arrow-" + (e.inCycle ? "cycle" : "edge") + ")", "data-from": e.from, "data-to": e.to, "data-kind": e.kind });
    const t = svg("title");
    t.textContent = e.from + (e.kind === "dependsOn" ? " depends on " : " reads the outputs of ") + e.to + (e.crossNamespace ? " (another namespace)" : "");
    p.append(t);
    canvas.append(p);
  }
  for (const n of g.nodes) {
    const p = pos[n.id];
    const state = !n.known ? "Unknown" : (n.states || []).includes("Failing") ? "Failing" : (n.states || []).includes("Running") ? "Running" :
      (n.states || []).includes("PlanPending") ? "PlanPending" : (n.states || []).includes("Ready") ? "Ready" : "Other";
    const group = svg("g", { class: "node " + state, "data-id": n.id, tabindex: n.known ? 0 : -1 });
    group.append(svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 }));
    const name = svg("text", { x: p.x + 10, y: p.y + 18, class: "name" });
    name.textContent = n.name;
    const sub = svg("text", { x: p.x + 10, y: p.y + 35, class: "sub" });
    sub.textContent = n.namespace + " · " + (n.known ? (n.states || []).join(", ") || "no state yet" : "not visible to you, or missing");
    group.append(name, sub);
    if (n.known) {
      const open = () => { location.hash = stackHref(n.namespace, n.name); };
      group.addEventListener("click", open);
      group.addEventListener("keydown", (ev) => { if (ev.key === "Enter") open(); });
    }
    canvas.append(group);
  }
  box.append(canvas);
}

document.addEventListener("DOMContentLoaded", () => {
  $("g-filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ns = $("g-namespace").value.trim();
    history.replaceState(null, "", "#/graph" + (ns ? "?namespace=" + encodeURIComponent(ns) : ""));
    SP.pages.graph.load();
  });
});
