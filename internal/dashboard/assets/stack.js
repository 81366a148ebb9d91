// One Stack's pages: its story (conditions, source, the operation running
// now with its engine log followed, the history as a timeline and a chart
// of durations, outputs), its pending plan with Approve, and its drift with
// "check now". Each reads the Stack again when the live connection says it
// changed, so a running up is followed to its end without a reload.
"use strict";

const stackPage = {
  key: null, // {namespace, name}
  view: null,
  following: null, // the operation whose log is being followed

  path(sub) { return "/api/stacks/" + encodeURIComponent(this.key.namespace) + "/" + encodeURIComponent(this.key.name) + (sub ? "/" + sub : ""); },
  sameStack(c) { return c.kind === "Stack" && this.key && c.namespace === this.key.namespace && c.name === this.key.name; },

  async read() {
    try {
      this.view = await api("GET", this.path());
      return this.view;
    } catch (e) {
      this.view = null;
      throw e;
    }
  },

  // act presses a button: the controller checks that the caller may patch
  // the Stack, and answers what it did or why not.
  async act(action, body, out) {
    showError(out, null);
    try {
      const r = await api("POST", this.path(action), body);
      out.className = "note";
      text(out, r.message);
    } catch (e) {
      out.className = "error";
      showError(out, e);
    }
  },
};

// -- the Stack page --

SP.pages.stack = {
  show(params) {
    stackPage.key = { namespace: params.get("namespace"), name: params.get("name") };
    text($("s-title"), stackPage.key.namespace + "/" + stackPage.key.name);
    $("s-plan-link").href = stackHref(stackPage.key.namespace, stackPage.key.name, "plan");
    $("s-drift-link").href = stackHref(stackPage.key.namespace, stackPage.key.name, "drift");
    text($("s-action-result"), "");
    $("s-log").replaceChildren();
    text($("s-log-title"), "");
    stackPage.following = null;
    this.load();
  },
  leave() { stackPage.following = null; },
  change(c) { return stackPage.sameStack(c); },
  resync() { this.load(); },

  async load() {
    let v;
    try { v = await stackPage.read(); } catch (e) { showError($("s-error"), e); $("s-body").hidden = true; return; }
    showError($("s-error"), null);
    $("s-body").hidden = false;
    $("s-states").replaceChildren(stateBadges(v.states));
    const src = $("s-source");
    src.replaceChildren(make("span", null, v.source + (v.dir ? " (" + v.dir + ")" : "") + " at "));
    src.append(v.commitURL ? link(v.commitURL, v.revision) : make("code", null, v.revision || "no revision yet"));
    $("s-suspend").hidden = !!v.suspended;
    $("s-resume").hidden = !v.suspended;
    $("s-plan-link").hidden = !v.pendingPlan;
    this.renderConditions(v.conditions || []);
    this.renderCurrent(v.current);
    this.renderHistory(v.history || []);
    renderDurations($("s-chart"), v.history || []);
    this.renderOutputs(v.outputs || {});
    if (v.current) this.follow(v.current.id);
    else if (!stackPage.following && v.history && v.history.length) this.showLog(v.history[0].id, false);
  },

  renderConditions(conds) {
    const body = document.querySelector("#s-conditions tbody");
    body.replaceChildren();
    for (const c of conds) {
      const tr = make("tr", "cond " + c.status);
      tr.append(make("td", null, c.type), make("td", null, c.status), make("td", null, c.reason), make("td", "message", c.message), make("td", null, since(c.lastTransitionTime)));
      body.append(tr);
    }
  },

  renderCurrent(op) {
    const box = $("s-current");
    box.replaceChildren();
    box.hidden = !op;
    if (!op) return;
    box.append(make("strong", null, op.type + " running"), make("span", null, " for " + duration(op.seconds || 0) + " · " + counts(op.changes) + " so far"));
    if (op.message) box.append(make("div", "message", op.message));
  },

  renderHistory(history) {
    const list = $("s-history");
    list.replaceChildren();
    for (const h of history) {
      const li = make("li", "op " + h.outcome);
      const when = h.startedAt ? new Date(h.startedAt).toLocaleString() : "";
      li.append(make("span", "outcome", h.outcome), make("span", "type", h.type), make("span", "when", when),
        make("span", "took", h.seconds ? duration(h.seconds) : ""), make("span", "changes", counts(h.changes)));
      if (h.approvedBy) li.append(make("span", "by", "approved by " + h.approvedBy));
      if (h.message) li.append(make("div", "message", h.message));
      const b = make("button", "log-button", "log");
      b.type = "button";
      b.addEventListener("click", () => this.showLog(h.id, false));
      li.append(b);
      list.append(li);
    }
  },

  renderOutputs(outputs) {
    const body = document.querySelector("#s-outputs tbody");
    body.replaceChildren();
    const keys = Object.keys(outputs).sort();
    $("s-outputs").hidden = keys.length === 0;
    for (const k of keys) {
      const tr = make("tr");
      tr.append(make("td", null, k), make("td", "value", outputs[k]));
      body.append(tr);
    }
  },

  // follow streams the running operation's log as it grows, once.
  follow(id) {
    if (stackPage.following === id) return;
    this.showLog(id, true);
  },

  async showLog(id, follow) {
    stackPage.following = follow ? id : null;
    const pre = $("s-log");
    pre.replaceChildren();
    text($("s-log-title"), "Engine log of operation " + id + (follow ? " (following)" : ""));
    let res;
    try {
      res = await fetch(stackPage.path("logs") + "?operation=" + encodeURIComponent(id) + (follow ? "&follow=1" : ""), { credentials: "same-origin" });
    } catch (e) { pre.append(make("span", "error", e.message)); return; }
    if (!res.ok) {
      const err = await res.json().catch(() => ({ error: res.statusText }));
      pre.append(make("span", "note", err.error || res.statusText));
      return;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) break;
      if (stackPage.following !== (follow ? id : null)) { reader.cancel(); return; }
      pre.append(document.createTextNode(dec.decode(value, { stream: true })));
      pre.scrollTop = pre.scrollHeight;
    }
    if (follow && stackPage.following === id) {
      stackPage.following = null;
      text($("s-log-title"), "Engine log of operation " + id);
    }
  },
};

// renderDurations draws the history's operations as bars, oldest on the
// left: the height is the duration, the colour the outcome.
function renderDurations(box, history) {
  box.replaceChildren();
  const ops = history.filter((h) => h.seconds).slice().reverse();
  if (!ops.length) return;
  const w = 24, gap = 6, h = 80;
  const max = Math.max(...ops.map((o) => o.seconds));
  const chart = svg("svg", { width: ops.length * (w + gap) + 40, height: h + 20, role: "img", "aria-label": "operation durations" });
  chart.append(svg("text", { x: 0, y: 10, class: "axis" }));
  chart.lastChild.textContent = duration(max);
  ops.forEach((o, i) => {
    const bh = Math.max(2, (o.seconds / max) * h);
    const bar = svg("rect", { x: 40 + i * (w + gap), y: h - bh + 12, width: w, height: bh, class: "bar " + o.outcome });
    const title = svg("title");
    title.textContent = o.type + " " + o.outcome + " in " + duration(o.seconds);
    bar.append(title);
    chart.append(bar);
  });
  box.append(chart);
}

// -- the plan page: the pending plan as `pulumi preview` shows it --

const opSymbol = { create: "+", update: "~", replace: "+-", delete: "-", "create-replacement": "++", "delete-replaced": "--" };

SP.pages.plan = {
  doc: null,
  show(params) {
    stackPage.key = { namespace: params.get("namespace"), name: params.get("name") };
    text($("p-title"), stackPage.key.namespace + "/" + stackPage.key.name);
    $("p-back").href = stackHref(stackPage.key.namespace, stackPage.key.name);
    text($("p-result"), "");
    this.load();
  },
  change(c) { return stackPage.sameStack(c); },
  resync() { this.load(); },

  async load() {
    let v;
    try { v = await stackPage.read(); } catch (e) { showError($("p-error"), e); return; }
    showError($("p-error"), null);
    const body = $("p-body");
    body.replaceChildren();
    $("p-approve").hidden = true;
    if (!v.pendingPlan) {
      this.doc = null;
      body.append(make("p", "note", "No plan is pending: " + (v.approvalMode === "Auto" ? "this Stack applies changes at once (Auto)." : "nothing waits for approval.")));
      return;
    }
    let doc;
    try { doc = await api("GET", stackPage.path("plan/" + encodeURIComponent(v.pendingPlan.id))); } catch (e) {
      showError($("p-error"), e);
      return;
    }
    this.doc = doc;
    const head = make("pre", "preview");
    head.append(document.createTextNode("Previewing update (" + doc.stackName + ") at " + doc.revision + "\n\n"));
    body.append(make("p", null, "Plan " + doc.id + " · made " + since(doc.createdAt) + " ago · mode " + doc.mode), head);
    const table = make("table", "plan");
    const thead = make("thead");
    const hr = make("tr");
    for (const h of ["", "Type", "Name", "Plan", "Properties"]) hr.append(make("th", null, h));
    thead.append(hr);
    const tb = make("tbody");
    for (const r of doc.resources || []) {
      const tr = make("tr", "op-" + r.op);
      tr.dataset.urn = r.urn;
      const props = make("td", "props");
      for (const p of r.properties || []) props.append(make("div", null, (opSymbol[r.op] || "~") + " " + p));
      tr.append(make("td", "symbol", opSymbol[r.op] || "~"), make("td", null, r.type), make("td", null, r.urn.split("::").pop()), make("td", null, r.op), props);
      tb.append(tr);
    }
    table.append(thead, tb);
    body.append(table);
    const c = doc.changes || {};
    body.append(make("p", "summary", "Resources: " + counts(c) + (doc.same ? ", " + doc.same + " unchanged" : "")));
    const approve = $("p-approve");
    approve.hidden = v.approvalMode !== "Manual";
    approve.dataset.plan = doc.id;
    text(approve, "Approve plan " + doc.id);
  },
};

// -- the drift page --

SP.pages.drift = {
  show(params) {
    stackPage.key = { namespace: params.get("namespace"), name: params.get("name") };
    text($("d-title"), stackPage.key.namespace + "/" + stackPage.key.name);
    $("d-back").href = stackHref(stackPage.key.namespace, stackPage.key.name);
    text($("d-result"), "");
    this.load();
  },
  change(c) { return stackPage.sameStack(c); },
  resync() { this.load(); },

  async load() {
    let v;
    try { v = await stackPage.read(); } catch (e) { showError($("d-error"), e); return; }
    showError($("d-error"), null);
    const body = $("d-body");
    body.replaceChildren();
    const d = v.drift || {};
    body.append(make("p", null, "Mode " + v.driftMode + (d.checkedAt ? " · last checked " + since(d.checkedAt) + " ago at " + (d.revision || "") : " · never checked") +
      (d.nextCheckAt ? " · next check " + new Date(d.nextCheckAt).toLocaleString() : "")));
    body.append(make("h3", null, (d.total || 0) + " drifted resources"));
    body.append(driftTable(d.resources || [], "drifted"));
    if ((d.ignored || []).length) {
      body.append(make("h3", null, "Ignored by the rules"), driftTable(d.ignored, "ignored"));
    }
    body.append(make("h3", null, "Ignore rules"));
    const rules = make("ul", "rules");
    for (const r of v.driftIgnore || []) {
      rules.append(make("li", null, "type " + (r.type || "*") + ", name " + (r.name || "*") + ": " + ((r.properties || []).join(", ") || "the whole resource")));
    }
    if (!rules.children.length) rules.append(make("li", "note", "none"));
    body.append(rules);
  },
};

function driftTable(resources, cls) {
  const table = make("table", "drift " + cls);
  const hr = make("tr");
  for (const h of ["Type", "Name", "Found", "Properties"]) hr.append(make("th", null, h));
  const thead = make("thead");
  thead.append(hr);
  const tb = make("tbody");
  for (const r of resources) {
    const tr = make("tr");
    tr.dataset.urn = r.urn;
    tr.append(make("td", null, r.type), make("td", null, r.name || r.urn.split("::").pop()), make("td", null, r.op), make("td", "props", (r.properties || []).join(", ")));
    tb.append(tr);
  }
  if (!resources.length) {
    const tr = make("tr");
    tr.append(make("td", "note", "none"));
    tb.append(tr);
  }
  table.append(thead, tb);
  return table;
}

document.addEventListener("DOMContentLoaded", () => {
  const out = $("s-action-result");
  $("s-reconcile").addEventListener("click", () => stackPage.act("reconcile", undefined, out));
  $("s-suspend").addEventListener("click", () => stackPage.act("suspend", undefined, out));
  $("s-resume").addEventListener("click", () => stackPage.act("resume", undefined, out));
  $("p-approve").addEventListener("click", (ev) => stackPage.act("approve", { plan: ev.target.dataset.plan }, $("p-result")));
  $("d-check").addEventListener("click", () => stackPage.act("check-drift", undefined, $("d-result")));
});
